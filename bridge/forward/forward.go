package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/ssh"
)

// Kind is a forward's type; the values are PROTOCOL.mux's MUX_FWD_*.
type Kind uint32

// The kinds of forward a mux client may ask for.
const (
	Local   Kind = 1 // MUX_FWD_LOCAL, ssh -L
	Remote  Kind = 2 // MUX_FWD_REMOTE, ssh -R
	Dynamic Kind = 3 // MUX_FWD_DYNAMIC, ssh -D
)

// PortIsPath is OpenSSH's PORT_STREAMLOCAL (0xfffffffe on the wire): a
// port field with this value says its host field is a unix socket path.
const PortIsPath = -2

// Spec is one forward as a mux client sends it in MUX_C_OPEN_FWD and
// MUX_C_CLOSE_FWD. Strings are kept verbatim; "" stands for OpenSSH's
// NULL (ssh sends "*" for an empty listen host).
type Spec struct {
	Kind        Kind
	ListenHost  string // "" when unset; a socket path when ListenPort is PortIsPath
	ListenPort  int    // 0 asks for any port
	ConnectHost string // "socks" for -D and remote dynamic forwards; a path when ConnectPort is PortIsPath
	ConnectPort int    // 0 for -D and remote dynamic forwards
}

// Options are the master's own ssh_config settings that govern forwards,
// as bridge/sshclient resolves them.
type Options struct {
	GatewayPorts bool
	// StreamLocalBindMask is used as given; OpenSSH's default is 0o177.
	StreamLocalBindMask   os.FileMode
	StreamLocalBindUnlink bool
	// Log receives what OpenSSH's master would print on its stderr; nil
	// discards it.
	Log logrus.FieldLogger
	// Say, if set, is given the lines OpenSSH's master writes on its
	// stderr at LogLevel ERROR about a forwarded connection (without the
	// line ending), for a master in the foreground to show.
	Say func(line string)
	// Busy, if set, is told of each forwarded connection as its channel
	// opens (+1) and ends (-1): an open channel keeps ssh's master past
	// ControlPersist.
	Busy func(delta int)
}

// Error is a refused request. Its message is exactly the reason OpenSSH's
// master sends in MUX_S_FAILURE; Err, if set, is the underlying cause.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Reason }
func (e *Error) Unwrap() error { return e.Err }

// ErrConnectionLost is a remote forward's request that the connection's
// end left unanswered.
var ErrConnectionLost = errors.New("the connection ended")

// ErrMalformed reports a port that is neither PortIsPath nor 0-65535: the
// master drops a mux client that sends one instead of replying.
var ErrMalformed = errors.New("malformed message")

// The reasons OpenSSH's master gives.
const (
	reasonInvalid      = "Invalid forwarding request"
	reasonFailed       = "Port forwarding failed"
	reasonNotForwarded = "port not forwarded"
)

// Set is the forwards of one master connection. Its methods are safe for
// concurrent use.
type Set struct {
	client *ssh.Client
	opts   Options
	log    logrus.FieldLogger

	// ctx ends at Close; dials for forwarded connections use it.
	ctx    context.Context
	cancel context.CancelFunc

	// setupMu serialises listener setup, so that two opens of one forward
	// find each other as OpenSSH's single-threaded master does.
	setupMu sync.Mutex

	mu      sync.Mutex
	closed  bool
	local   []*localFwd  // -L and -D: options.local_forwards
	remote  []*remoteFwd // -R: options.remote_forwards
	claimed bool         // the forwarded-* channel handlers are ours
	live    map[io.Closer]struct{}
	wg      sync.WaitGroup
}

// NewSet returns an empty Set for forwards over c.
func NewSet(c *ssh.Client, opts Options) *Set {
	log := opts.Log
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Set{client: c, opts: opts, log: log, ctx: ctx, cancel: cancel,
		live: map[io.Closer]struct{}{}}
}

// Open establishes spec as OpenSSH's master does for MUX_C_OPEN_FWD
// (mux_master_process_open_fwd). allocated is the port the server chose
// for a Remote forward asked with ListenPort 0 (the mux server then
// replies MUX_S_REMOTE_PORT), else 0. An *Error carries the reason for
// MUX_S_FAILURE; a forward already open succeeds again without a second
// listener. When ctx ends while a Remote forward waits for the server,
// Open returns ctx's error and the forward is still set up, as OpenSSH
// sets it up for a mux client that went away.
func (s *Set) Open(ctx context.Context, spec Spec) (allocated int, err error) {
	if !spec.wellFormed() {
		return 0, ErrMalformed
	}
	log := s.log.WithField("forward", s.describe(spec))
	if why := spec.invalid(); why != "" {
		log.Infof("mux_master_process_open_fwd: %s", why)
		return 0, &Error{Reason: reasonInvalid}
	}
	if spec.Kind == Remote {
		return s.openRemote(ctx, spec, log)
	}
	return 0, s.openLocal(ctx, spec, log)
}

// Cancel ends spec's forward as OpenSSH's master does for MUX_C_CLOSE_FWD
// (ssh -O cancel): the listener closes (or cancel-tcpip-forward is sent)
// while connections already made through it carry on.
func (s *Set) Cancel(ctx context.Context, spec Spec) error {
	if !spec.wellFormed() {
		return ErrMalformed
	}
	switch spec.Kind {
	case Local, Dynamic:
		return s.cancelLocal(spec)
	case Remote:
		return s.cancelRemote(ctx, spec)
	}
	return &Error{Reason: reasonNotForwarded}
}

// Close ends every forward, as the end of the master's connection does:
// listeners close (socket files stay, as OpenSSH leaves them), relayed
// connections are cut and remote forwards cancelled. It waits for the
// Set's goroutines, except the one that takes forwarded-tcpip channels:
// that one refuses them until the connection ends, since x/crypto offers
// no way to give the channel type back and an unread one stalls the
// connection.
func (s *Set) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	local, remote := s.local, s.remote
	s.local, s.remote = nil, nil
	live := s.live
	s.live = map[io.Closer]struct{}{}
	s.mu.Unlock()

	s.cancel()
	for _, f := range local {
		f.close()
	}
	for _, f := range remote {
		if f.established {
			s.sendCancel(f)
		}
	}
	for c := range live {
		c.Close()
	}
	s.wg.Wait()
}

// spawn runs fn on a goroutine Close waits for; false once closed.
func (s *Set) spawn(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Go(fn)
	return true
}

// track registers c to be closed by Close; false (and c closed) once closed.
func (s *Set) track(c io.Closer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.live[c] = struct{}{}
	return true
}

func (s *Set) untrack(c io.Closer) {
	s.mu.Lock()
	delete(s.live, c)
	s.mu.Unlock()
}

func (spec Spec) wellFormed() bool {
	ok := func(p int) bool { return p == PortIsPath || (p >= 0 && p <= 65535) }
	return ok(spec.ListenPort) && ok(spec.ConnectPort)
}

// invalid is mux_master_process_open_fwd's checks; it returns what the
// master logs, or "".
func (spec Spec) invalid() string {
	switch {
	case spec.Kind != Local && spec.Kind != Remote && spec.Kind != Dynamic:
		return fmt.Sprintf("invalid forwarding type %d", spec.Kind)
	case spec.Kind == Dynamic && spec.ListenPort == PortIsPath && spec.ListenHost != "":
		return "streamlocal and dynamic forwards are mutually exclusive"
	case spec.Kind == Local && spec.ConnectPort == 0:
		return fmt.Sprintf("invalid connect port %d", spec.ConnectPort)
	case spec.Kind != Dynamic && spec.ConnectHost == "":
		return "missing connect host"
	}
	return ""
}

// same is compare_forward: every field but the kind.
func (spec Spec) same(o Spec) bool {
	return spec.ListenHost == o.ListenHost && spec.ListenPort == o.ListenPort &&
		spec.ConnectHost == o.ConnectHost && spec.ConnectPort == o.ConnectPort
}

// describe is format_forward, for logs.
func (s *Set) describe(spec Spec) string {
	listen := spec.ListenHost
	if listen == "" {
		listen = "LOCALHOST"
		if s.opts.GatewayPorts && spec.Kind != Remote {
			listen = "*"
		}
	}
	switch spec.Kind {
	case Local:
		return fmt.Sprintf("local forward %s:%d -> %s:%d", listen, spec.ListenPort, spec.ConnectHost, spec.ConnectPort)
	case Dynamic:
		return fmt.Sprintf("dynamic forward %s:%d -> *", listen, spec.ListenPort)
	case Remote:
		return fmt.Sprintf("remote forward %s:%d -> %s:%d", listen, spec.ListenPort, spec.ConnectHost, spec.ConnectPort)
	}
	return fmt.Sprintf("unknown forward type %d", spec.Kind)
}
