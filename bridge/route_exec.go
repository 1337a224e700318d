package bridge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	shellquote "github.com/kballard/go-shellquote"
	"golang.org/x/crypto/ssh"
)

// Route names, as counted in status.
const (
	routeExec     = "exec"
	routeControl  = "control"
	routeDD       = "dd"
	routeSFTP     = "sftp"
	routeSCP      = "scp"
	routeFallback = "fallback" // handed to the real binary
)

func (s *Server) serveSSH(ctx context.Context, iv *invocation) int {
	inv, err := fakessh.ParseSSH(iv.hello.Argv)
	if err != nil {
		iv.fallback("parse: " + err.Error())
		return -1
	}
	if len(inv.Unsupported) > 0 {
		iv.fallback("unsupported: " + strings.Join(inv.Unsupported, " "))
		return -1
	}
	settings, err := resolve(iv, inv)
	var fb *fallbackError
	if errors.As(err, &fb) {
		iv.fallback(fb.reason)
		return -1
	}
	if err != nil {
		return connFailure(iv, err)
	}
	if inv.Control != "" {
		return s.serveControl(iv, inv, settings)
	}
	t := s.targets.get(settings, iv)
	iv.log = iv.log.WithField("target", t.label)
	command := strings.Join(inv.Command, " ")
	if dst, ok := ddTarget(command); ok && !inv.Subsystem && inv.TTY < 2 {
		t.countRoute(iv, routeDD)
		return s.serveDD(ctx, iv, t, dst)
	}
	becomeStep := strings.Contains(command, "BECOME-SUCCESS-")
	if !inv.Subsystem && iv.getenv(FastPathEnv) != "0" {
		if code, done := s.serveHousekeeping(ctx, iv, t, inv, settings, command); done {
			return code
		}
		if becomeStep {
			if code, done := s.serveBecome(ctx, iv, t, inv, settings, command); done {
				return code
			}
		}
	}
	if becomeStep {
		// Its stdin may carry a become password the bridge cannot tell
		// from the rest: the journal keeps none of it.
		iv.noStdinCapture = true
	}
	if err := t.materializeHeld(ctx, iv); err != nil {
		return materializeFailure(iv, err)
	}
	t.countRoute(iv, routeExec)
	return s.serveExec(ctx, iv, t, inv, settings, command, execOpts{})
}

// FastPathEnv set to 0 in a shim's environment makes the daemon run that
// invocation as plain passthrough (no cached answers, no held temp dirs).
const FastPathEnv = "ANSIBLE_BRIDGE_FASTPATH"

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

// fallbackError means the real binary should serve the invocation.
type fallbackError struct{ reason string }

func (e *fallbackError) Error() string { return "fallback: " + e.reason }

// resolve computes the effective settings of inv. Configuration the
// bridge cannot honour gives a *fallbackError.
func resolve(iv *invocation, inv *fakessh.SSHInvocation) (*sshclient.Settings, error) {
	iv.raiseVerbosity(inv.Verbose)
	settings, err := sshclient.Resolve(inv, iv.clientEnv())
	if err != nil {
		return nil, err
	}
	if len(settings.Unsupported) > 0 {
		return nil, &fallbackError{"ssh_config: " + strings.Join(settings.Unsupported, ", ")}
	}
	iv.quiet = quiet(inv, settings)
	return settings, nil
}

// ddTarget recognises Ansible's piped transfer, `dd of=PATH bs=65536`.
func ddTarget(command string) (string, bool) {
	words, err := shellquote.Split(command)
	if err != nil || len(words) != 3 || words[0] != "dd" || words[2] != "bs=65536" ||
		!strings.HasPrefix(words[1], "of=") || len(words[1]) == 3 {
		return "", false
	}
	return words[1][3:], true
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

func (s *Server) serveExec(ctx context.Context, iv *invocation, t *target, inv *fakessh.SSHInvocation, settings *sshclient.Settings, command string, opts execOpts) int {
	tty := wantTTY(inv, iv.hello.StdinTTY)
	if inv.TTY == 1 && !iv.hello.StdinTTY && !inv.Quiet {
		iv.errorf("Pseudo-terminal will not be allocated because stdin is not a terminal.")
	}
	c, sess, err := t.newSession(ctx, iv, sendEnv(settings.SendEnv, iv.hello.Env))
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
	if code == 255 && werr != nil && !isExit(werr) {
		iv.errorf("Connection to %s closed by remote host.", settings.HostName)
	} else if tty && !iv.quiet {
		iv.errorf("Shared connection to %s closed.", settings.HostName)
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
	return 255
}

// quiet tells whether ssh would suppress informational messages.
func quiet(inv *fakessh.SSHInvocation, s *sshclient.Settings) bool {
	if inv.Quiet {
		return true
	}
	switch strings.ToLower(s.LogLevel) {
	case "quiet", "fatal", "error":
		return true
	}
	return false
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
