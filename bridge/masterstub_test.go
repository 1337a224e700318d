package bridge

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/internal/cbuild"
)

// buildFront builds the C front for the master stub tests.
func buildFront(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc): the front is not built here")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), fakessh.FrontBinary)
	if err := cbuild.Build(ctx, root, cbuild.Front, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// procState is the state letter of pid in /proc ("" once reaped).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return rest[:1]
}

// TestMasterStub: the process standing for a master is titled as ssh's
// ("ssh: PATH [mux]", comm ssh), relays SIGWINCH, reports the signal it
// died of, and is gone (reaped) once the daemon ends it, without that
// being reported.
func TestMasterStub(t *testing.T) {
	front := buildFront(t)
	type death struct{ sig syscall.Signal }
	start := func(t *testing.T) (*masterStub, chan struct{}, chan death) {
		winch, died := make(chan struct{}, 4), make(chan death, 1)
		m, err := startMasterStub(front, "/tmp/cp-x", func() { winch <- struct{}{} }, func(sig syscall.Signal) { died <- death{sig} })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.end)
		return m, winch, died
	}
	wait := func(t *testing.T, what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
		}
	}

	m, winch, died := start(t)
	// The title is set by exec (the kernel fills the arguments in after
	// the exec is reported, so an early read finds none); comm once the
	// stub has run its start.
	proc := func(f string) string { b, _ := os.ReadFile("/proc/" + strconv.Itoa(m.pid) + "/" + f); return string(b) }
	titled := func() bool {
		return strings.TrimRight(proc("cmdline"), "\x00") == "ssh: /tmp/cp-x [mux]" && proc("comm") == "ssh\n"
	}
	for i := 0; i < 100 && !titled(); i++ {
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	if !titled() {
		t.Errorf("cmdline %q, comm %q; want ssh: /tmp/cp-x [mux], ssh", proc("cmdline"), proc("comm"))
	}
	// SIGWINCH may come before the stub's handler is in place (it is
	// then ignored, its default): send until one is relayed.
	relayed := make(chan struct{})
	go func() {
		for {
			_ = syscall.Kill(m.pid, syscall.SIGWINCH)
			select {
			case <-winch:
				close(relayed)
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	wait(t, "SIGWINCH relayed", relayed)
	_ = syscall.Kill(m.pid, syscall.SIGTERM)
	select {
	case d := <-died:
		if d.sig != syscall.SIGTERM {
			t.Errorf("died of %v, want SIGTERM", d.sig)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("death by SIGTERM not reported")
	}
	wait(t, "end of the killed stub", m.done)
	if s := procState(m.pid); s != "" {
		t.Errorf("killed stub not reaped: state %q", s)
	}

	m, _, died = start(t)
	pid := m.pid
	m.end()
	wait(t, "end of the ended stub", m.done)
	if s := procState(pid); s != "" {
		t.Errorf("ended stub still there: state %q", s)
	}
	select {
	case d := <-died:
		t.Errorf("the daemon's own end reported as a death (%v)", d.sig)
	default:
	}
}
