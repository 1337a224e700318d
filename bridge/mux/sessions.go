package mux

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// takeID gives the lowest channel number free in the master, as
// channel_new does: ssh's master numbers each client's control channel
// and each session so, 0 being the mux listener's (one client at a time
// gets session 2 every time).
func (l *Listener) takeID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := uint32(1)
	for l.ids[id] {
		id++
	}
	l.ids[id] = true
	return id
}

// freeID makes a channel number free again.
func (l *Listener) freeID(id uint32) {
	l.mu.Lock()
	delete(l.ids, id)
	l.mu.Unlock()
}

// track adds or removes an open session, and the terminal ones to the
// SIGWINCH relay.
func (l *Listener) track(s *session, open bool) {
	l.mu.Lock()
	if open {
		l.sessions[s] = true
	} else {
		delete(l.sessions, s)
	}
	l.mu.Unlock()
	if s.tty {
		winch.track(s, open)
	}
}

// WindowChanged is SIGWINCH to this listener's master's own process:
// each of its sessions with a terminal sends the terminal's size again.
func (l *Listener) WindowChanged() {
	l.mu.Lock()
	var all []*session
	for s := range l.sessions {
		if s.tty {
			all = append(all, s)
		}
	}
	l.mu.Unlock()
	for _, s := range all {
		s.windowChanged()
	}
}

// openMessage is the ~# listing: the listener's open sessions
// (channel_open_message lists the master's open channels).
func (l *Listener) openMessage() string {
	l.mu.Lock()
	var ids []int
	for s := range l.sessions {
		ids = append(ids, int(s.id))
	}
	l.mu.Unlock()
	sort.Ints(ids)
	var b strings.Builder
	b.WriteString("The following connections are open:\r\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "  #%d client-session\r\n", id)
	}
	return b.String()
}

// winch relays SIGWINCH, which a mux client sends to its master's pid
// when its terminal is resized, to every session with a terminal: each
// reads its terminal's size again (channel_send_window_changes).
var winch = &winchRelay{ttys: map[*session]bool{}}

type winchRelay struct {
	once sync.Once
	mu   sync.Mutex
	ttys map[*session]bool
}

func (w *winchRelay) track(s *session, open bool) {
	w.once.Do(func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGWINCH)
		go func() {
			for range sig {
				w.mu.Lock()
				var all []*session
				for s := range w.ttys {
					all = append(all, s)
				}
				w.mu.Unlock()
				for _, s := range all {
					s.windowChanged()
				}
			}
		}()
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if open {
		w.ttys[s] = true
	} else {
		delete(w.ttys, s)
	}
}
