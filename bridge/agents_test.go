package bridge

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
)

// TestInterpreterLimit checks that a target keeps at most its maximum of
// interpreters, retiring the least recently used idle one, and refuses a
// new one (so the step goes through passthrough) when all are busy.
func TestInterpreterLimit(t *testing.T) {
	h := newHarness(t, 0)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("first call: %+v", r)
	}
	tg := h.srv.targets.all()[0]
	tg.agents.max = 2
	ctx := context.Background()
	start := func(python string) *interp.Client {
		t.Helper()
		c, err := tg.agent(ctx, nil, python, nil)
		if err != nil {
			t.Fatalf("agent %s: %v", python, err)
		}
		return c
	}
	a := start("python3")
	b := start("/usr/bin/python3")
	if again := start("python3"); again != a {
		t.Fatal("a running interpreter was not reused")
	}
	// b is now the least recently used: a third interpreter retires it.
	c := start("/usr/bin/env python3")
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("least recently used interpreter not retired")
	}
	select {
	case <-a.Done():
		t.Fatal("recently used interpreter retired")
	default:
	}

	// Both remaining interpreters busy: no room for another.
	release := make(chan struct{})
	defer close(release)
	for _, cl := range []*interp.Client{a, c} {
		pr, pw := io.Pipe()
		go func() {
			<-release
			pw.Close()
		}()
		go func() { _, _ = cl.Exec(ctx, interp.ExecRequest{Command: "cat", Stdin: pr}) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.Stats().InFlight == 0 || c.Stats().InFlight == 0 {
		if time.Now().After(deadline) {
			t.Fatal("requests never in flight")
		}
		time.Sleep(time.Millisecond) // polling a condition, not a delay
	}
	if _, err := tg.agent(ctx, nil, "/usr/bin/python3", nil); !errors.Is(err, errInterpreterLimit) {
		t.Fatalf("all busy: got %v, want errInterpreterLimit", err)
	}
}

// TestControlPersistExpiry: a target idle for its ControlPersist closes
// its connection (and interpreters), like an ssh master; the next step
// logs in again. Never while an invocation is in flight.
func TestControlPersistExpiry(t *testing.T) {
	h := newHarness(t, 0)
	args := h.sshArgs("127.0.0.1", "true") // ControlPersist=60s, as Ansible passes
	if r := h.run("ssh", args, ""); r.code != 0 {
		t.Fatalf("first call: %+v", r)
	}
	tg := h.srv.targets.all()[0]
	// The shim has its exit status before the daemon finishes the
	// invocation's bookkeeping.
	for deadline := time.Now().Add(5 * time.Second); tg.inflight.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatal("invocation never finished")
		}
		time.Sleep(time.Millisecond) // polling a condition, not a delay
	}
	now := time.Now()
	if tg.expireIdle(now) {
		t.Fatal("expired before ControlPersist passed")
	}
	iv := &invocation{}
	tg.attach(iv) // as serveSSH does before it dials
	if tg.expireIdle(now.Add(time.Hour)) {
		t.Fatal("expired with an invocation in flight")
	}
	tg.invocationDone(iv)
	if !tg.expireIdle(now.Add(time.Hour)) {
		t.Fatal("not expired after ControlPersist")
	}
	if r := h.run("ssh", args, ""); r.code != 0 {
		t.Fatalf("call after expiry: %+v", r)
	}
	tg.mu.Lock()
	dials := tg.dials
	tg.mu.Unlock()
	if dials != 2 {
		t.Fatalf("%d dials, want 2 (a fresh login after expiry)", dials)
	}
}
