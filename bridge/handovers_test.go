package bridge

import (
	"io"
	"net"
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
	}
	for _, c := range cases {
		if got := frontHandover(c.t, []byte(c.p), c.stdinTTY); got != c.want {
			t.Errorf("frame %c %q (stdin tty %v): %q, want %q", c.t, c.p, c.stdinTTY, got, c.want)
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
	call(true, wire.Stderr, wire.Prompt, wire.Prompt, wire.Fallback)
	call(true, wire.Replay, wire.ViaBridge, wire.Fallback)
	call(false, wire.Prompt, wire.Fallback)
	got := s.Status().FrontHandovers
	if len(got) != 2 || got["prompt"] != 1 || got["fallback"] != 1 {
		t.Fatalf("front_handovers %v, want prompt 1 and fallback 1", got)
	}
}
