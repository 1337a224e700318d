package sshclient

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Exec is a session channel running one command, started as OpenSSH's
// client starts one: env, pty-req and exec go out one after the other
// and the command's stdin may follow at once, without a round trip for
// the exec reply (x/crypto's Session waits for it). A command that cannot
// start then shows as a channel that closes without an exit status.
// Only for commands whose own first output is awaited anyway (an
// interpreter's hello, a become tool's marker), where an exec failure
// reads the same as the command failing.
type Exec struct {
	ch     ssh.Channel
	done   chan struct{}
	eow    chan struct{} // closed on eow@openssh.com
	status int
	signal string
	got    bool // an exit-status or exit-signal came

	mu    sync.Mutex
	ended bool     // serve is done with the channel
	atEnd []func() // run once it is, before Wait returns (AtEnd)
}

// PTY is a terminal to request for an Exec: its TERM and size, with the
// server's default modes.
type PTY struct {
	Term       string
	Rows, Cols int
}

// StartExec opens a session on c, sends env (as ssh sends SendEnv
// variables, no reply wanted), a pty-req if pty is not nil, and exec.
func StartExec(c *ssh.Client, env [][2]string, pty *PTY, command string) (*Exec, error) {
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	e := newExec(ch, reqs)
	send := func(name string, payload []byte) error {
		if _, err := ch.SendRequest(name, false, payload); err != nil {
			ch.Close()
			return fmt.Errorf("%s request: %w", name, err)
		}
		return nil
	}
	for _, kv := range env {
		if err := send("env", ssh.Marshal(&struct{ Name, Value string }{kv[0], kv[1]})); err != nil {
			return nil, err
		}
	}
	if pty != nil {
		req := struct {
			Term             string
			Cols, Rows, W, H uint32
			Modes            string
		}{pty.Term, uint32(pty.Cols), uint32(pty.Rows), 0, 0, "\x00"} // TTY_OP_END only
		if err := send("pty-req", ssh.Marshal(&req)); err != nil {
			return nil, err
		}
	}
	if err := send("exec", ssh.Marshal(&struct{ Command string }{command})); err != nil {
		return nil, err
	}
	return e, nil
}

func newExec(ch ssh.Channel, reqs <-chan *ssh.Request) *Exec {
	e := &Exec{ch: ch, done: make(chan struct{}), eow: make(chan struct{})}
	go e.serve(reqs)
	return e
}

// OpenSession opens a session on c for a command the caller starts as
// x/crypto's Session starts one (RequestPty, Start), waiting for each
// reply: unlike x/crypto's Session, it sees eow@openssh.com (EOW).
func OpenSession(c *ssh.Client) (*Exec, error) {
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	return newExec(ch, reqs), nil
}

// RequestPty asks for a terminal as x/crypto's Session.RequestPty does.
func (e *Exec) RequestPty(term string, h, w int, modes ssh.TerminalModes) error {
	var tm []byte
	for k, v := range modes {
		tm = append(tm, ssh.Marshal(&struct {
			Key byte
			Val uint32
		}{k, v})...)
	}
	tm = append(tm, 0) // TTY_OP_END
	req := struct {
		Term             string
		Cols, Rows, W, H uint32
		Modes            string
	}{term, uint32(w), uint32(h), uint32(w * 8), uint32(h * 8), string(tm)}
	ok, err := e.ch.SendRequest("pty-req", true, ssh.Marshal(&req))
	if err == nil && !ok {
		err = ErrPTYRefused
	}
	return err
}

// ErrPTYRefused is a pty-req the server answered with failure: sshd
// refuses a terminal to a key with no-pty or restrict, and under
// PermitTTY no.
var ErrPTYRefused = errors.New("ssh: pty-req failed")

// ProbePTY asks whether the server grants c's sessions a terminal, with
// a pty-req on a session channel of its own, closed unused. sshd's answer
// depends on the login alone (the user, the address, the key), so it
// holds for every session of c.
func ProbePTY(c *ssh.Client) (bool, error) {
	e, err := OpenSession(c)
	if err != nil {
		return false, err
	}
	defer e.Close()
	switch err := e.RequestPty("dumb", 0, 0, nil); {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrPTYRefused):
		return false, nil
	default:
		return false, fmt.Errorf("pty-req: %w", err)
	}
}

// Start runs command, or a login shell for "", waiting for the reply as
// x/crypto's Session.Start and Shell do.
func (e *Exec) Start(command string) error {
	kind, payload := "shell", []byte(nil)
	if command != "" {
		kind, payload = "exec", ssh.Marshal(&struct{ Command string }{command})
	}
	ok, err := e.ch.SendRequest(kind, true, payload)
	if err == nil && !ok {
		err = fmt.Errorf("ssh: %s request: %w", kind, ErrStartRefused)
	}
	return err
}

// ErrStartRefused is the server's refusal of an exec or shell request;
// any other error of Start is the connection lost before the answer.
var ErrStartRefused = errors.New("refused by the server")

// EOW is closed when the server sends eow@openssh.com: the command has
// closed its stdin, and ssh stops reading its own (chan_rcvd_eow).
func (e *Exec) EOW() <-chan struct{} { return e.eow }

// StartSubsystem opens a session on c, sends env as StartExec does, and
// asks for the subsystem name, waiting for the reply as ssh does (its
// refusal is "subsystem request failed"). x/crypto's Session can run a
// subsystem but not wait for its exit status.
func StartSubsystem(c *ssh.Client, env [][2]string, name string) (*Exec, error) {
	e, err := OpenSession(c)
	if err != nil {
		return nil, err
	}
	if err := e.Subsystem(env, name); err != nil {
		return nil, err
	}
	return e, nil
}

// Subsystem sends env as StartExec does and asks for subsystem name on
// the opened session e, closing it if that fails: ErrSubsystemRefused
// is the server's refusal.
func (e *Exec) Subsystem(env [][2]string, name string) error {
	for _, kv := range env {
		if _, err := e.ch.SendRequest("env", false, ssh.Marshal(&struct{ Name, Value string }{kv[0], kv[1]})); err != nil {
			e.ch.Close()
			return fmt.Errorf("env request: %w", err)
		}
	}
	ok, err := e.ch.SendRequest("subsystem", true, ssh.Marshal(&struct{ Name string }{name}))
	if err == nil && !ok {
		err = ErrSubsystemRefused
	}
	if err != nil {
		e.ch.Close()
		return fmt.Errorf("subsystem %s: %w", name, err)
	}
	return nil
}

// ErrSubsystemRefused is the server's refusal of a subsystem.
var ErrSubsystemRefused = errors.New("subsystem request failed")

// Signal sends sig to the remote process, no reply wanted.
func (e *Exec) Signal(sig ssh.Signal) error {
	_, err := e.ch.SendRequest("signal", false, ssh.Marshal(&struct{ Signal string }{string(sig)}))
	return err
}

// SendRequest sends a channel request of the session.
func (e *Exec) SendRequest(name string, wantReply bool, payload []byte) (bool, error) {
	return e.ch.SendRequest(name, wantReply, payload)
}

// WindowChange tells the remote side its terminal's new size.
func (e *Exec) WindowChange(h, w int) error {
	_, err := e.ch.SendRequest("window-change", false, ssh.Marshal(&struct{ Cols, Rows, W, H uint32 }{uint32(w), uint32(h), 0, 0}))
	return err
}

// serve takes the session's requests until the channel closes: the exit
// status or signal is kept, eow@openssh.com noted, anything else refused.
func (e *Exec) serve(reqs <-chan *ssh.Request) {
	defer func() {
		e.mu.Lock()
		e.ended = true
		atEnd := e.atEnd
		e.atEnd = nil
		e.mu.Unlock()
		for _, f := range atEnd {
			f()
		}
		close(e.done)
	}()
	eow := false
	for req := range reqs {
		switch req.Type {
		case "eow@openssh.com":
			if !eow {
				eow = true
				close(e.eow)
			}
		case "exit-status":
			if len(req.Payload) >= 4 {
				e.status, e.got = int(binary.BigEndian.Uint32(req.Payload)), true
			}
		case "exit-signal":
			var sig struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}
			if ssh.Unmarshal(req.Payload, &sig) == nil {
				e.signal, e.got = sig.Signal, true
			}
		}
		if req.WantReply {
			_ = req.Reply(false, nil)
		}
	}
}

// Stdin is the command's stdin; Close sends EOF.
func (e *Exec) Stdin() io.WriteCloser { return execStdin{e.ch} }

// Stdout is the command's stdout.
func (e *Exec) Stdout() io.Reader { return e.ch }

// Stderr is the command's stderr (it must be read, or the channel stalls).
func (e *Exec) Stderr() io.Reader { return e.ch.Stderr() }

// Wait waits until the channel has closed: nil for exit status 0, else an
// *ExitError.
func (e *Exec) Wait() error {
	<-e.done
	switch {
	case e.got && e.signal == "" && e.status == 0:
		return nil
	case e.got:
		return &ExitError{Status: e.status, Signal: e.signal}
	}
	return &ExitError{Status: -1}
}

// Close closes the channel.
func (e *Exec) Close() error { return e.ch.Close() }

// Done is closed once the channel has closed and the AtEnd functions
// have run; Wait then returns at once.
func (e *Exec) Done() <-chan struct{} { return e.done }

// AtEnd has f run once the channel has closed, before Done closes (at
// once if it already has): what a session held is released when it
// ends, without a goroutine waiting for each.
func (e *Exec) AtEnd(f func()) {
	e.mu.Lock()
	if !e.ended {
		e.atEnd = append(e.atEnd, f)
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	f()
}

// ExitError is how an Exec's command ended other than with status 0:
// Status (-1 when the channel closed without one, as when the command
// could not start), or Signal.
type ExitError struct {
	Status int
	Signal string
}

func (e *ExitError) Error() string {
	switch {
	case e.Signal != "":
		return "remote command killed by signal " + e.Signal
	case e.Status < 0:
		return "remote command ended without an exit status"
	}
	return fmt.Sprintf("remote command exited with status %d", e.Status)
}

type execStdin struct{ ch ssh.Channel }

func (s execStdin) Write(p []byte) (int, error) { return s.ch.Write(p) }
func (s execStdin) Close() error                { return s.ch.CloseWrite() }
