package mux

import (
	"fmt"
	"io"

	"golang.org/x/crypto/ssh"
)

// EscapeTarget is the session an escape filter acts on.
type EscapeTarget interface {
	// Say writes to the client's stderr.
	Say(s string)
	// End closes the session's channel (~.).
	End()
	// Break sends a BREAK of ms milliseconds (~B).
	Break(ms uint32)
	// OpenMessage is the ~# listing.
	OpenMessage() string
}

// NewEscapeFilter filters r, a mux client's terminal input, as ssh's
// master does (clientloop.c's process_escapes for a channel with a
// control client): escape after a newline starts a command; ~. ends the
// session, ~B sends a break, ~R asks for a rekey, ~? and ~# print, and
// what ssh keeps for its own client (~^Z, ~v, ~V, ~&, ~C) is "not
// available to multiplexed sessions". Reading ends with an error once ~.
// has ended the session. ssh's master tracks "after a newline" across
// all its sessions at once; here each session has its own.
func NewEscapeFilter(r io.Reader, escape byte, t EscapeTarget) io.Reader {
	return &escapeFilter{r: r, t: t, escape: escape, lastWasCR: true}
}

// errEnded is the read of a filter whose ~. ended the session.
var errEnded = fmt.Errorf("the session was ended with an escape: %w", errWoken)

type escapeFilter struct {
	r         io.Reader
	t         EscapeTarget
	escape    byte
	pending   bool
	lastWasCR bool
	buf       [4096]byte
	rest      []byte // filtered, not yet returned
}

// escapeHelp is print_escape_help's text for a mux client.
func escapeHelp(e byte) string {
	return fmt.Sprintf("%c?\r\nSupported escape sequences:\r\n", e) +
		fmt.Sprintf(" %c.   - terminate session\r\n", e) +
		fmt.Sprintf(" %cB   - send a BREAK to the remote system\r\n", e) +
		fmt.Sprintf(" %cR   - request rekey\r\n", e) +
		fmt.Sprintf(" %c#   - list forwarded connections\r\n", e) +
		fmt.Sprintf(" %c?   - this message\r\n", e) +
		fmt.Sprintf(" %c%c   - send the escape character by typing it twice\r\n", e, e) +
		"(Note that escapes are only recognized immediately after newline.)\r\n"
}

func (f *escapeFilter) Read(p []byte) (int, error) {
	if len(f.rest) > 0 {
		n := copy(p, f.rest)
		f.rest = f.rest[n:]
		return n, nil
	}
	for {
		n, err := f.r.Read(f.buf[:])
		var out []byte
		for _, ch := range f.buf[:n] {
			if f.pending {
				f.pending = false
				switch ch {
				case '.':
					// ssh queues "~.", then force-closes the channel
					// with the queue: the client sees nothing.
					f.t.End()
					return 0, errEnded
				case 'Z' - 64, 'v', 'V', '&', 'C':
					name := string(ch)
					if ch == 'Z'-64 {
						name = "^Z"
					}
					f.say(fmt.Sprintf("%c%s escape not available to multiplexed sessions\r\n", f.escape, name))
					continue
				case 'B':
					f.say(fmt.Sprintf("%cB\r\n", f.escape))
					f.t.Break(1000)
					continue
				case 'R':
					// A rekey of the master's connection: x/crypto rekeys
					// by its own schedule and cannot be asked.
					continue
				case '?':
					f.say(escapeHelp(f.escape))
					continue
				case '#':
					f.say(fmt.Sprintf("%c#\r\n", f.escape) + f.t.OpenMessage())
					continue
				default:
					if ch != f.escape {
						out = append(out, f.escape)
					}
				}
			} else if f.lastWasCR && ch == f.escape {
				f.pending = true
				continue
			}
			f.lastWasCR = ch == '\r' || ch == '\n'
			out = append(out, ch)
		}
		if len(out) > 0 || err != nil {
			k := copy(p, out)
			f.rest = out[k:]
			if len(f.rest) > 0 {
				err = nil // the rest first
			}
			return k, err
		}
	}
}

func (f *escapeFilter) say(s string) { f.t.Say(s) }

// A session is its own escapes' target.
func (s *session) Say(msg string)      { _, _ = io.WriteString(s.errOut, msg) }
func (s *session) End()                { s.force() }
func (s *session) OpenMessage() string { return s.cl.l.openMessage() }
func (s *session) Break(ms uint32) {
	_, _ = s.ch.SendRequest("break", false, ssh.Marshal(struct{ Ms uint32 }{ms}))
}
