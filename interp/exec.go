package interp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ExecRequest is a command for Exec.
type ExecRequest struct {
	// Command is run with /bin/sh -c in the agent's cwd (the login
	// directory), in a new session.
	Command string
	// Env is applied on top of the agent's environment.
	Env map[string]string
	// Stdin, if set, is copied to the command's stdin, then closed; if
	// nil the command's stdin is /dev/null.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output (nil: discarded).
	Stdout, Stderr io.Writer
	// PTY, if set, runs the command on a new pseudo-terminal (see PTY):
	// all its output goes to Stdout; Stdin, if set, is written to the
	// terminal (and echoed, as with ssh -tt), and its end is not passed
	// on, so a command reading its stdin to the end does not end.
	PTY *PTY
}

// Exec runs a command on the target and returns its exit status (128+n
// for a command killed by signal n). When ctx ends the command's process
// group is killed and ctx's error returned.
func (c *Client) Exec(ctx context.Context, req ExecRequest) (int, error) {
	so, se := newStreamSink(req.Stdout), newStreamSink(req.Stderr)
	cl, err := c.newCall(so, se)
	if err != nil {
		return -1, fmt.Errorf("exec: %w", err)
	}
	if err := c.send(cl, map[string]any{"op": "exec", "cmd": req.Command, "env": req.Env, "stdin": req.Stdin != nil, "pty": req.PTY.wire()}); err != nil {
		return -1, fmt.Errorf("exec: %w", err)
	}
	pumpCtx, stopPump := context.WithCancel(ctx)
	defer stopPump()
	if req.Stdin != nil {
		go c.pumpStdin(pumpCtx, cl.id, req.Stdin)
	}
	r, err := c.await(ctx, cl)
	if err != nil {
		so.close(false)
		se.close(false)
		return -1, fmt.Errorf("exec: %w", err)
	}
	// All output frames precede the response: deliver them before returning.
	so.close(true)
	se.close(true)
	if r.Error != "" {
		return -1, fmt.Errorf("exec: %s", r.Error)
	}
	if r.Exit == nil {
		return -1, errors.New("exec: agent gave no exit status")
	}
	return *r.Exit, nil
}

func (c *Client) pumpStdin(ctx context.Context, id uint32, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if c.enqueueWait(ctx, frameStdin, id, append([]byte(nil), buf[:n]...)) != nil {
				return
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				_ = c.enqueue(frameStdinEOF, id, nil)
			}
			return
		}
	}
}

// streamSink hands stream data to an io.Writer on its own goroutine, so a
// slow writer never stalls the client's reader.
type streamSink struct {
	mu     sync.Mutex
	cond   *sync.Cond
	q      [][]byte
	closed bool
	w      io.Writer
	done   chan struct{}
}

func newStreamSink(w io.Writer) *streamSink {
	s := &streamSink{w: w, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	if w == nil {
		s.w = io.Discard
	}
	go s.run()
	return s
}

func (s *streamSink) write(p []byte) {
	s.mu.Lock()
	if !s.closed {
		s.q = append(s.q, p)
		s.cond.Signal()
	}
	s.mu.Unlock()
}

func (s *streamSink) run() {
	defer close(s.done)
	var werr error
	for {
		s.mu.Lock()
		for len(s.q) == 0 && !s.closed {
			s.cond.Wait()
		}
		q := s.q
		s.q = nil
		closed := s.closed
		s.mu.Unlock()
		for _, p := range q {
			if werr == nil {
				_, werr = s.w.Write(p)
			}
		}
		if closed && len(q) == 0 {
			return
		}
	}
}

// close stops the sink; with wait it returns once queued data is written.
func (s *streamSink) close(wait bool) {
	s.mu.Lock()
	s.closed = true
	if !wait {
		s.q = nil
	}
	s.cond.Signal()
	s.mu.Unlock()
	if wait {
		<-s.done
	}
}
