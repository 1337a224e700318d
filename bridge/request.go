package bridge

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"golang.org/x/crypto/ssh"
)

// request is one ssh invocation, parsed once: what every route reads.
// A route's match and serve take it and nothing else.
type request struct {
	s   *Server
	ctx context.Context
	iv  *invocation
	// inv is the parsed command line, settings its effective settings
	// (command line merged with ssh_config).
	inv      *fakessh.SSHInvocation
	settings *sshclient.Settings
	// t is the target; nil for a control request (-O), which never
	// dials and must not make a target up.
	t *target
	// command is the remote command as ssh sends it: the words after
	// the destination, joined with spaces.
	command string
	// fast: the fast paths may serve it (not a subsystem, and
	// ANSIBLE_BRIDGE_FASTPATH is not 0).
	fast bool
	// cmd is command as classify reads it (only when fast, and not dd).
	cmd ansibleCmd
	// ddDst is where Ansible's piped transfer writes ("" if it is not
	// one).
	ddDst string
	// becomeStep: the command carries a BECOME-SUCCESS marker.
	becomeStep bool
}

// reasonUnparsed: a hello without the shim's parse of its command line
// (never from this build's shim).
const reasonUnparsed = "the shim sent no parsed command line"

// newRequest takes iv's parsed ssh command line and resolves its settings. A
// nil request means iv is answered already: code is its exit status (-1
// for a fallback).
func (s *Server) newRequest(ctx context.Context, iv *invocation) (*request, int) {
	inv := iv.hello.SSH
	if inv == nil {
		iv.fallback(reasonUnparsed)
		return nil, -1
	}
	if len(inv.Unsupported) > 0 {
		iv.fallback("unsupported: " + strings.Join(inv.Unsupported, " "))
		return nil, -1
	}
	settings, t, err := s.resolveTarget(iv, inv)
	if err != nil {
		return nil, notServed(iv, err)
	}
	r := &request{s: s, ctx: ctx, iv: iv, inv: inv, settings: settings, t: t}
	if inv.Control != "" {
		return r, 0
	}
	r.command = strings.Join(inv.Command, " ")
	if !inv.Subsystem && inv.TTY < 2 {
		r.ddDst, _ = ddTarget(r.command)
	}
	r.becomeStep = strings.Contains(r.command, "BECOME-SUCCESS-")
	r.fast = !inv.Subsystem && iv.getenv(FastPathEnv) != "0"
	if r.fast && r.ddDst == "" {
		r.cmd = classify(r.command)
	}
	return r, 0
}

// FastPathEnv set to 0 in a shim's environment makes the daemon run that
// invocation as plain passthrough (no cached answers, no held temp dirs).
const FastPathEnv = "ANSIBLE_BRIDGE_FASTPATH"

// fallbackError means the real binary should serve the invocation.
type fallbackError struct{ reason string }

func (e *fallbackError) Error() string { return "fallback: " + e.reason }

// resolveTarget resolves inv's settings and the target they multiplex
// onto (see share); a control request (-O), which never dials and must
// not make a target up, gets none. Configuration or sharing the bridge
// cannot reproduce gives a *fallbackError.
func (s *Server) resolveTarget(iv *invocation, inv *fakessh.SSHInvocation) (*sshclient.Settings, *target, error) {
	settings, err := resolve(iv, inv)
	if err != nil {
		return nil, nil, err
	}
	if inv.Control != "" {
		warn(iv, settings)
		return settings, nil, nil
	}
	t, fallback, err := s.share(iv, settings)
	switch {
	case err != nil:
		return nil, nil, err
	case fallback != "":
		return nil, nil, &fallbackError{fallback}
	}
	warn(iv, settings)
	return settings, t, nil
}

// warn prints what ssh says of its command line as it starts (with
// fprintf: a bare newline), for an invocation the daemon serves (the real
// ssh says it itself).
func warn(iv *invocation, settings *sshclient.Settings) {
	for _, w := range settings.Warnings {
		_, _ = iv.stderr().Write([]byte(w + "\n"))
	}
}

// notServed answers an invocation that could not be set up with err: a
// *fallbackError hands it to the real binary (-1), anything else is a
// connection failure (see connFailure).
func notServed(iv *invocation, err error) int {
	var fb *fallbackError
	if errors.As(err, &fb) {
		iv.fallback(fb.reason)
		return -1
	}
	return connFailure(iv, err)
}

// resolve computes the effective settings of inv. Configuration the
// bridge cannot honour gives a *fallbackError.
func resolve(iv *invocation, inv *fakessh.SSHInvocation) (*sshclient.Settings, error) {
	env, err := iv.clientEnv()
	if err != nil {
		return nil, err
	}
	settings, err := sshclient.Resolve(inv, env)
	if err != nil {
		return nil, err
	}
	if len(settings.Unsupported) > 0 {
		return nil, &fallbackError{"ssh_config: " + strings.Join(settings.Unsupported, ", ")}
	}
	if settings.ControlPath != "" && !filepath.IsAbs(settings.ControlPath) {
		// Its socket, and the master found there, are the shim's
		// directory's: the daemon's is another.
		return nil, &fallbackError{"a relative ControlPath"}
	}
	if inv.Verbose > 0 || settings.Says("VERBOSE") {
		// -v, or LogLevel VERBOSE or DEBUG from -o or ssh_config: lines
		// such as "Authenticated to ..." and "Transferred: sent N" count
		// OpenSSH's own bytes and steps.
		return nil, &fallbackError{fakessh.ReasonVerbose}
	}
	iv.quiet = quiet(inv, settings)
	iv.settings = settings
	return settings, nil
}

// quiet tells whether ssh would suppress informational messages.
func quiet(inv *fakessh.SSHInvocation, s *sshclient.Settings) bool {
	return inv.Quiet || !s.Says("INFO")
}

// sendEnv is the shim's environment that SendEnv passes to the target.
func (r *request) sendEnv() [][2]string {
	return sendEnv(r.settings.SendEnv, r.iv.hello.Env)
}

// ownSession tells whether ssh runs the session itself, as the master it
// became without ControlPersist; otherwise it is a mux client (with
// ControlPersist the master goes to the background, and even the first
// ssh is its client).
func (r *request) ownSession() bool {
	return r.iv.master.Load() && r.settings.ControlPersist == sshclient.PersistNo
}

// terminalModes are the modes ssh sends with its pty-req: the shim's
// terminal's; for stdin that is none, all zero from a master serving a
// mux client (it calls tcgetattr on a zeroed struct), and none from a
// master running its own session.
func (r *request) terminalModes() ssh.TerminalModes {
	switch {
	case r.iv.hello.Termios != nil:
		return fakessh.TerminalModes(*r.iv.hello.Termios)
	case r.iv.hello.StdinTTY, r.ownSession():
		return ssh.TerminalModes{}
	}
	return fakessh.TerminalModes(wire.Termios{})
}

// signalLine tells the shim what ssh prints if a signal ends it during a
// session on a terminal: a mux client's "Shared connection to HOST
// closed.", unless quiet. (A master running its own session says "Killed
// by signal N.", which the shim leaves out.)
func (r *request) signalLine() {
	if r.iv.quiet || r.ownSession() {
		return
	}
	_ = r.iv.send(wire.OnSignal, []byte("Shared connection to "+r.settings.HostName+" closed.\r\n"))
}

// tty tells whether ssh would ask for a terminal (see wantTTY).
func (r *request) tty() bool { return wantTTY(r.inv, r.iv.hello.StdinTTY) }

// count counts the request's route in status.
func (r *request) count(route string) { r.t.countRoute(r.iv, route) }

// sharedClosed prints what ssh prints after a session on a terminal,
// unless quiet: "Shared connection to HOST closed." from a mux client,
// "Connection to HOST closed." from a master that runs the session
// itself (ownSession).
func (r *request) sharedClosed() {
	switch {
	case r.iv.quiet:
	case r.ownSession():
		r.iv.errorf("Connection to %s closed.", r.settings.HostName)
	default:
		r.iv.errorf("Shared connection to %s closed.", r.settings.HostName)
	}
}
