package bridge

import (
	"bytes"
	"errors"
	"io"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"golang.org/x/crypto/ssh"
)

// Route names counted in status that are no entry of the route table.
const (
	routeSFTP     = "sftp"
	routeSCP      = "scp"
	routeFallback = "fallback" // handed to the real binary
)

// routeExec runs the command on the target as ssh would: a session
// channel on the persistent connection, with a PTY for -tt. Every held
// temp dir is written to the target first.
const routeExec = "exec"

var execRoute = route{
	name:  routeExec,
	match: func(*request) bool { return true },
	serve: func(r *request) (int, bool) {
		if r.becomeStep {
			// Its stdin may carry a become password the bridge cannot
			// tell from the rest: the journal keeps none of it.
			r.iv.noStdinCapture = true
		}
		return r.passthrough(nil), true
	},
}

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

// execOpts adjusts a passthrough session.
type execOpts struct {
	// stdinPrefix was read from the shim already; it is sent first.
	stdinPrefix []byte
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
	case inv.TTY == 1 || len(inv.Command) == 0:
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
	if (inv.TTY == 1 || inv.TTY == 0 && len(inv.Command) == 0) && !iv.hello.StdinTTY && !iv.quiet {
		iv.errorf("Pseudo-terminal will not be allocated because stdin is not a terminal.")
	}
	c, sess, err := t.newSession(ctx, iv, r.sendEnv())
	if err != nil {
		return connFailure(iv, err)
	}
	defer c.release()
	defer sess.Close()
	if tty {
		term := iv.getenv("TERM")
		if err := sess.RequestPty(term, iv.hello.Rows, iv.hello.Cols, ssh.TerminalModes{}); err != nil {
			iv.errorf("PTY allocation request failed on channel 0")
		}
	}
	stdinPipe, err := sess.StdinPipe()
	if err != nil {
		return connFailure(iv, err)
	}
	sess.Stdout, sess.Stderr = iv.stdout(), iv.stderr()
	if opts.stdout != nil {
		sess.Stdout = io.MultiWriter(sess.Stdout, opts.stdout)
	}
	if opts.stderr != nil {
		sess.Stderr = io.MultiWriter(sess.Stderr, opts.stderr)
	}
	switch {
	case inv.Subsystem:
		err = sess.RequestSubsystem(command)
	case command == "":
		err = sess.Shell()
	default:
		err = sess.Start(command)
	}
	if err != nil {
		iv.log.WithError(err).Warn("starting remote command failed")
		if inv.Subsystem {
			iv.errorf("subsystem request failed on channel 0")
		} else {
			iv.errorf("exec request failed on channel 0")
		}
		return 255
	}
	mode := ""
	if tty && iv.hello.StdinTTY {
		mode = "raw"
	}
	if iv.stdin == nil {
		if err := iv.accept(mode); err != nil {
			return 255
		}
	}
	go func() {
		if inv.NoStdin {
			_, _ = io.Copy(io.Discard, iv.stdin)
		} else {
			n, _ := io.Copy(stdinPipe, io.MultiReader(bytes.NewReader(opts.stdinPrefix), iv.stdin))
			t.bytesIn.Add(n)
		}
		stdinPipe.Close()
	}()
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	var werr error
wait:
	for {
		select {
		case werr = <-done:
			break wait
		case sig := <-iv.signals:
			// The shim was told to stop: pass the signal on, then close
			// the channel as a ControlMaster does for a client that dies.
			iv.log.WithField("signal", sig).Info("shim signalled; closing channel")
			_ = sess.Signal(ssh.Signal(sig))
			sess.Close()
		case ws := <-iv.winch:
			_ = sess.WindowChange(ws[0], ws[1])
		case <-iv.gone:
			sess.Close()
			<-done
			return -1
		case <-ctx.Done():
			sess.Close()
			werr = ctx.Err()
			break wait
		}
	}
	t.bytesOut.Add(iv.bytesOut.Load())
	code := exitStatus(werr)
	if code == 255 && werr != nil && c.timedOut.Load() && c.master == iv.id {
		// The master says why it gave up; a multiplexing client only
		// sees its master go.
		if !iv.quiet {
			iv.errorf("%s", r.settings.TimeoutMessage())
		}
		return code
	}
	if code == 255 && werr != nil && !isExit(werr) {
		iv.errorf("Connection to %s closed by remote host.", r.settings.HostName)
	} else if tty {
		r.sharedClosed()
	}
	return code
}

func isExit(err error) bool {
	var ee *ssh.ExitError
	var em *ssh.ExitMissingError
	return errors.As(err, &ee) || errors.As(err, &em)
}

// exitStatus maps a session result to ssh's exit status: the remote
// status, or 255 for a signal, a missing status or a lost connection.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) && ee.Signal() == "" {
		return ee.ExitStatus()
	}
	var xe *sshclient.ExitError
	if errors.As(err, &xe) && xe.Signal == "" && xe.Status >= 0 {
		return xe.Status
	}
	return 255
}

// sendEnv picks the shim's variables that match SendEnv patterns.
func sendEnv(patterns []string, env []string) [][2]string {
	var out [][2]string
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		for _, p := range patterns {
			if sshclient.MatchPattern(p, k) {
				out = append(out, [2]string{k, v})
				break
			}
		}
	}
	return out
}
