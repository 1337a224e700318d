package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusedPTYModule: where sshd refuses the login a terminal (no-pty,
// restrict, PermitTTY no), a module step on -tt (pipelining off) does not
// run on a terminal of the bridge's own: it runs as sent, without one, as
// stock's does, and the refusal shows as ssh shows it. sshd is asked once
// per connection.
func TestRefusedPTYModule(t *testing.T) {
	wrapper := pingWrapper(t)
	h := newHarness(t, 0)
	h.ts.refusePTY.Store(true)
	py := targetPython(t)
	base := filepath.Join(t.TempDir(), ".ansible", "tmp")
	local := filepath.Join(t.TempDir(), "AnsiballZ_ping.py")
	if err := os.WriteFile(local, []byte(wrapper), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ansible-tmp-1", "ansible-tmp-2"} {
		dir := base + "/" + name
		if r := h.run("ssh", h.sshArgs("127.0.0.1", ansibleMkdir(base, name)), ""); r.code != 0 {
			t.Fatalf("mkdir %s: %+v", name, r)
		}
		if r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "put "+local+" "+dir+"/AnsiballZ_ping.py\n"); r.code != 0 {
			t.Fatalf("put: %+v", r)
		}
		r := h.run("ssh", h.sshArgs("-tt", "127.0.0.1", `/bin/sh -c '`+py+` `+dir+`/AnsiballZ_ping.py && sleep 0'`), "")
		if r.code != 0 || !strings.Contains(r.stdout, pong) || strings.Contains(r.stdout, "\r\n") ||
			r.stderr != "PTY allocation request failed\r\nShared connection to 127.0.0.1 closed.\r\n" {
			t.Fatalf("ping on -tt, terminal refused: %+v", r)
		}
	}
	if n := h.routes()["module"]; n != 0 {
		t.Errorf("routes %v: a -tt module step ran in the interpreter, on a terminal sshd refused", h.routes())
	}
	// One probe, then each step's own pty-req.
	if n := h.ts.ptyRefused.Load(); n != 3 {
		t.Errorf("%d pty-reqs refused, want 3 (one probe, two steps)", n)
	}
	if slow := h.srv.Status().Targets[0].Slow; slow[slowNoPTY] != 2 {
		t.Errorf("slow paths %v, want %q twice", slow, slowNoPTY)
	}
}

// TestRefusedPTYExec: a refused pty-req, as ssh answers it
// (clientloop.c client_status_confirm). Where the master asked for no
// terminal, the session goes on without one and the master says so on
// the client's stderr; where it asked for one itself (-t, -tt), the
// session's command runs unread: a mux client prints only "Shared
// connection to HOST closed.", and a master running its own session
// dies of it, its connection with it.
func TestRefusedPTYExec(t *testing.T) {
	h := newHarness(t, 0)
	h.ts.refusePTY.Store(true)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("master: %+v", r)
	}
	r := h.run("ssh", h.sshArgs("-tt", "127.0.0.1", "echo out; echo err >&2; exit 3"), "")
	if want := (result{stdout: "out\n", stderr: "PTY allocation request failed\r\nerr\nShared connection to 127.0.0.1 closed.\r\n", code: 3}); r != want {
		t.Errorf("-tt over a master without one:\n got %+v\nwant %+v", r, want)
	}

	// The exit status comes through, not a death by a signal (sshd's
	// command dies of SIGPIPE writing to the stdout ssh's master
	// closed).
	cp := filepath.Join(t.TempDir(), "tt")
	for _, tc := range []struct {
		who, cmd string
		code     int
	}{
		{"master", "echo out; echo err >&2; exit 3", 3},
		{"client", "echo out; kill -PIPE $$", 255},
	} {
		r := h.run("ssh", h.sshArgsAt(cp, "-tt", "127.0.0.1", tc.cmd), "")
		if want := (result{stderr: "Shared connection to 127.0.0.1 closed.\r\n", code: tc.code}); r != want {
			t.Errorf("-tt %s of a -tt master:\n got %+v\nwant %+v", tc.who, r, want)
		}
	}
	if r := h.run("ssh", h.sshArgsAt(cp, "127.0.0.1", "echo ran"), ""); r.code != 0 || r.stdout != "ran\n" || r.stderr != "" {
		t.Errorf("a client without -t of a -tt master: %+v", r)
	}

	own := filepath.Join(t.TempDir(), "own")
	r = h.run("ssh", withOption(h.sshArgsAt(own, "-tt", "127.0.0.1", "echo ran"), "ControlPersist", "no"), "")
	if want := (result{stderr: "PTY allocation request failed on channel 1\r\n", code: 255}); r != want {
		t.Errorf("-tt master running its own session:\n got %+v\nwant %+v", r, want)
	}
	waitFor(t, "the master's socket to go", func() bool { _, err := os.Stat(own); return err != nil })
}
