package bridge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/ansible-bridge/ansible-bridge/bootstrap"
	"github.com/ansible-bridge/ansible-bridge/bridge/become"
	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/interp"
)

// becomeOnTerminal tells whether the become tool runs on a terminal: a
// tool that reads passwords from a terminal only (su) gets one; -tt asks
// for one anyway.
func becomeOnTerminal(w *become.Wrapper, tty bool) bool {
	return tty || w.Method.TerminalPassword
}

// startBecomeAgent runs Ansible's become wrapper with the interpreter's
// first stage inside, relaying everything up to the success marker
// between the tool and Ansible: its password prompt, the password Ansible
// answers (remembered as a secret, never logged), "Sorry, try again.".
// When the tool fails, its output and exit status are Ansible's answer
// and no interpreter is kept.
//
// The tool runs on a terminal where pty is set (becomeOnTerminal).
// shimIn, if set, is the shim's stdin as accepted already (with a
// password typed ahead).
func (r *request) startBecomeAgent(w *become.Wrapper, python string, pty bool, shimIn io.Reader) (becomeStarted, error) {
	ctx, iv, t := r.ctx, r.iv, r.t
	startCmd, err := w.WithInner(r.command, bootstrap.Inline(python))
	if err != nil {
		return becomeStarted{}, err
	}
	var term *sshclient.PTY
	if pty {
		term = &sshclient.PTY{Term: iv.getenv("TERM"), Rows: iv.hello.Rows, Cols: iv.hello.Cols}
	}
	// The tool's marker (or its failure) is awaited next: no round trip
	// for the exec reply before the shim's stdin flows.
	c, sess, err := t.startExec(ctx, iv, r.sendEnv(), term, startCmd)
	if err != nil {
		return becomeStarted{code: connFailure(iv, err)}, err
	}
	release := sync.OnceFunc(c.release) // by whoever ends the session
	fail := func(code int, err error) (becomeStarted, error) {
		sess.Close()
		release()
		return becomeStarted{code: code}, err
	}
	sessIn, sessOut, sessErr := sess.Stdin(), sess.Stdout(), sess.Stderr()
	if shimIn == nil {
		if err := iv.accept(""); err != nil {
			return fail(fakessh.ExitSSHError, err)
		}
		shimIn = iv.stdin
	}
	// A shim that goes away (Ansible gave up on a wrong password) ends
	// the attempt; once the interpreter runs, its session outlives this
	// invocation.
	stopCancel := context.AfterFunc(ctx, func() { sess.Close() })
	// If Ansible gives up before the marker, the tool must not wait on:
	// its stdin ends, and the session closes, which hangs up a terminal
	// (sudo on -tt waits on its prompt until then), as the end of stock's
	// ssh does.
	gate := newStdinGate(shimIn, sessIn, iv.secrets, func() {
		_ = sessIn.Close()
		_ = sess.Close()
	})
	// Where no interpreter takes the password, it goes now.
	defer func() { clear(gate.lastLine()) }()
	// stderr: the tool's prompt (sudo -S) and complaints go to the shim
	// as they come; after the success marker, the interpreter's log.
	errOut := &switchWriter{w: iv.stderr()}
	agentErr, agentErrW := io.Pipe()
	errDone := make(chan struct{})
	go func() {
		// A small buffer: it lasts as long as the interpreter, whose
		// stderr is its log lines.
		_, _ = io.CopyBuffer(errOut, sessErr, make([]byte, 4<<10))
		agentErrW.Close()
		close(errDone)
	}()
	// The gate closes before Ansible can see the marker: a pipelined
	// module, sent once it has, must not reach the interpreter's first
	// stage, which is still reading the interpreter from the same stdin.
	rest, ok := relayUntil(sessOut, iv.stdout(), []byte(w.Success), func() { gate.stop() })
	stopCancel()
	if !ok {
		// The tool failed (wrong password, -n and a password needed, no
		// such user): its words and status are the answer.
		gate.stop()
		werr := sess.Wait()
		<-errDone
		release()
		code := exitStatus(werr)
		if pty {
			r.sharedClosed()
		}
		return becomeStarted{code: code}, nil
	}
	shimIn = gate.stop()
	out := io.MultiReader(bytes.NewReader(rest), sessOut)
	if pty {
		// The first stage makes the terminal raw, then says so.
		br := bufio.NewReader(out)
		if err := skipThrough(br, []byte(bootstrap.RawMarker+"\n")); err != nil {
			iv.errorf("ansible-bridge: become interpreter did not start: %v", err)
			return fail(fakessh.ExitSSHError, err)
		}
		out = br
	}
	errOut.set(agentErrW)
	ag, err := bootstrap.Attach(context.WithoutCancel(ctx), interp.Conn{
		Stdin: sessIn, Stdout: out, Stderr: agentErr,
		Wait: sessionWait(sess, release),
	}, t.log.WithField("become", w.Identity()))
	if err != nil {
		iv.errorf("ansible-bridge: become interpreter did not start: %v", err)
		return fail(fakessh.ExitSSHError, err)
	}
	t.log.WithField("become", w.Identity()).WithField("pid", ag.Info().PID).Info("become interpreter started")
	return becomeStarted{ag: ag, stdin: shimIn, password: gate.lastLine()}, nil
}

// becomeStarted is what startBecomeAgent gives: the interpreter, or the
// exit status to report when there is none.
type becomeStarted struct {
	ag *interp.Client
	// stdin is the shim's stdin from the success marker on.
	stdin io.Reader
	// password is the last line Ansible typed to the tool (nil if
	// none), the caller's to overwrite.
	password []byte
	code     int
}

// relayUntil copies r to w until a line holding marker has been copied,
// calling atMarker just before that line goes out. It returns what it read
// past that line, and false if r ended first. Bytes are passed on as they
// come (a prompt has no newline), except a tail that might be the start of
// marker.
func relayUntil(r io.Reader, w io.Writer, marker []byte, atMarker func()) ([]byte, bool) {
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if i := bytes.Index(buf, marker); i >= 0 {
			if j := bytes.IndexByte(buf[i:], '\n'); j >= 0 {
				end := i + j + 1
				atMarker()
				_, _ = w.Write(buf[:end])
				return buf[end:], true
			}
		} else if keep := partialSuffix(buf, marker); len(buf) > keep {
			_, _ = w.Write(buf[:len(buf)-keep])
			buf = buf[len(buf)-keep:]
		}
		if err != nil {
			_, _ = w.Write(buf)
			return nil, false
		}
	}
}

// partialSuffix is the length of the longest suffix of b that is a
// proper prefix of marker.
func partialSuffix(b, marker []byte) int {
	for n := min(len(b), len(marker)-1); n > 0; n-- {
		if bytes.HasSuffix(b, marker[:n]) {
			return n
		}
	}
	return 0
}

// skipThrough reads r up to and including marker.
func skipThrough(r *bufio.Reader, marker []byte) error {
	var seen []byte
	for !bytes.HasSuffix(seen, marker) {
		b, err := r.ReadByte()
		if err != nil {
			return fmt.Errorf("before %q: %w (got %q)", marker, err, seen)
		}
		seen = append(seen, b)
		if len(seen) > 64<<10 {
			return fmt.Errorf("no %q in 64 KiB of output", marker)
		}
	}
	return nil
}

// switchWriter writes to w, which set may change.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(p)
	return len(p), nil
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

// stdinGate passes the shim's stdin to the become tool (the password
// Ansible types at its prompt) until stop; from then on what the shim
// sends is kept for the caller (a pipelined module). Lines passed to the
// tool are registered as secrets.
type stdinGate struct {
	mu      sync.Mutex
	stopped bool
	last    []byte
	pr      *io.PipeReader
	pw      *io.PipeWriter
}

// gaveUp, if set, runs when the shim's stdin ends before stop.
func newStdinGate(shim io.Reader, tool io.Writer, secrets secretSink, gaveUp func()) *stdinGate {
	pr, pw := io.Pipe()
	g := &stdinGate{pr: pr, pw: pw}
	go func() {
		var line []byte
		buf := make([]byte, 32<<10)
		for {
			n, err := shim.Read(buf)
			g.mu.Lock()
			stopped := g.stopped
			if !stopped && n > 0 {
				line = append(line, buf[:n]...)
				for {
					i := bytes.IndexByte(line, '\n')
					if i < 0 {
						break
					}
					clear(g.last)
					g.last = bytes.Clone(bytes.TrimSuffix(line[:i], []byte("\r")))
					if secrets != nil && len(g.last) > 0 {
						secrets.AddSecret(g.last)
					}
					// The password's other copies: the line and the read buffer.
					clear(line[:i+1])
					line = line[i+1:]
				}
				_, _ = tool.Write(buf[:n])
				clear(buf[:n])
			}
			g.mu.Unlock()
			if stopped && n > 0 {
				_, werr := g.pw.Write(buf[:n])
				clear(buf[:n]) // a pipe hands over: the reader has its copy
				if werr != nil {
					return
				}
			}
			if err != nil {
				// Ansible closes the ssh's stdin before the marker only
				// when it gives up (a wrong or missing password).
				g.mu.Lock()
				if !g.stopped && gaveUp != nil {
					gaveUp()
				}
				g.mu.Unlock()
				g.pw.CloseWithError(err)
				return
			}
		}
	}()
	return g
}

// lastLine hands over the last complete line passed to the tool: the
// gate keeps no copy, the caller overwrites it when done.
func (g *stdinGate) lastLine() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	last := g.last
	g.last = nil
	return last
}

// stop ends the relay to the tool and returns the shim's stdin from there.
func (g *stdinGate) stop() io.Reader {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	return g.pr
}
