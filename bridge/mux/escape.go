package mux

import (
	"fmt"
	"io"

	"golang.org/x/crypto/ssh"
)

// escapeFilter is the master's escape handling for a mux client's
// session (clientloop.c's process_escapes with a control channel): the
// escape character after a newline starts a command; ~. ends the session,
// ~B sends a break, ~R asks for a rekey, ~? and ~# print, and what ssh
// reserves for its own client (~^Z, ~v, ~V, ~&, ~C) is "not available to
// multiplexed sessions".
type escapeFilter struct {
	r         io.Reader
	s         *session
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
					f.s.abandon()
					return 0, errWoken
				case 'Z' - 64, 'v', 'V', '&', 'C':
					name := string(ch)
					if ch == 'Z'-64 {
						name = "^Z"
					}
					f.say(fmt.Sprintf("%c%s escape not available to multiplexed sessions\r\n", f.escape, name))
					continue
				case 'B':
					f.say(fmt.Sprintf("%cB\r\n", f.escape))
					_, _ = f.s.ch.SendRequest("break", false, ssh.Marshal(struct{ Ms uint32 }{1000}))
					continue
				case 'R':
					// A rekey of the master's connection: x/crypto rekeys
					// by its own schedule and cannot be asked.
					continue
				case '?':
					f.say(escapeHelp(f.escape))
					continue
				case '#':
					f.say(fmt.Sprintf("%c#\r\n", f.escape) + f.s.cl.l.openMessage())
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

func (f *escapeFilter) say(s string) { _, _ = io.WriteString(f.s.errOut, s) }
