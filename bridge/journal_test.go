package bridge

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

// waitIdle waits until no invocation is in flight on any target (the
// shim has its answer a moment before the daemon's bookkeeping ends).
func waitIdle(t *testing.T, h *harness) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		busy := h.srv.active.Load() > 0
		for _, tg := range h.srv.targets.all() {
			busy = busy || tg.inflight.Load() > 0
		}
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("invocations never finished")
		}
		time.Sleep(time.Millisecond) // polling a condition, not a delay
	}
}

// TestJournalDroppedWithConnection: an invocation's entry goes when its
// target's connection closes (here: -O stop, as reset_connection), with
// nothing configured.
func TestJournalDroppedWithConnection(t *testing.T) {
	h := newHarness(t, 0)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo kept-a-while"), ""); r.code != 0 {
		t.Fatalf("ssh: %+v", r)
	}
	waitIdle(t, h)
	h.srv.expireIdle(time.Now()) // notes the open connection
	if targetEntries(h) != 1 {
		t.Fatal("entry not in the journal while its connection is open")
	}
	if r := h.run("ssh", h.sshArgs("-O", "stop", "127.0.0.1"), ""); r.code != 0 {
		t.Fatalf("ssh -O stop: %+v", r)
	}
	for deadline := time.Now().Add(5 * time.Second); h.srv.targets.connected(); {
		if time.Now().After(deadline) {
			t.Fatal("connection still open after -O stop")
		}
		time.Sleep(time.Millisecond) // polling a condition, not a delay
	}
	waitIdle(t, h)
	h.srv.expireIdle(time.Now())
	if targetEntries(h) != 0 {
		t.Error("entry still in the journal after its connection closed")
	}
}

// TestJournalKeep: with a keep time, entries outlive their connection
// until it passes.
func TestJournalKeep(t *testing.T) {
	h := newHarnessConfig(t, 0, Config{JournalKeep: time.Hour})
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo kept-an-hour"), ""); r.code != 0 {
		t.Fatalf("ssh: %+v", r)
	}
	waitIdle(t, h)
	h.srv.expireIdle(time.Now())
	h.srv.targets.closeAll()
	h.srv.expireIdle(time.Now())
	if targetEntries(h) != 1 {
		t.Fatal("entry dropped before its keep time")
	}
	h.srv.expireIdle(time.Now().Add(time.Hour + time.Second))
	if targetEntries(h) != 0 {
		t.Error("entry kept past its keep time")
	}
}

func TestJournalOff(t *testing.T) {
	h := newHarnessConfig(t, 0, Config{JournalOff: true})
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo unrecorded"), ""); r.stdout != "unrecorded\n" {
		t.Fatalf("ssh: %+v", r)
	}
	waitIdle(t, h)
	if n := len(h.srv.journal.Snapshot()); n != 0 {
		t.Errorf("%d entries with the journal off", n)
	}
}

// TestDDUploadNotJournaled: a piped upload's content (copy content=,
// perhaps a no_log task's) is not kept; its size is.
func TestDDUploadNotJournaled(t *testing.T) {
	h := newHarness(t, 0)
	remote := filepath.Join(t.TempDir(), "f")
	content := "upload-marker-91c2"
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "dd of="+remote+" bs=65536"), content); r.code != 0 {
		t.Fatalf("dd: %+v", r)
	}
	waitIdle(t, h)
	var found bool
	for _, v := range h.srv.journal.Snapshot() {
		if v.Route != routeDD && v.Route != routeExec { // exec: no interpreter up
			continue
		}
		found = true
		if len(v.Stdin.Data) != 0 || v.Stdin.Size != int64(len(content)) || !v.StdinHidden {
			t.Errorf("dd entry stdin %+v hidden %v", v.Stdin, v.StdinHidden)
		}
	}
	if !found || journalHas(h, content) {
		t.Errorf("dd entry found %v; upload content in the journal %v", found, journalHas(h, content))
	}
}

// targetEntries counts the journal's entries for a target (not -O's).
func targetEntries(h *harness) int {
	n := 0
	for _, v := range h.srv.journal.Snapshot() {
		if v.Target != "" {
			n++
		}
	}
	return n
}

// TestJournalConcealsCommands: a command the bridge cannot tell from a
// no_log task's (raw's, a user's own) leaves its program, route, target
// and exit status in the journal, not its command line or output.
func TestJournalConcealsCommands(t *testing.T) {
	h := newHarness(t, 0)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo concealed-word"), ""); r.code != 0 || !strings.Contains(r.stdout, "concealed-word") {
		t.Fatalf("ssh: %+v", r)
	}
	waitIdle(t, h)
	if targetEntries(h) != 1 {
		t.Fatal("no entry for the command")
	}
	if journalHas(h, "concealed-word") {
		t.Error("the journal shows the command or its output")
	}
	for _, v := range h.srv.journal.Snapshot() {
		if v.Target != "" && (!v.NoLog || v.Route != "exec" || len(v.Argv) != 1 || v.Stdout.Size == 0) {
			t.Errorf("entry %+v: want no_log, route exec, the program only, the output's size", v)
		}
	}
}

// journalHas reports whether any view of the journal holds s.
func journalHas(h *harness, s string) bool {
	for _, v := range h.srv.journal.Snapshot() {
		for _, b := range [][]byte{v.Stdin.Data, v.Stdout.Data, v.Stderr.Data, v.ModuleArgs, []byte(strings.Join(v.Argv, " "))} {
			if strings.Contains(string(b), s) {
				return true
			}
		}
	}
	return false
}

// TestFallbackEntryHidesCommand: an invocation handed to the real binary
// keeps the program's name of its command line only (it may be a no_log
// task's, with its environment), and, having no connection of its own,
// leaves the journal once no connection is open.
func TestFallbackEntryHidesCommand(t *testing.T) {
	h := newHarness(t, 0)
	secret := "fallback-env-7c1d"
	c, err := net.Dial("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	// Without the shim's parse: the daemon hands it to the real ssh.
	hello, _ := json.Marshal(wire.HelloMsg{Prog: "ssh", Argv: []string{"127.0.0.1", "/bin/sh -c 'APITOKEN=" + secret + " /usr/bin/python3'"},
		Cwd: h.cwd, Env: []string{"HOME=" + h.home}})
	if err := wire.Write(c, wire.Hello, hello); err != nil {
		t.Fatal(err)
	}
	f, err := wire.Read(c)
	c.Close()
	if err != nil || f.Type != wire.Fallback {
		t.Fatalf("got %v %v, want a fallback", f.Type, err)
	}
	waitIdle(t, h)
	var found bool
	for _, v := range h.srv.journal.Snapshot() {
		if v.Route == routeFallback {
			found = true
			if strings.Join(v.Argv, " ") != "ssh" {
				t.Errorf("fallback entry's argv %q", v.Argv)
			}
		}
	}
	if !found || journalHas(h, secret) {
		t.Fatalf("fallback entry found %v; its command in the journal %v", found, journalHas(h, secret))
	}
	h.srv.expireIdle(time.Now())
	if n := len(h.srv.journal.Snapshot()); n != 0 {
		t.Errorf("%d entries left with no connection open", n)
	}
}
