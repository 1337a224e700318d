package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/ansible-bridge/ansible-bridge/bridge/mux"
	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/pkg/sftp"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// DialFunc opens an authenticated SSH connection; messages for the
// invoking shim's stderr go to p when it is an sshclient.Notifier.
// Tests replace it.
type DialFunc func(ctx context.Context, s *sshclient.Settings, p sshclient.Prompter, log logrus.FieldLogger) (*sshclient.Client, error)

// registry holds one target per ControlPath: invocations share a
// connection exactly where ssh would multiplex them, through the same
// control socket (see share).
type registry struct {
	log       logrus.FieldLogger
	dial      DialFunc
	maxAgents int
	// masterStub is the program run as each ControlPersist master's
	// process (Config.MasterStub); "" leaves the daemon's pid for all.
	masterStub string

	mu      sync.Mutex
	targets map[string]*target
	// noTarget counts the invocations no target's row shows, by
	// outcome: those that ended without one (a fallback, an error), and
	// those of the targets forgotten as never connected.
	noTarget map[string]uint64
	// fallbacks counts the invocations the daemon handed to the real
	// binary, by reason: status shows them where the shim could not log
	// its fallback (a sandbox binding the socket's directory read-only).
	fallbacks map[string]uint64
}

func newRegistry(log logrus.FieldLogger, dial DialFunc, maxAgents int) *registry {
	return &registry{log: log, dial: dial, maxAgents: maxAgents, targets: map[string]*target{},
		noTarget: map[string]uint64{}, fallbacks: map[string]uint64{}}
}

// maxFallbackReasons bounds the reasons counted apart: some hold an
// option's value, and the daemon may live long.
const maxFallbackReasons = 64

func (r *registry) countFallback(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.fallbacks[reason]; !ok && len(r.fallbacks) >= maxFallbackReasons {
		reason = "(other reasons)"
	}
	r.fallbacks[reason]++
}

// outcomeNotConnected counts the invocations of a target forgotten
// because it never connected (a failed login, a refused connection).
const outcomeNotConnected = "not connected"

func (r *registry) countNoTarget(outcome string, n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noTarget[outcome] += n
}

// snapshot is all, noTarget and fallbacks at one moment: an invocation
// counted in a target's row or, once that target is forgotten, in
// noTarget, is in one of them.
func (r *registry) snapshot() ([]*target, map[string]uint64, map[string]uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.allLocked(), maps.Clone(r.noTarget), maps.Clone(r.fallbacks)
}

// get returns the target for s's ControlPath, creating it if needed, and
// makes iv one of its invocations (under the registry's lock, so that
// forget never drops a target an invocation is about to use).
func (r *registry) get(s *sshclient.Settings, iv *invocation) *target {
	key := s.ControlPath
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.targets[key]
	if t == nil {
		label := r.uniqueLabelLocked(targetLabel(s))
		t = &target{label: label, key: key, reg: r, log: r.log.WithField("target", label), routes: map[string]int{}, slow: map[string]int{}}
		t.settings.Store(s)
		t.lastUse.Store(time.Now().UnixNano())
		t.agents.max = r.maxAgents
		r.targets[key] = t
	}
	t.attach(iv)
	return t
}

// Bounds of a target's label: it names the target in status, top, logs
// and the debug mount (where a name must fit in 255 bytes).
const (
	maxLabelUser = 32
	maxLabelHost = 64
)

// targetLabel is user@host:port, each part clipped and without control
// characters.
func targetLabel(s *sshclient.Settings) string {
	return fmt.Sprintf("%s@%s:%d", clipLabelPart(s.User, maxLabelUser), clipLabelPart(s.HostName, maxLabelHost), s.Port)
}

func clipLabelPart(s string, max int) string {
	r := []rune(strings.Map(func(c rune) rune {
		if unicode.IsControl(c) {
			return '?'
		}
		return c
	}, s))
	if len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return string(r)
}

// uniqueLabelLocked returns label, or label#N with the smallest N from 2
// that no target has: targets with other options (another key) to the
// same user@host:port must not share a name, and a target keeps its name
// for its life.
func (r *registry) uniqueLabelLocked(label string) string {
	used := map[string]bool{}
	for _, t := range r.targets {
		used[t.label] = true
	}
	name := label
	for n := 2; used[name]; n++ {
		name = fmt.Sprintf("%s#%d", label, n)
	}
	return name
}

// lookup returns the target for a ControlPath if one exists, without
// creating it.
func (r *registry) lookup(controlPath string) *target {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.targets[controlPath]
}

func (r *registry) all() []*target {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.allLocked()
}

func (r *registry) allLocked() []*target {
	out := make([]*target, 0, len(r.targets))
	for _, t := range r.targets {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].label < out[j].label })
	return out
}

// connected reports whether any target has a connection open.
func (r *registry) connected() bool {
	for _, t := range r.all() {
		t.mu.Lock()
		n := len(t.conns)
		t.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// busy reports whether anything is in flight on a target.
func (r *registry) busy() bool {
	for _, t := range r.all() {
		if t.inflight.Load() > 0 {
			return true
		}
	}
	return false
}

func (r *registry) closeAll() {
	for _, t := range r.all() {
		t.stop(true)
	}
}

// target is one remote endpoint: usually one connection; more only when
// the server refuses another channel (OpenSSH's MaxSessions).
type target struct {
	label string // unique among the registry's targets
	key   string // the ControlPath
	// settings are those of the invocation that made the connection (the
	// master's); the first invocation's until one does.
	settings atomic.Pointer[sshclient.Settings]
	reg      *registry
	log      logrus.FieldLogger
	// sftpNoWrite: the target's sftp refused an upload into a temp dir
	// Ansible made there as the login user (internal-sftp -R, -P):
	// its temp dirs are not held, so its sftp and scp fail as stock's.
	sftpNoWrite atomic.Bool
	// besides counts the live connections dialled besideMaster: ssh's
	// master would hold their sessions.
	besides atomic.Int32

	mu     sync.Mutex // never held across a login or a server's answer
	conns  []*sshConn
	routes map[string]int
	// slow counts invocations that took the slow path (passthrough) for a
	// reason worth a user's attention, such as a module wrapper the bridge
	// does not recognise; each reason is logged once.
	slow  map[string]int
	dials int

	bytesIn, bytesOut atomic.Int64
	// freshness is what the interpreters spent checking, before module
	// tasks, that nothing they imported had changed (microseconds).
	freshness atomic.Int64
	// changes counts what ran on the target that could change what the
	// become tools read (becomepolicy.go); policyChecks the round trips
	// that asked a become interpreter, policyRetired those it retired.
	changes                     atomic.Uint64
	policyChecks, policyRetired atomic.Int64
	// wire counts the bytes of every connection to the target.
	wire sshclient.WireCounter

	house  housekeeping
	agents agents
	// unsynced is the interpreter sent a removal without an answer
	// (RemoveAllNoWait) since the last syncRemovals.
	unsynced atomic.Pointer[interp.Client]
	rtt      atomic.Int64 // last keepalive round trip, ns
	// pipedSize is the size of the last wrapper a pipelined step sent: the
	// next is read into a buffer that size (readAllOnce).
	pipedSize atomic.Int64

	drain    drain
	inflight atomic.Int32 // invocations being served
	// alive counts the connections neither dead nor detached, read
	// without t.mu: whether a master is up must not wait for a login in
	// progress (ssh would not wait for another's either).
	alive     atomic.Int32
	connected atomic.Bool // a dial has succeeded once
	// ownSessions maps the connections whose master is an ssh running its
	// own session (no ControlPersist) to that shim's process; read
	// without t.mu, as alive is.
	ownSessions sync.Map
	// control is the control socket of the target's latest master.
	control atomic.Pointer[mux.Listener]
	lastUse atomic.Int64 // when one last began or ended, unix ns
	// persistTimer runs expireIdle once ControlPersist has run out (t.mu).
	persistTimer *time.Timer
}

// sshConn is one TCP connection to a target.
type sshConn struct {
	t      *target
	client *sshclient.Client // with the host key it was accepted with
	// master is the id of the invocation that made the connection: ssh's
	// master, which alone says why the connection ended.
	master uint64
	// foreground is that invocation where it made the connection without
	// ControlPersist: ssh's master then stays in the foreground, its
	// stderr showing what it logs (sayForeground).
	foreground *invocation

	mu       sync.Mutex
	active   int
	detached bool // -O stop: close when the last session ends
	dead     bool
	// timedOut is set when keepalives went unanswered (ServerAliveInterval
	// × ServerAliveCountMax) and the connection was closed for it.
	timedOut atomic.Bool
	sftp     *sftp.Client
	home     string     // the SFTP server's starting directory
	sftpMu   sync.Mutex // held while sftp is opened, without mu
	counted  bool       // in t.alive
	// noSFTP is why c's sftp subsystem cannot be had, once found: the
	// server's answer holds for the connection, and no step asks again.
	noSFTP *noSFTPError
	// sendEnv is the master's SendEnv: a session's variables pass it as
	// well as the invocation's own, as ssh's master filters a mux
	// client's.
	sendEnv []string
	// mux is the control socket real ssh clients share c through (nil
	// for a connection that is no master's).
	mux *mux.Listener
	// stub is the process standing for c's master, with ControlPersist.
	stub *masterStub
	// forwards are those mux clients asked c's master for.
	forwards forwardSet
	// owner, when set, is the one invocation c serves: its master
	// refused it a session, and ssh's mux client then logs in on a
	// connection of its own, which no one else rides and which ends with
	// it.
	owner uint64
	// beside: c is an invocation's own for a session ssh's master would
	// have given it, but for the bridge's own sessions (besideMaster);
	// cleared as it goes (unbeside).
	beside atomic.Bool
	// interpreters counts the sessions the bridge's own interpreters
	// hold on c, which ssh would not have open.
	interpreters atomic.Int32
	// ttyRequired: c's master asked for a terminal itself (-t, -tt:
	// OpenSSH's request_tty yes or force), so a refused pty-req ends the
	// session (clientloop.c client_status_confirm). masterQuiet: it logs
	// below ERROR, and tells a mux client nothing of the refusal.
	ttyRequired, masterQuiet bool
	// ptyMu guards ptyKnown and ptyOK: whether sshd grants c's sessions
	// a terminal (ptyGranted).
	ptyMu           sync.Mutex
	ptyKnown, ptyOK bool
}

// ptyGranted tells whether sshd grants c's sessions a terminal. Its
// answer (authorized_keys no-pty or restrict, PermitTTY) is fixed by the
// login, so one probe, on first need, answers for c's lifetime.
func (c *sshConn) ptyGranted() (bool, error) {
	c.ptyMu.Lock()
	defer c.ptyMu.Unlock()
	if !c.ptyKnown {
		ok, err := sshclient.ProbePTY(c.client.Client)
		if err != nil {
			return false, fmt.Errorf("probe for a terminal: %w", err)
		}
		c.ptyKnown, c.ptyOK = true, ok
		c.t.log.WithField("granted", ok).Info("asked sshd whether this connection gets a terminal")
	}
	return c.ptyOK, nil
}

// masterOptions sets what c's sessions see of its master's options: the
// invocation's that logged in, or, where c is not the one its
// ControlPath's clients reach, that master's (t.mu is held).
func (c *sshConn) masterOptions(master *invocation, s *sshclient.Settings) {
	c.masterQuiet = !s.Says("ERROR")
	c.ttyRequired = master != nil && master.hello.SSH != nil && master.hello.SSH.TTY >= 1
	if c.mux != nil {
		return
	}
	for _, m := range c.t.conns {
		if m.mux != nil && m.alive() {
			c.ttyRequired, c.masterQuiet = m.ttyRequired, m.masterQuiet
			return
		}
	}
}

// bridgeSessions is how many of c's sessions are the bridge's own
// (interpreters, the pooled SFTP channel): none means a session refused
// on c would be refused to ssh's mux client too.
func (c *sshConn) bridgeSessions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := int(c.interpreters.Load())
	if c.sftp != nil {
		n++
	}
	return n
}

// masterEnv keeps the variables of env that c's master's SendEnv passes.
func (c *sshConn) masterEnv(env [][2]string) [][2]string {
	var out [][2]string
	for _, kv := range env {
		if sshclient.MatchAny(c.sendEnv, kv[0]) {
			out = append(out, kv)
		}
	}
	return out
}

// goneLocked takes c out of t.alive, once; c.mu is held.
func (c *sshConn) goneLocked() {
	if c.counted {
		c.counted = false
		c.t.alive.Add(-1)
	}
}

// countRoute counts an invocation's route and notes it (and the target)
// on the invocation for status and the journal. The last call wins: a
// module run that falls back to passthrough is counted as exec only, so
// that each invocation is in one route.
func (t *target) countRoute(iv *invocation, route string) {
	t.attach(iv)
	iv.mu.Lock()
	old, oldOn := iv.route, iv.routeOn
	iv.route, iv.routeOn = route, t
	iv.mu.Unlock()
	if oldOn != nil {
		oldOn.mu.Lock()
		if oldOn.routes[old]--; oldOn.routes[old] <= 0 {
			delete(oldOn.routes, old)
		}
		oldOn.mu.Unlock()
	}
	t.mu.Lock()
	t.routes[route]++
	t.mu.Unlock()
	iv.log = iv.log.WithField("route", route)
	iv.entry.SetTarget(t.label)
	iv.entry.SetRoute(route)
	iv.entry.MarkRemoteStart()
}

// countSlow records that iv took the slow path for reason, and logs the
// reason the first time for this target.
func (t *target) countSlow(iv *invocation, reason string) {
	t.mu.Lock()
	t.slow[reason]++
	first := t.slow[reason] == 1
	t.mu.Unlock()
	if first {
		iv.log.WithField("reason", reason).Warn("slow path (passthrough): the bridge does not recognise this; counted in status")
	}
}

// sessionKind says whose a session is: one ssh would open for the
// invocation itself, or one of the bridge's own interpreters.
type sessionKind int

const (
	forInvocation sessionKind = iota
	forInterpreter
)

// dialRole is what a new connection is to the invocation that dials it.
type dialRole int

const (
	// asMaster: the login of an ssh that found no master; it becomes the
	// master where it can listen on the ControlPath.
	asMaster dialRole = iota
	// asRefused: its master refused it a session. ssh logs in itself
	// and tries to become the master; the connection is its own unless
	// it does.
	asRefused
	// besideMaster: refused only because the bridge's own sessions fill
	// the connection, where ssh's master would have served it as a mux
	// client: a connection of its own, which neither listens nor says
	// anything, its session still a mux client's.
	besideMaster
)

// use finds a live connection on which open succeeds, dialing when there
// is none, and marks it busy; the caller must call release. open returns
// an *ssh.OpenChannelError when the server refuses another channel, which
// moves on to the next (or a new) connection.
func (t *target) use(ctx context.Context, p sshclient.Prompter, open func(*sshConn) error) (*sshConn, error) {
	return t.useFor(ctx, p, forInvocation, open)
}

// useFor is use for a session of the given kind.
//
// A session the server refuses (sshd's MaxSessions) where the bridge
// holds none of its own is refused to ssh's mux client too: it says so
// and logs in itself, on a connection no one else rides. Where the
// bridge's interpreters hold sessions, the refusal may be theirs alone:
// another shared connection takes the session, as the master would have.
func (t *target) useFor(ctx context.Context, p sshclient.Prompter, kind sessionKind, open func(*sshConn) error) (*sshConn, error) {
	tried := map[*sshConn]bool{}
	redialled := false
	// An invocation that found no master logs in itself, as ssh does
	// then, even when another made the connection meanwhile: credentials
	// are checked for it as OpenSSH checks them.
	iv, _ := p.(*invocation)
	mustLogin := iv != nil && iv.mustLogin.Swap(false)
	if iv != nil {
		// Its master went before it asked for anything: not another's
		// connection, made since, but a login of its own.
		if f := iv.found.Swap(nil); f != nil && f.gone() {
			mustLogin = true
		}
	}
	// What a connection dialled next is: a refused invocation's own
	// (asRefused, which no other connection may serve), or one beside
	// a master whose refusal was for the bridge's sessions alone.
	next := asMaster
	for {
		var c *sshConn
		t.mu.Lock()
		for _, cand := range t.conns {
			if !mustLogin && next != asRefused && !tried[cand] && cand.alive() && cand.serves(iv, kind) {
				c = cand
				break
			}
		}
		if c != nil {
			c.mu.Lock()
			c.active++
			c.mu.Unlock()
		}
		t.mu.Unlock()
		mustLogin = false
		dialled := c == nil
		if dialled {
			// Busy once made: a stop in between detaches it, as a
			// master's clients finish on it.
			var err error
			if c, err = t.dial(ctx, p, kind, next); err != nil {
				return nil, err
			}
			next = asMaster
		}
		tried[c] = true
		// The open waits on the server: t.mu, which status, control
		// requests and the connection's close take, must not wait too.
		err := open(c)
		if err == nil {
			return c, nil
		}
		// Without t.mu: a connection -O stop detached meanwhile, or one
		// of this invocation's own, closes here, and its markDead takes
		// t.mu.
		c.release()
		var refused *ssh.OpenChannelError
		if errors.As(err, &refused) {
			t.log.WithError(err).Info("server refused another channel; using another connection")
			if kind == forInvocation && iv != nil && c.owner == 0 {
				// ssh's master would hold the sessions gone beside it
				// as well as those on c, the bridge's aside.
				if c.bridgeSessions() > int(t.besides.Load()) {
					next = besideMaster
				} else {
					if !dialled && iv.settings != nil && iv.settings.Says("ERROR") {
						iv.errorf("mux_client_request_session: session request failed: Session open refused by peer")
					}
					next = asRefused
				}
			}
			continue
		}
		var ns *noSFTPError
		if errors.Is(err, sshclient.ErrSubsystemRefused) || errors.As(err, &ns) {
			return nil, err // an answer: the connection is alive
		}
		if kind == forInvocation && iv != nil && !dialled && !redialled && ctx.Err() == nil {
			// The connection, alive when chosen, ended under the pending
			// open (a keepalive timeout, -O exit, the server gone): ssh's
			// master exits with the open unanswered, its mux client says
			// so and logs in itself (ssh.c), nothing of its session
			// having reached the server.
			if iv.settings != nil && iv.settings.Says("ERROR") {
				iv.errorf("mux_client_request_session: read from master failed: Broken pipe")
			}
			next = asRefused
		}
		// The connection may have died silently since last use: redial once.
		if c.alive() && !redialled {
			t.mu.Lock()
			t.dropLocked(c)
			t.mu.Unlock()
		}
		if redialled {
			return nil, err
		}
		redialled = true
	}
}

// dial connects with the settings of the invocation asking (p), as the
// ssh that becomes a master logs in with its own options and
// credentials; those become the target's. The login (a password prompt
// may wait on a person) runs without t.mu, as two ssh log in side by
// side: status, control requests and other logins do not wait for it.
// The connection it returns is busy (active), for the caller to release;
// role says what it is to the invocation.
func (t *target) dial(ctx context.Context, p sshclient.Prompter, kind sessionKind, role dialRole) (*sshConn, error) {
	settings := t.settings.Load()
	master, _ := p.(*invocation)
	if master != nil && master.settings != nil {
		settings = master.settings
	}
	s := *settings
	s.Wire = &t.wire
	if master != nil {
		var stop func()
		ctx, stop = master.watchHangup(ctx)
		defer stop()
	}
	client, err := t.reg.dial(ctx, &s, p, t.log)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		// Its ssh died as it logged in: the login dies with it, and no
		// master is left for the next client.
		client.Close()
		return nil, err
	}
	c := &sshConn{t: t, client: client, counted: true, sendEnv: settings.SendEnv, active: 1}
	own := role == asRefused
	if role == besideMaster && master != nil {
		c.owner = master.id
		c.beside.Store(true)
		t.besides.Add(1)
		master = nil // its master is the one that refused it
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if master != nil && (s.ControlMaster == "auto" || s.ControlMaster == "yes") {
		// A new master listens on its ControlPath once logged in, and
		// fails there as ssh's does.
		if err := c.listenMux(master, settings); err != nil {
			client.Close()
			return nil, err
		}
		// Another's socket there (a login beside this one finished
		// first): ssh goes on without multiplexing, on a connection no
		// other client finds, which ends with it.
		own = own || c.mux == nil && kind == forInvocation
	}
	if own && master != nil && c.mux == nil {
		c.owner = master.id
	}
	c.masterOptions(master, settings)
	if c.owner == 0 {
		t.settings.Store(settings)
	}
	t.dials++
	t.connected.Store(true)
	t.alive.Add(1)
	if master != nil {
		c.master = master.id
		master.master.Store(true)
		if s.ControlPersist == sshclient.PersistNo {
			c.foreground = master
		}
		if s.ControlPersist == sshclient.PersistNo && master.pid > 0 {
			// Held by pidfd: a pid used again is not the shim.
			if p, err := os.FindProcess(master.pid); err == nil {
				t.ownSessions.Store(c, p)
			}
		}
	}
	t.conns = append(t.conns, c)
	t.log.WithField("connections", len(t.conns)).Info("connected")
	timeout := func() {
		t.log.Warn(settings.TimeoutMessage())
		c.timedOut.Store(true)
		c.kill()
	}
	stopKeepAlive := sshclient.KeepAlive(client.Client, settings.ServerAliveInterval, settings.ServerAliveCountMax, timeout,
		func(d time.Duration) { t.rtt.Store(int64(d)) })
	go func() {
		_ = client.Wait()
		stopKeepAlive()
		c.markDead()
	}()
	return c, nil
}

// forgetEnviron drops the environment of the shim whose settings the
// target keeps, once no connection is left: it may hold secrets (a
// become password, cloud keys) that stock's master held only while it
// lived, and a target outlives its connections. A later dial brings its
// shim's own.
func (t *target) forgetEnviron() {
	s := t.settings.Load()
	if s == nil || s.Env.Environ == nil {
		return
	}
	kept := *s
	kept.Env.Environ = nil
	t.settings.CompareAndSwap(s, &kept)
}

// endOrphanedOwnSessions closes the connections whose master was an ssh
// running its own session (no ControlPersist) that has since died: its
// connection died with it, even if the daemon has not yet read its end.
func (t *target) endOrphanedOwnSessions() {
	t.ownSessions.Range(func(k, v any) bool {
		if errors.Is(v.(*os.Process).Signal(unix.Signal(0)), os.ErrProcessDone) {
			t.log.Info("master without ControlPersist gone: its connection closes")
			k.(*sshConn).kill()
		}
		return true
	})
}

// hasLive reports whether the target has a live connection (a master
// is up), without waiting for a login in progress.
func (t *target) hasLive() bool { return t.alive.Load() > 0 }

// stop detaches all connections and interpreters so the next use dials
// and starts afresh, like `ssh -O stop`. Invocations in flight finish
// first (another run's task must not fail because this run reset its
// connection): the interpreters close once they have, and each
// connection once its last session ends; unless now is set (`-O exit`,
// daemon shutdown).
func (t *target) stop(now bool) {
	slots := t.takeAgents()
	if now {
		t.house.reset()
		t.closeAgents(slots)
	} else {
		// Held temp dirs are files on the target to Ansible: a task of
		// another run may be between its upload and its module run.
		t.house.resetAnswers()
		if t.drain.retire(slots) {
			t.closeAgents(slots)
		}
	}
	t.mu.Lock()
	conns := t.conns
	for _, c := range conns {
		// ssh -O stop: no new clients, and none finds the socket once
		// the target has no connection.
		c.mux.Close()
	}
	t.conns = nil
	t.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		c.detached = true
		c.goneLocked()
		idle := c.active == 0
		c.mu.Unlock()
		if idle || now {
			c.kill()
		}
	}
}

// newSession opens a session channel on one of the target's connections
// (see use) and sets env on it as ssh sends SendEnv variables: without
// asking for a reply (servers drop what they do not AcceptEnv). The
// caller closes the session and releases the connection.
func (t *target) newSession(ctx context.Context, p sshclient.Prompter, env [][2]string) (*sshConn, *sshclient.Exec, error) {
	var sess *sshclient.Exec
	t.touched() // a command, which may run sudo
	c, err := t.use(ctx, p, func(c *sshConn) error {
		var err error
		sess, err = sshclient.OpenSession(c.client.Client)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	for _, kv := range c.masterEnv(env) {
		// As ssh sends them: no reply wanted, so no round trip each.
		_, _ = sess.SendRequest("env", false, ssh.Marshal(&struct{ Name, Value string }{kv[0], kv[1]}))
	}
	return c, sess, nil
}

// startExec starts an interpreter's command on the target's connection as
// OpenSSH's client would, not waiting for the exec reply
// (sshclient.StartExec), with a terminal if pty is not nil.
func (t *target) startExec(ctx context.Context, p sshclient.Prompter, env [][2]string, pty *sshclient.PTY, command string) (*sshConn, *sshclient.Exec, error) {
	var e *sshclient.Exec
	t.touched() // a command, which may run sudo
	c, err := t.useFor(ctx, p, forInterpreter, func(c *sshConn) error {
		var err error
		e, err = sshclient.StartExec(c.client.Client, c.masterEnv(env), pty, command)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return c, e, nil
}

// attach makes iv an invocation of t: in flight (so that the target does
// not expire under it, nor a stop retire its interpreters) until
// invocationDone.
func (t *target) attach(iv *invocation) {
	iv.mu.Lock()
	first := iv.target == nil
	if first {
		iv.target = t
		iv.epoch = t.drain.enter()
	}
	iv.mu.Unlock()
	if first {
		t.inflight.Add(1)
		t.lastUse.Store(time.Now().UnixNano())
	}
}

// invocationDone records the end of an invocation attached to t. A
// target that never connected (a dial that failed, a host name that
// does not resolve) is forgotten once nothing uses it: it has nothing to
// show, and a typo must not stay in status for the daemon's life.
func (t *target) invocationDone(iv *invocation) {
	t.lastUse.Store(time.Now().UnixNano())
	iv.mu.Lock()
	epoch := iv.epoch
	iv.mu.Unlock()
	for _, slots := range t.drain.leave(epoch) {
		go t.closeAgents(slots) // up to seconds: not on this invocation's time
	}
	r := t.reg
	r.mu.Lock()
	last := t.inflight.Add(-1) == 0
	if last && !t.connected.Load() && r.targets[t.key] == t {
		delete(r.targets, t.key)
		// Its invocations stay counted in status, without its row.
		t.mu.Lock()
		for route, n := range t.routes {
			if route != routeMux {
				r.noTarget[outcomeNotConnected] += uint64(n)
			}
		}
		t.mu.Unlock()
		t.log.Debug("target never connected; forgotten")
	}
	r.mu.Unlock()
	if last {
		t.nowIdle()
	}
}

// nowIdle is called once nothing is in flight on t any more: a master
// without ControlPersist ends with its last session; one with it ends
// when that runs out (expireIdle; the server's tick checks too).
func (t *target) nowIdle() {
	persist := t.settings.Load().ControlPersist
	switch {
	case persist == sshclient.PersistNo:
		t.expireIdle(time.Now())
	case persist != sshclient.PersistForever:
		at := persistDeadline(time.Unix(0, t.lastUse.Load()), persist)
		t.mu.Lock()
		if t.persistTimer == nil {
			t.persistTimer = time.AfterFunc(time.Until(at)+time.Millisecond, func() { t.expireIdle(time.Now()) })
		} else {
			t.persistTimer.Reset(time.Until(at) + time.Millisecond)
		}
		t.mu.Unlock()
	}
}

// persistDeadline is when a master idle since idle exits with
// ControlPersist persist. ssh counts it in whole seconds of
// CLOCK_BOOTTIME (monotime): it exits once that clock's second reaches
// idle's plus persist, between persist − 1 s and persist after idle.
func persistDeadline(idle time.Time, persist time.Duration) time.Time {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return idle.Add(persist)
	}
	bootAtIdle := time.Duration(ts.Nano()) - time.Since(idle)
	return idle.Add(persist - bootAtIdle%time.Second)
}

// expireIdle closes the target's connections (and retires its
// interpreters) once nothing has used it for ControlPersist, as an ssh
// master with that setting would exit: a later step logs in afresh and
// sees what a fresh login would. It reports whether it did.
func (t *target) expireIdle(now time.Time) bool {
	persist := t.settings.Load().ControlPersist
	if persist == sshclient.PersistForever || t.inflight.Load() > 0 || now.Before(persistDeadline(time.Unix(0, t.lastUse.Load()), persist)) {
		return false
	}
	t.mu.Lock()
	n := len(t.conns)
	t.mu.Unlock()
	if n == 0 {
		return false
	}
	t.log.WithField("control_persist", persist).Info("idle for ControlPersist; closing the connection")
	t.house.reset()
	t.stop(false)
	return true
}

// masterConn is the connection whose control socket ssh's clients
// reach, if any.
func (t *target) masterConn() *sshConn {
	l := t.control.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.conns {
		if l != nil && c.mux == l {
			return c
		}
	}
	return nil
}

// gone reports whether c has closed (not merely detached by -O stop).
func (c *sshConn) gone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *sshConn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.dead && !c.detached
}

// serves reports whether c may carry a session of kind for iv: a
// connection of one invocation's own carries its sessions only.
func (c *sshConn) serves(iv *invocation, kind sessionKind) bool {
	return c.owner == 0 || kind == forInvocation && iv != nil && iv.id == c.owner
}

func (c *sshConn) release() {
	c.mu.Lock()
	c.active--
	closeNow := (c.detached || c.owner != 0) && c.active == 0
	c.mu.Unlock()
	if closeNow {
		c.kill()
	}
}

func (c *sshConn) kill() {
	// Closed first: a session open pending on a hung server fails at
	// once, and markDead waits for no lock held across it.
	c.mux.Close()
	_ = c.client.Close()
	c.markDead()
}

// dropLocked closes c while t.mu is held.
func (t *target) dropLocked(c *sshConn) {
	// As markDead: the control socket first, so that the login that
	// follows (a mux client whose master went) finds none.
	c.mux.Close()
	c.mu.Lock()
	c.dead = true
	c.goneLocked()
	c.mu.Unlock()
	_ = c.client.Close()
	c.unbeside()
	t.forgetLocked(c)
}

// unbeside takes a connection that goes out of t.besides, once.
func (c *sshConn) unbeside() {
	if c.beside.Swap(false) {
		c.t.besides.Add(-1)
	}
}

// forgetLocked removes c from t.conns, leaving no pointer to it in the
// slice's spare capacity: a closed connection must become garbage, so
// that its buffers (the last packets it carried) are freed and
// overwritten (the daemon runs with GODEBUG=clobberfree=1).
func (t *target) forgetLocked(c *sshConn) {
	t.conns = slices.DeleteFunc(t.conns, func(x *sshConn) bool { return x == c })
}

func (c *sshConn) markDead() {
	// The control socket goes first, as a master's does: no client may
	// find it once the connection counts as gone.
	c.mux.Close()
	c.mu.Lock()
	already := c.dead
	c.dead = true
	c.goneLocked()
	c.mu.Unlock()
	if already {
		return
	}
	c.stub.end()
	c.forwards.close()
	c.unbeside()
	if p, ok := c.t.ownSessions.LoadAndDelete(c); ok {
		_ = p.(*os.Process).Release()
	}
	t := c.t
	t.mu.Lock()
	t.forgetLocked(c)
	t.mu.Unlock()
	if !t.hasLive() {
		t.forgetEnviron()
	}
	t.log.Info("connection closed")
}

// useSFTP is use for transfers: a busy connection and its SFTP client.
func (t *target) useSFTP(ctx context.Context, p sshclient.Prompter) (*sshConn, *sftp.Client, error) {
	var sc *sftp.Client
	t.touchedAsLogin()
	c, err := t.use(ctx, p, func(c *sshConn) error {
		var err error
		sc, err = c.sftpClient()
		return err
	})
	return c, sc, err
}

// sftpClient returns the connection's SFTP client, opening the subsystem
// channel on first use. It is shared by all transfers on this connection.
// One open at a time (sftpMu); c.mu is not held while the server answers,
// as sessions, status and control requests take it.
func (c *sshConn) sftpClient() (*sftp.Client, error) {
	c.sftpMu.Lock()
	defer c.sftpMu.Unlock()
	c.mu.Lock()
	sc, ns := c.sftp, c.noSFTP
	c.mu.Unlock()
	if sc != nil {
		return sc, nil
	}
	if ns != nil {
		return nil, fmt.Errorf("start sftp subsystem: %w", ns)
	}
	sc, err := openSFTP(c.client.Client, sftp.UseConcurrentWrites(true))
	if err != nil {
		if errors.As(err, &ns) {
			c.mu.Lock()
			c.noSFTP = ns
			c.mu.Unlock()
			c.t.log.WithError(err).Warn("no usable sftp subsystem on this connection: transfers run as their commands, or by the real sftp and scp")
		}
		return nil, fmt.Errorf("start sftp subsystem: %w", err)
	}
	// Every sftp and scp run starts from here: ask once per connection.
	home, err := sc.Getwd()
	if err != nil {
		home = "."
	}
	c.mu.Lock()
	c.home, c.sftp = home, sc
	c.mu.Unlock()
	return sc, nil
}

// drain tracks which invocations were in flight when a stop detached a
// target's interpreters, so that they are closed only once those have
// finished. Invocations count under the epoch they attached in; a stop
// starts a new epoch.
type drain struct {
	mu       sync.Mutex
	epoch    uint64
	inflight map[uint64]int // invocations in flight, by epoch
	waiting  []retiree
}

// retiree is a set of interpreters that a stop detached in epoch.
type retiree struct {
	epoch uint64
	slots []*agentSlot
}

// enter counts an invocation in; it returns the epoch for leave.
func (d *drain) enter() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inflight == nil {
		d.inflight = map[uint64]int{}
	}
	d.inflight[d.epoch]++
	return d.epoch
}

// leave counts an invocation of epoch out and returns the interpreter
// sets that nothing in flight may be using any more.
func (d *drain) leave(epoch uint64) [][]*agentSlot {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inflight[epoch]--; d.inflight[epoch] <= 0 {
		delete(d.inflight, epoch)
	}
	var ready [][]*agentSlot
	keep := d.waiting[:0]
	for _, r := range d.waiting {
		if d.busyLocked(r.epoch) {
			keep = append(keep, r)
		} else {
			ready = append(ready, r.slots)
		}
	}
	clear(d.waiting[len(keep):]) // no pointer left to a released set
	d.waiting = keep
	return ready
}

// retire starts a new epoch and keeps slots until every invocation that
// entered before has left; it reports true when none is in flight, and
// slots may be closed at once.
func (d *drain) retire(slots []*agentSlot) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.epoch
	d.epoch++
	if !d.busyLocked(e) {
		return true
	}
	if len(slots) > 0 {
		d.waiting = append(d.waiting, retiree{epoch: e, slots: slots})
	}
	return false
}

// busyLocked tells whether an invocation that entered in epoch e or
// before is in flight: it may hold an interpreter of e.
func (d *drain) busyLocked(e uint64) bool {
	for ep := range d.inflight {
		if ep <= e {
			return true
		}
	}
	return false
}
