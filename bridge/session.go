package bridge

// A passthrough session: a command or subsystem run on the target as ssh
// runs it (exec, start), the steps every route may fall back to.

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ansible-bridge/ansible-bridge/bridge/mux"
	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"golang.org/x/crypto/ssh"
)

// passthrough runs the command on the target as usual, replaying stdin
// (already read from the shim) first.
func (r *request) passthrough(stdin []byte) int {
	if err := r.t.materializeHeld(r.ctx, r.iv); err != nil {
		return materializeFailure(r.iv, err)
	}
	r.count(routeExec)
	return r.exec(r.command, execOpts{stdinPrefix: stdin})
}

// materializeFailure reports a temp dir that could not be written to
// the target before the command that needed it.
func materializeFailure(iv *invocation, err error) int {
	var ce *sshclient.ConnError
	if errors.As(err, &ce) {
		return connFailure(iv, err)
	}
	iv.errorf("ansible-bridge: writing a temp dir to the target: %v", err)
	return 1
}

// remoteSession is a started session channel, a command or a subsystem
// (sshclient.Exec: x/crypto's Session cannot wait for a subsystem's exit
// status, and drops eow@openssh.com).
type remoteSession interface {
	WindowChange(h, w int) error
	SendRequest(name string, wantReply bool, payload []byte) (bool, error)
	EOW() <-chan struct{}
	Close() error
	Wait() error
}

// relayed is a started session whose output goes to the shim: Wait
// returns once that has been relayed too, as x/crypto's Session.Wait
// does, and for a command (copyErrs) with the first copy error after a
// clean exit, as it does.
type relayed struct {
	*sshclient.Exec
	copyErrs bool
	copying  sync.WaitGroup
	mu       sync.Mutex
	copyErr  error
}

func (s *relayed) relay(stdout, stderr io.Writer) {
	s.copying.Add(2)
	copyOut := func(w io.Writer, r io.Reader) {
		defer s.copying.Done()
		if _, err := io.Copy(w, r); err != nil {
			s.mu.Lock()
			if s.copyErr == nil {
				s.copyErr = err
			}
			s.mu.Unlock()
		}
	}
	go copyOut(stdout, s.Stdout())
	go copyOut(stderr, s.Stderr())
}

func (s *relayed) Wait() error {
	err := s.Exec.Wait()
	s.copying.Wait()
	if err == nil && s.copyErrs {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.copyErr
	}
	return err
}

// started is a session, its stdin, and the busy connection it is on.
type started struct {
	sess  remoteSession
	stdin io.WriteCloser
	conn  *sshConn
	// noPTY: sshd refused the terminal asked for, and the session goes
	// on without one; unread: it refused it to a master that asked for
	// one itself, and the session ends unread (ptyRefused).
	noPTY, unread bool
}

// start starts command as ssh would on a busy connection of the target:
// a subsystem, or a command (a login shell for "") with a terminal if
// tty, its output going to the shim (and opts' writers). On failure it
// reports as ssh does and returns ssh's exit status.
func (r *request) start(command string, tty bool, opts execOpts) (*started, int) {
	ctx, iv, t := r.ctx, r.iv, r.t
	stdout, stderr := iv.stdout(), iv.stderr()
	if opts.stdout != nil {
		stdout = io.MultiWriter(stdout, opts.stdout)
	}
	if opts.stderr != nil {
		stderr = io.MultiWriter(stderr, opts.stderr)
	}
	if r.inv.Subsystem {
		var e *sshclient.Exec
		t.touched() // a subsystem, run as the login user
		c, err := t.use(ctx, iv, func(c *sshConn) error {
			var err error
			e, err = sshclient.OpenSession(c.client.Client)
			return err
		})
		if err != nil {
			return nil, connFailure(iv, err)
		}
		// After the open, as ssh's master asks for it once the channel is
		// confirmed and its mux client has its session: a connection
		// lost now is lost under a started session.
		err = e.Subsystem(r.sendEnv(), command)
		if err != nil {
			c.release()
		}
		switch {
		case errors.Is(err, sshclient.ErrSubsystemRefused):
			// The master says it (channel 0 is its control socket); a
			// mux client says nothing, and a ControlPersist master has
			// gone to the background.
			if r.ownSession() {
				iv.errorf("subsystem request failed on channel 1")
			}
			return nil, fakessh.ExitSSHError
		case err != nil:
			return nil, r.lostAtStart(err)
		}
		sub := &relayed{Exec: e}
		sub.relay(stdout, stderr)
		return &started{sess: sub, stdin: e.Stdin(), conn: c}, 0
	}
	c, sess, err := t.newSession(ctx, iv, r.sendEnv())
	if err != nil {
		return nil, connFailure(iv, err)
	}
	noPTY, closing := false, false
	if tty {
		term := iv.getenv("TERM")
		switch err := sess.RequestPty(term, iv.hello.Rows, iv.hello.Cols, r.terminalModes()); {
		case errors.Is(err, sshclient.ErrPTYRefused):
			closing = r.ptyRefused(c)
			noPTY = !closing
		case err != nil:
			sess.Close()
			c.release()
			return nil, r.lostAtStart(err)
		}
	}
	if err := sess.Start(command); err != nil {
		sess.Close()
		c.release()
		if !errors.Is(err, sshclient.ErrStartRefused) {
			return nil, r.lostAtStart(err)
		}
		iv.log.WithError(err).Warn("starting remote command failed")
		iv.errorf("exec request failed on channel 0")
		return nil, fakessh.ExitSSHError
	}
	switch {
	case closing && r.ownSession():
		// fatal(): the master, and its connection, are gone; the
		// command runs (exec went out with the pty-req).
		iv.log.Info("a master without ControlPersist refused the terminal it asked for: its connection closes")
		sess.Close()
		c.kill()
		c.release()
		return nil, fakessh.ExitSSHError
	case closing:
		// The master's chan_write_failed and chan_read_failed:
		// eow@openssh.com (sshd stops reading the command's stdout),
		// EOF, and the output dropped until the server closes the
		// channel; its exit-status still reaches the client.
		_, _ = sess.SendRequest("eow@openssh.com", false, nil)
		_ = sess.Stdin().Close()
		cmd := &relayed{Exec: sess}
		cmd.relay(io.Discard, io.Discard)
		return &started{sess: cmd, stdin: sess.Stdin(), conn: c, unread: true}, 0
	}
	cmd := &relayed{Exec: sess, copyErrs: true}
	cmd.relay(stdout, stderr)
	return &started{sess: cmd, stdin: sess.Stdin(), conn: c, noPTY: noPTY}, 0
}

// ptyRefused says what ssh says when sshd refuses a session the terminal
// it asked for (clientloop.c client_status_confirm), and tells whether
// the session closes: it does where the master asked for a terminal
// itself (-t, -tt), whose failure is then fatal to a master running its
// own session, and ends a mux client's unread (its exit status, if the
// command exits rather than dies of SIGPIPE, still comes through);
// otherwise the session goes on without one, and the master says so: on
// its stderr when the session is its own, on the mux client's (unless
// the master logs below ERROR).
func (r *request) ptyRefused(c *sshConn) (closing bool) {
	iv := r.iv
	switch {
	case r.ownSession():
		// fatal() or error(); channel 0 is the master's control socket.
		closing = r.inv.TTY >= 1
		level := "ERROR"
		if closing {
			level = "FATAL"
		}
		if r.settings.Says(level) {
			iv.errorf("PTY allocation request failed on channel 1")
		}
		return closing
	case c.ttyRequired:
		// Queued for the client's stderr as the channel closes, it is
		// not written.
		return true
	case !c.masterQuiet:
		_, _ = io.WriteString(iv.stderr(), "PTY allocation request failed\r\n")
	}
	return false
}

// execOpts adjusts a passthrough session.
type execOpts struct {
	// stdinPrefix was read from the shim already; it is sent first.
	stdinPrefix []byte
	// wrapStdin, when set, wraps what the session reads of stdin.
	wrapStdin func(io.Reader) io.Reader
	// stdout and stderr, when set, also receive the session's output.
	stdout, stderr io.Writer
}

// wantTTY mirrors ssh's decision: -tt always, -t when stdin is a
// terminal, none with -T; a login shell (no command) gets one when stdin
// is a terminal.
func wantTTY(inv *fakessh.SSHInvocation, stdinTTY bool) bool {
	switch {
	case inv.TTY < 0:
		return false
	case inv.TTY >= 2:
		return true
	case inv.TTY == 1 || !inv.HasCommand():
		return stdinTTY
	}
	return false
}

// exec runs command (the request's, or one a route sends in its place)
// as a session channel, relaying stdin, output, signals and window
// changes, and returns ssh's exit status.
func (r *request) exec(command string, opts execOpts) int {
	ctx, iv, t, inv := r.ctx, r.iv, r.t, r.inv
	tty := r.tty()
	// ssh.c: a terminal asked for (-t, or a login shell) without one on
	// stdin is refused with a notice at LogLevel INFO.
	if (inv.TTY == 1 || inv.TTY == 0 && !inv.HasCommand()) && !iv.hello.StdinTTY && !iv.quiet {
		iv.errorf("Pseudo-terminal will not be allocated because stdin is not a terminal.")
	}
	st, code := r.start(command, tty, opts)
	if st == nil {
		return code
	}
	defer st.conn.release()
	sess, stdinPipe, c := st.sess, st.stdin, st.conn
	defer sess.Close()
	mode := ""
	if tty && iv.hello.StdinTTY && !st.noPTY {
		// (ssh leaves raw mode when the terminal is refused.)
		mode = "raw"
	}
	if !iv.accepted {
		if err := iv.accept(mode); err != nil {
			return fakessh.ExitSSHError
		}
	}
	if tty {
		// After the accept, which hands a raw terminal to the Go shim.
		r.signalLine()
	}
	var escaped atomic.Bool // ~. ended the session
	var stdinDone, stdinStopped atomic.Bool
	go func() {
		if inv.NoStdin || st.unread {
			_, _ = io.Copy(io.Discard, iv.stdin)
		} else {
			in := io.MultiReader(bytes.NewReader(opts.stdinPrefix), iv.stdin)
			if opts.wrapStdin != nil {
				in = opts.wrapStdin(in)
			}
			if esc := r.settings.EscapeChar; tty && esc != sshclient.EscapeNone && !r.ownSession() {
				// A mux client's terminal session: its master filters
				// the escapes.
				in = mux.NewEscapeFilter(in, byte(esc), shimEscapes{iv, sess, &escaped})
			}
			n, _ := io.Copy(stoppableWriter{stdinPipe, &stdinStopped}, in)
			t.bytesIn.Add(n)
		}
		if !stdinStopped.Load() {
			// After eow@openssh.com ssh sends no EOF (chan_rcvd_eow).
			stdinPipe.Close()
		}
		stdinDone.Store(true)
		if iv.outputClosed() {
			_ = sess.Close()
		}
	}()
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	outputGone := iv.outputGoneChan()
	eow := sess.EOW()
	var werr error
wait:
	for {
		select {
		case werr = <-done:
			break wait
		case sig := <-iv.signals:
			// The shim was told to stop and exits: close the channel as
			// a ControlMaster does for a client that dies. No signal
			// goes to the remote: ssh sends none, and sshd hangs up a
			// PTY's command (SIGHUP) while a command without one runs
			// on until it writes (README, "When a client dies").
			iv.log.WithField("signal", sig).Info("shim signalled; closing channel")
			if r.ownSession() {
				r.masterGone(c)
			}
			sess.Close()
		case <-eow:
			// ssh's chan_rcvd_eow: the command closed its stdin, and
			// ssh stops reading its own and leaves it open (a writer
			// blocks, and gets EPIPE once ssh exits); what it had read
			// but not sent is dropped.
			eow = nil
			stdinStopped.Store(true)
			iv.stopStdin()
		case ws := <-iv.winch:
			_ = sess.WindowChange(ws[0], ws[1])
		case <-outputGone:
			// ssh's chan_write_failed: the server closes the command's
			// output (eow@openssh.com), and a channel whose input has
			// ended too is closed.
			outputGone = nil
			_, _ = sess.SendRequest("eow@openssh.com", false, nil)
			if stdinDone.Load() {
				_ = sess.Close()
			}
		case <-iv.gone:
			if r.ownSession() {
				r.masterGone(c)
			}
			sess.Close()
			<-done
			return -1
		case <-ctx.Done():
			sess.Close()
			werr = ctx.Err()
			break wait
		}
	}
	// ssh has rewritten known_hosts (UpdateHostKeys) by the time its
	// first session ends.
	select {
	case <-c.client.HostKeysSettled():
	case <-ctx.Done():
	}
	t.bytesOut.Add(iv.bytesOut.Load())
	if escaped.Load() {
		// ssh's master lets the client go as it closes the channel: an
		// exit status the remote sends as its terminal hangs up is not
		// the client's.
		r.sharedClosed()
		return fakessh.ExitSSHError
	}
	code = exitStatus(werr)
	iv.log.WithError(werr).WithField("status", code).Debug("session ended")
	if st.unread {
		r.sharedClosed()
		return code
	}
	if code == fakessh.ExitSSHError && werr != nil && c.timedOut.Load() && c.master == iv.id {
		// The master says why it gave up; a multiplexing client only
		// sees its master go.
		if !iv.quiet {
			iv.errorf("%s", r.settings.TimeoutMessage())
		}
		return code
	}
	if code == fakessh.ExitSSHError && werr != nil && !isExit(werr) {
		iv.errorf("Connection to %s closed by remote host.", r.settings.HostName)
	} else if tty {
		r.sharedClosed()
	}
	return code
}

// lostAtStart says what ssh says when the connection goes before sshd
// answers a session's pty-req or exec (sshd's half-dead child when its
// monitor was killed): a master running its own session "Connection to
// HOST closed by remote host." (client_process_net_input); a mux client,
// whose master just goes, nothing, or "Shared connection to HOST
// closed." with a terminal. Not "exec request failed": that is sshd's
// refusal.
func (r *request) lostAtStart(err error) int {
	r.iv.log.WithError(err).Warn("connection lost starting remote command")
	if r.ownSession() {
		r.iv.errorf("Connection to %s closed by remote host.", r.settings.HostName)
	}
	if r.tty() {
		r.sharedClosed()
	}
	return fakessh.ExitSSHError
}

// masterGone ends c as a master's death ends its connection: a master
// without ControlPersist is the ssh running its own session, and when a
// signal ends that ssh, its connection, control socket and every
// session on it go too (no later client may ride it, where the daemon
// would otherwise keep it until the session's command ends).
func (r *request) masterGone(c *sshConn) {
	r.iv.log.Info("master without ControlPersist ended by a signal: its connection closes")
	c.kill()
}

// shimEscapes is a served terminal session as its escapes act on it.
type shimEscapes struct {
	iv    *invocation
	sess  remoteSession
	ended *atomic.Bool
}

func (e shimEscapes) Say(s string) { _, _ = io.WriteString(e.iv.stderr(), s) }

func (e shimEscapes) End() {
	e.ended.Store(true)
	_ = e.sess.Close()
}
func (e shimEscapes) Break(ms uint32) {
	_, _ = e.sess.SendRequest("break", false, ssh.Marshal(struct{ Ms uint32 }{ms}))
}

// OpenMessage lists this session only: the master's other channels are
// not gathered (docs/limits.md).
func (e shimEscapes) OpenMessage() string {
	return "The following connections are open:\r\n  #0 client-session\r\n"
}

// stoppableWriter drops writes once stopped is set.
type stoppableWriter struct {
	w       io.Writer
	stopped *atomic.Bool
}

var errStdinStopped = errors.New("the remote command closed its stdin (eow@openssh.com)")

func (s stoppableWriter) Write(p []byte) (int, error) {
	if s.stopped.Load() {
		return 0, errStdinStopped
	}
	return s.w.Write(p)
}

// isExit tells a session's end (an exit status, a signal, or a channel
// closed without either) from the connection's.
func isExit(err error) bool {
	var xe *sshclient.ExitError
	return errors.As(err, &xe)
}

// exitStatus maps a session result to ssh's exit status: the remote
// status, or 255 for a signal, a missing status or a lost connection.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var xe *sshclient.ExitError
	if errors.As(err, &xe) && xe.Signal == "" && xe.Status >= 0 {
		return xe.Status
	}
	return fakessh.ExitSSHError
}

// sendEnv picks the shim's variables that match SendEnv patterns.
func sendEnv(patterns []string, env []string) [][2]string {
	var out [][2]string
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && sshclient.MatchAny(patterns, k) {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}
