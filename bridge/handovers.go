package bridge

import (
	"maps"
	"sync"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

// handoverCounts counts the calls the C front handed to the Go shim, by
// why. Each behaves as the Go shim's would have, but costs a Go program's
// start (~5 ms here), so status shows them rather than leaving them
// silently slower.
type handoverCounts struct {
	mu sync.Mutex
	n  map[string]uint64
}

func (h *handoverCounts) add(why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]uint64{}
	}
	h.n[why]++
}

func (h *handoverCounts) snapshot() map[string]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.n)
}

// frontHandover is why the C front hands its call to the Go shim when it
// reads frame t with payload p, or "" where it carries on itself: it
// serves output, the exit status, the line for a signal, the end of
// stdin's reading (sshd's eow@openssh.com) and a plain accept, and leaves
// the rest to the Go shim (fakessh/front/front.c, its frame loop).
func frontHandover(t wire.Type, p []byte, stdinTTY bool) string {
	switch t {
	case wire.Stdout, wire.Stderr, wire.Exit, wire.OnSignal, wire.StopStdin:
		return ""
	case wire.Accept:
		if stdinTTY && string(p) == "raw" {
			return "terminal"
		}
		return ""
	case wire.Prompt:
		return "prompt"
	case wire.ProxyCommand:
		return "proxy command"
	case wire.Replay, wire.ViaBridge, wire.Fallback:
		return "fallback"
	case wire.Handover:
		return "command line"
	}
	return "frame " + string(t)
}
