package bridge

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

func TestFrontHandoverFrames(t *testing.T) {
	cases := []struct {
		t        wire.Type
		p        string
		stdinTTY bool
		want     string
	}{
		{wire.Stdout, "x", false, ""},
		{wire.Stderr, "x", false, ""},
		{wire.Exit, "\x00\x00\x00\x00", false, ""},
		{wire.Accept, "", true, ""},
		{wire.Accept, "raw", false, ""}, // the front makes no terminal raw: none to make
		{wire.Accept, "raw", true, "terminal"},
		{wire.Prompt, "Password: ", false, "prompt"},
		{wire.ProxyCommand, "{}", false, "proxy command"},
		{wire.Replay, "input", false, "fallback"},
		{wire.ViaBridge, "", false, "fallback"},
		{wire.Fallback, "reason", false, "fallback"},
		{wire.Handover, "", false, "command line"},
		{wire.StopStdin, "", false, ""},
	}
	for _, c := range cases {
		if got := frontHandover(c.t, []byte(c.p), c.stdinTTY); got != c.want {
			t.Errorf("frame %c %q (stdin tty %v): %q, want %q", c.t, c.p, c.stdinTTY, got, c.want)
		}
	}
}

// TestFrontHandoverFramesAsFront: the frames the C front's frame loop
// serves itself (its cases, but 'G', the handover) count none; every other
// frame the daemon sends a shim is a handover.
func TestFrontHandoverFramesAsFront(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "fakessh", "front", "front.c"))
	if err != nil {
		t.Fatal(err)
	}
	_, loop, ok := strings.Cut(string(src), "char type = peek_type();")
	if !ok {
		t.Fatal("front.c: no frame loop (peek_type)")
	}
	served := map[wire.Type]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\t\tcase '(.)':`).FindAllStringSubmatch(loop, -1) {
		served[wire.Type(m[1][0])] = true
	}
	if !served[wire.Stdout] || !served[wire.Handover] {
		t.Fatalf("front.c's frame loop: cases %v, not found as expected", served)
	}
	toShim := []wire.Type{wire.Accept, wire.Fallback, wire.Replay, wire.ViaBridge, wire.Stdout, wire.Stderr, wire.Exit,
		wire.Prompt, wire.Handover, wire.OnSignal, wire.StopStdin, wire.ProxyCommand}
	for _, f := range toShim {
		got := frontHandover(f, nil, false)
		if want := served[f] && f != wire.Handover; (got == "") != want {
			t.Errorf("frame %c: handover %q; served by the front itself: %v", f, got, want)
		}
	}
}

// TestFrontHandoversCounted: a front's call is counted once, at the frame
// that hands it over, and a Go shim's never.
func TestFrontHandoversCounted(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	s := New(Config{}, log)
	call := func(front bool, frames ...wire.Type) {
		a, b := net.Pipe()
		defer a.Close()
		go func() { _, _ = io.Copy(io.Discard, b) }()
		iv := &invocation{conn: a, handovers: &s.handovers}
		iv.hello.Front = front
		for _, f := range frames {
			if err := iv.send(f, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	call(true, wire.Stderr, wire.Accept, wire.Stdout, wire.Exit)
	call(true, wire.Accept, wire.StopStdin, wire.Stdout, wire.Exit) // sshd's eow@openssh.com
	call(true, wire.Stderr, wire.Prompt, wire.Prompt, wire.Fallback)
	call(true, wire.Replay, wire.ViaBridge, wire.Fallback)
	call(false, wire.Prompt, wire.Fallback)
	got := s.Status().FrontHandovers
	if len(got) != 2 || got["prompt"] != 1 || got["fallback"] != 1 {
		t.Fatalf("front_handovers %v, want prompt 1 and fallback 1", got)
	}
}
