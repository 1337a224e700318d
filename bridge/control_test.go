package bridge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond (a condition, not a delay) for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStopLetsInFlightFinish: `ssh -O stop` (another run's
// reset_connection) on a shared target stops new sessions but lets the
// running ones finish, as an OpenSSH master does: a passthrough command
// and a step in an interpreter both complete, a new step gets a fresh
// connection and interpreter, and the old interpreter is retired once
// the step it served is over.
func TestStopLetsInFlightFinish(t *testing.T) {
	wrapper := pingWrapper(t)
	py := targetPython(t)
	sudo := filepath.Join(t.TempDir(), "sudo")
	if err := os.WriteFile(sudo, []byte("#!/bin/sh\nwhile [ \"$1\" != /bin/sh ]; do shift; done\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, 0)
	become := `/bin/sh -c '` + sudo + ` -H -S -n  -u root /bin/sh -c '"'"'echo BECOME-SUCCESS-abcdefghijklmnopqrstuvwxyzabcdef ; ` + py + `'"'"' && sleep 0'`
	if r := h.runStdinAfter("ssh", h.sshArgs("127.0.0.1", become), "BECOME-SUCCESS-", wrapper); r.code != 0 || !strings.Contains(r.stdout, pong) {
		t.Fatalf("starting the become interpreter: %+v", r)
	}
	tg := h.srv.targets.all()[0]
	old := tg.interpreterStatus()
	if len(old) != 1 {
		t.Fatalf("interpreters %+v, want the become one", old)
	}
	oldAgent, _, _ := tg.runningAgent(context.Background(), tg.agentKeys()[0])

	dir := t.TempDir()
	execGate, agentGate := filepath.Join(dir, "exec"), filepath.Join(dir, "agent")
	for _, f := range []string{execGate, agentGate} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	type res struct {
		name string
		r    result
	}
	done := make(chan res, 2)
	go func() {
		done <- res{"exec", h.run("ssh", h.sshArgs("127.0.0.1", "cat "+execGate+"; echo exec done"), "")}
	}()
	// Not a module: the inner python runs in the become interpreter.
	script := "print(open(" + "'" + agentGate + "'" + ").read() + ' agent done')\n"
	go func() {
		done <- res{"agent", h.runStdinAfter("ssh", h.sshArgs("127.0.0.1", become), "BECOME-SUCCESS-", script)}
	}()
	waitFor(t, "both steps in flight", func() bool {
		busy := 0
		for _, in := range tg.interpreterStatus() {
			busy += in.InFlight
		}
		return busy == 1 && h.ts.execs.Load() >= 2 // the interpreter's, then cat
	})

	if r := h.run("ssh", h.sshArgs("-O", "stop", "127.0.0.1"), ""); r.code != 0 {
		t.Fatalf("stop: %+v", r)
	}
	// New steps get a new connection and a new interpreter.
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo fresh"), ""); r.stdout != "fresh\n" {
		t.Fatalf("step after stop: %+v", r)
	}
	if n := h.ts.conns.Load(); n != 2 {
		t.Fatalf("%d connections after stop, want 2", n)
	}
	if r := h.runStdinAfter("ssh", h.sshArgs("127.0.0.1", become), "BECOME-SUCCESS-", wrapper); r.code != 0 || !strings.Contains(r.stdout, pong) {
		t.Fatalf("become step after stop: %+v", r)
	}
	if now := tg.interpreterStatus(); len(now) != 1 || now[0].PID == old[0].PID {
		t.Fatalf("interpreters after stop %+v, want a new one (old pid %d)", now, old[0].PID)
	}
	select {
	case <-oldAgent.Done():
		t.Fatal("the old interpreter was closed with a step in flight")
	default:
	}

	for _, f := range []string{execGate, agentGate} {
		if err := os.WriteFile(f, []byte("gate"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		d := <-done
		want := map[string]string{"exec": "gateexec done\n", "agent": "gate agent done\n"}[d.name]
		if d.r.code != 0 || !strings.HasSuffix(d.r.stdout, want) {
			t.Errorf("%s step in flight across the stop: %+v", d.name, d.r)
		}
	}
	select {
	case <-oldAgent.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the old interpreter was not retired after its step")
	}
}

// agentKeys lists the target's interpreter slots.
func (t *target) agentKeys() []slotKey {
	t.agents.mu.Lock()
	defer t.agents.mu.Unlock()
	var keys []slotKey
	for k := range t.agents.slots {
		keys = append(keys, k)
	}
	return keys
}

// TestStopKeepsHeldTempDirs: a task of one run between its upload and
// its module run must not lose its temp dir to another run's
// reset_connection; to Ansible it is a directory on the target.
func TestStopKeepsHeldTempDirs(t *testing.T) {
	wrapper := pingWrapper(t)
	py := targetPython(t)
	h := newHarness(t, 0)
	ssh := func(cmd string, extra ...string) result {
		t.Helper()
		return h.run("ssh", h.sshArgs(append(extra, "127.0.0.1", cmd)...), "")
	}
	base := filepath.Join(t.TempDir(), ".ansible", "tmp")
	held := base + "/ansible-tmp-1"
	if r := ssh(ansibleMkdir(base, "ansible-tmp-1")); r.code != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	local := filepath.Join(t.TempDir(), "AnsiballZ_ping.py")
	if err := os.WriteFile(local, []byte(wrapper), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "put "+local+" "+held+"/AnsiballZ_ping.py\n"); r.code != 0 {
		t.Fatalf("put: %+v", r)
	}
	if r := h.run("ssh", h.sshArgs("-O", "stop", "127.0.0.1"), ""); r.code != 0 {
		t.Fatalf("stop: %+v", r)
	}
	if r := ssh(`/bin/sh -c 'chmod u+x ` + held + `/ ` + held + `/AnsiballZ_ping.py && sleep 0'`); r.code != 0 {
		t.Fatalf("chmod after stop: %+v", r)
	}
	if r := ssh(`/bin/sh -c '`+py+` `+held+`/AnsiballZ_ping.py && sleep 0'`, "-tt"); r.code != 0 || !strings.Contains(r.stdout, pong) {
		t.Fatalf("module from the held dir after stop: %+v", r)
	}
}
