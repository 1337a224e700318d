package bridge

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bootstrap"
	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/interp"
)

// DefaultMaxInterpreters is how many interpreters a target may have at
// once unless ANSIBLE_BRIDGE_MAX_INTERPRETERS says otherwise.
const DefaultMaxInterpreters = 20

// errInterpreterLimit means every interpreter of the target is busy and
// none may be added: the step runs through passthrough instead.
var errInterpreterLimit = errors.New("interpreter limit reached and all interpreters busy")

// slotState is where an agent slot is in its life.
type slotState int

const (
	slotStarting slotState = iota // booting, outside any lock; ready not yet closed
	slotReady                     // client is set (it may have died since)
	slotFailed                    // the python is missing: err, kept so the target stays on passthrough
	slotClosed                    // retired; whoever holds it closes its client
)

// slotKey names an agent slot: the python command line, and for a
// become interpreter the become wrapper's identity.
type slotKey struct {
	become string // become.Wrapper.Identity (never empty); "" for the login user
	python string
	// terminal: the become tool ran on a terminal. It serves only steps
	// it would run on one too, as a tool's policy may differ with or
	// without one (sudo's requiretty).
	terminal bool
}

// String is the key as status shows it: the become identity, if any,
// then the python command line.
func (k slotKey) String() string {
	if k.become == "" {
		return k.python
	}
	if k.terminal {
		return k.become + " on a terminal " + k.python
	}
	return k.become + " " + k.python
}

// agentSlot is one persistent interpreter of a target, per slotKey. All fields are guarded
// by agents.mu; nothing holds that lock while an interpreter boots or
// closes, so status never waits on either.
type agentSlot struct {
	state    slotState
	ready    chan struct{} // closed when the start ends, whatever its outcome
	client   *interp.Client
	err      error
	lastUsed time.Time
	started  time.Time
	password *passwordHash // a become interpreter's password, if it took one
	// policySeen is the target's changes count up to which a become
	// interpreter has seen what its tool reads (becomepolicy.go).
	policySeen uint64
}

// alive reports whether s has a running interpreter.
func (s *agentSlot) alive() bool {
	if s.state != slotReady {
		return false
	}
	select {
	case <-s.client.Done():
		return false
	default:
		return true
	}
}

// forgetDead drops what refers to interpreters that are gone (their
// slots, the one a removal is unsynced on), so that a closed
// connection's clients, and through their channels its last packets,
// become garbage without waiting for a later step to find them dead.
func (t *target) forgetDead() {
	t.agents.dropDead()
	if ag := t.unsynced.Load(); ag != nil {
		select {
		case <-ag.Done():
			t.unsynced.CompareAndSwap(ag, nil)
		default:
		}
	}
}

// dropDead removes the slots whose interpreter is gone.
func (a *agents) dropDead() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropDeadLocked()
}

// dropDeadLocked is dropDead with a.mu held: each freed slot gives back
// its place under the limit.
func (a *agents) dropDeadLocked() {
	for k, s := range a.slots {
		if s.state == slotReady && !s.alive() {
			delete(a.slots, k)
			s.state = slotClosed
			a.live--
		}
	}
}

// passwordHash keeps a password only as a salted hash, to check that a
// later step's password is the same.
type passwordHash struct {
	salt [16]byte
	sum  [32]byte
}

func newPasswordHash(pw []byte) *passwordHash {
	h := &passwordHash{}
	_, _ = rand.Read(h.salt[:])
	h.sum = h.hash(pw)
	return h
}

func (h *passwordHash) hash(pw []byte) [32]byte {
	d := sha256.New()
	d.Write(h.salt[:])
	d.Write(pw)
	var sum [32]byte
	d.Sum(sum[:0])
	return sum
}

func (h *passwordHash) matches(pw []byte) bool {
	sum := h.hash(pw)
	return subtle.ConstantTimeCompare(sum[:], h.sum[:]) == 1
}

// agents are a target's interpreters.
type agents struct {
	mu    sync.Mutex
	slots map[slotKey]*agentSlot
	// live counts interpreters booting, running or being closed, recorded
	// or not: what max bounds. A retired interpreter counts until its
	// Close has returned.
	live int
	max  int // 0 means DefaultMaxInterpreters
	// start boots an interpreter; nil means bootstrap.Start over a
	// session of the target's connection. Tests replace it.
	start func(ctx context.Context, python string, r bootstrap.Runner) (*interp.Client, error)
}

func (a *agents) limit() int {
	if a.max <= 0 {
		return DefaultMaxInterpreters
	}
	return a.max
}

// victim is an idle interpreter taken out of its slot to make room for
// a new one.
type victim struct {
	key    slotKey
	client *interp.Client
}

// reserveLocked counts a new interpreter against the limit and returns a
// starting slot for it, recorded under key when record is set. At the
// limit it takes the place of the least recently used idle interpreter,
// v, which the caller closes (closeVictim) before booting, so the limit
// holds at every moment. It fails when all of them are busy or starting.
func (a *agents) reserveLocked(key slotKey, record bool) (slot *agentSlot, v *victim, err error) {
	limit := a.limit()
	if a.live >= limit {
		// Interpreters that died on their own free their place.
		a.dropDeadLocked()
	}
	if a.live >= limit {
		var lru *agentSlot
		var lruKey slotKey
		for k, s := range a.slots {
			if s.state == slotReady && s.client.Stats().InFlight == 0 && (lru == nil || s.lastUsed.Before(lru.lastUsed)) {
				lru, lruKey = s, k
			}
		}
		if lru == nil {
			return nil, nil, errInterpreterLimit
		}
		delete(a.slots, lruKey)
		lru.state = slotClosed
		v = &victim{key: lruKey, client: lru.client} // its place in live passes to the new one
	} else {
		a.live++
	}
	slot = &agentSlot{state: slotStarting, ready: make(chan struct{}), lastUsed: time.Now()}
	if record {
		if a.slots == nil {
			a.slots = map[slotKey]*agentSlot{}
		}
		a.slots[key] = slot
	}
	return slot, v, nil
}

// closeVictim closes the interpreter reserveLocked retired, if any.
func (t *target) closeVictim(v *victim) {
	if v == nil {
		return
	}
	t.log.WithField("python", v.key.String()).WithField("limit", t.agents.limit()).Info("interpreter limit reached; retiring the least recently used idle one")
	_ = v.client.Close()
}

// finish records how slot's start ended (c, or err) and wakes those
// waiting for it. A failure is kept for key only when sticky. It reports
// false when c was not recorded (the slot was retired meanwhile, or was
// never recorded): c is then the caller's, to use for its step and
// release with dropAgent.
func (a *agents) finish(key slotKey, slot *agentSlot, c *interp.Client, password []byte, err error, sticky bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	defer close(slot.ready)
	recorded := a.slots[key] == slot
	if err != nil {
		a.live--
		if recorded && sticky && slot.state == slotStarting {
			slot.state, slot.err = slotFailed, err
		} else {
			slot.state = slotClosed
			if recorded {
				delete(a.slots, key)
			}
		}
		return false
	}
	if !recorded || slot.state != slotStarting {
		slot.state = slotClosed
		return false
	}
	slot.state, slot.client, slot.started = slotReady, c, time.Now()
	if len(password) > 0 {
		slot.password = newPasswordHash(password)
	}
	return true
}

// dropAgent closes an interpreter that no slot records and gives its
// place back.
func (t *target) dropAgent(c *interp.Client) {
	_ = c.Close()
	t.agents.mu.Lock()
	t.agents.live--
	t.agents.mu.Unlock()
}

// retire closes the interpreters of slots already taken out of the map
// (marked closed); a slot still starting is closed by its starter.
func (t *target) retire(slots []*agentSlot) {
	for _, s := range slots {
		if s.client != nil {
			t.dropAgent(s.client)
		}
	}
}

// takeLocked marks s closed and returns it if its interpreter is the
// caller's to close.
func takeLocked(s *agentSlot) []*agentSlot {
	state := s.state
	s.state = slotClosed
	if state == slotReady {
		return []*agentSlot{s}
	}
	return nil
}

// interpreterStatus describes the target's running interpreters.
func (t *target) interpreterStatus() []InterpreterStatus {
	t.agents.mu.Lock()
	defer t.agents.mu.Unlock()
	var out []InterpreterStatus
	for key, s := range t.agents.slots {
		if !s.alive() {
			continue
		}
		info, stats := s.client.Info(), s.client.Stats()
		out = append(out, InterpreterStatus{
			Python: key.String(), User: info.User, PID: info.PID,
			AgeSecs:  time.Since(s.started).Seconds(),
			Requests: stats.Requests, InFlight: stats.InFlight,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Python < out[j].Python })
	return out
}

// agent returns the running interpreter for python, starting it over a
// session of the target's connection when needed; concurrent callers
// wait for one start.
// env holds the variables ssh would send (SendEnv) for the invocation that
// starts it, so the interpreter sees the login environment a stock step
// would.
func (t *target) agent(ctx context.Context, p sshclient.Prompter, python string, env [][2]string) (*interp.Client, error) {
	a := &t.agents
	key := slotKey{python: python}
	for {
		a.mu.Lock()
		if s := a.slots[key]; s != nil {
			s.lastUsed = time.Now()
			switch {
			case s.state == slotStarting:
				ready := s.ready
				a.mu.Unlock()
				select {
				case <-ready:
					continue
				case <-ctx.Done():
					return nil, fmt.Errorf("wait for the interpreter to start: %w", ctx.Err())
				}
			case s.state == slotFailed:
				err := s.err
				a.mu.Unlock()
				return nil, err
			case s.alive():
				a.mu.Unlock()
				return s.client, nil
			default:
				t.log.WithError(s.client.Err()).Info("interpreter gone; starting a new one")
				delete(a.slots, key)
				s.state = slotClosed
				a.live--
			}
		}
		slot, victim, err := a.reserveLocked(key, true)
		a.mu.Unlock()
		if err != nil {
			return nil, err
		}
		t.closeVictim(victim)
		c, err := t.startAgent(ctx, &sessionRunner{t: t, p: p, env: env}, python)
		// A shim that went away says nothing about the target's python.
		sticky := err != nil && ctx.Err() == nil
		if sticky {
			t.log.WithError(err).WithField("python", python).Info("no persistent interpreter; this target stays on passthrough for it")
		}
		if !a.finish(key, slot, c, nil, err, sticky) {
			if err != nil {
				return nil, err
			}
			t.dropAgent(c)
			return nil, fmt.Errorf("interpreter for %s retired while starting: %w", python, interp.ErrAgentGone)
		}
		t.log.WithField("python", python).WithField("pid", c.Info().PID).Info("interpreter started")
		return c, nil
	}
}

// runningAgent returns the running interpreter for key, or nil, and the
// password it was started with (nil if none). It waits (bounded by ctx)
// for one being started.
func (t *target) runningAgent(ctx context.Context, key slotKey) (*interp.Client, *passwordHash, uint64) {
	for {
		t.agents.mu.Lock()
		s := t.agents.slots[key]
		if s == nil {
			t.agents.mu.Unlock()
			return nil, nil, 0
		}
		s.lastUsed = time.Now()
		if s.state == slotStarting {
			ready := s.ready
			t.agents.mu.Unlock()
			select {
			case <-ready:
				continue
			case <-ctx.Done():
				return nil, nil, 0
			}
		}
		defer t.agents.mu.Unlock()
		if !s.alive() {
			return nil, nil, 0
		}
		return s.client, s.password, s.policySeen
	}
}

// agentReservation is a place for an interpreter that the caller starts
// itself (a become interpreter, through Ansible's wrapper).
type agentReservation struct {
	key  slotKey
	slot *agentSlot
}

// reserveAgent makes room for an interpreter under key (see
// reserveLocked). If one is already running or starting there, the
// caller's is for its own step only: counted, but not recorded.
func (t *target) reserveAgent(key slotKey) (*agentReservation, error) {
	t.agents.mu.Lock()
	old := t.agents.slots[key]
	record := old == nil || !(old.state == slotStarting || old.alive())
	if record && old != nil {
		delete(t.agents.slots, key)
		if old.state == slotReady {
			old.state = slotClosed
			t.agents.live-- // dead already: nothing to close
		}
	}
	slot, victim, err := t.agents.reserveLocked(key, record)
	t.agents.mu.Unlock()
	if err != nil {
		return nil, err
	}
	t.closeVictim(victim)
	return &agentReservation{key: key, slot: slot}, nil
}

// done records the interpreter started for r (c nil and err set if it did
// not start), with the password that started it (nil for none), which
// it keeps only as a salted hash and overwrites. It reports false when c
// was not recorded: the caller uses it for its step, then releases it
// with dropAgent.
func (r *agentReservation) done(t *target, c *interp.Client, password []byte, err error) bool {
	defer clear(password)
	if c == nil && err == nil {
		err = errors.New("interpreter not started")
	}
	return t.agents.finish(r.key, r.slot, c, password, err, false)
}

// anyAgent returns a running interpreter of the target's login user, or
// nil.
func (t *target) anyAgent() *interp.Client {
	t.agents.mu.Lock()
	defer t.agents.mu.Unlock()
	for key, s := range t.agents.slots {
		if key.become == "" && s.alive() {
			return s.client
		}
	}
	return nil
}

// retireAgent closes the interpreter for python; the next use starts a
// new one.
func (t *target) retireAgent(python string) {
	key := slotKey{python: python}
	t.agents.mu.Lock()
	var closing []*agentSlot
	if s := t.agents.slots[key]; s != nil {
		delete(t.agents.slots, key)
		closing = takeLocked(s)
	}
	t.agents.mu.Unlock()
	t.retire(closing)
}

// takeAgents detaches the target's interpreters (reset_connection) and
// forgets failed starts, so that a later step starts afresh; the caller
// closes them (closeAgents).
func (t *target) takeAgents() []*agentSlot {
	t.agents.mu.Lock()
	var closing []*agentSlot
	for _, s := range t.agents.slots {
		closing = append(closing, takeLocked(s)...)
	}
	t.agents.slots = nil
	t.agents.mu.Unlock()
	return closing
}

// closeAgents closes interpreters detached by takeAgents.
func (t *target) closeAgents(slots []*agentSlot) {
	t.retire(slots)
}

// sessionRunner starts remote commands on the target's connection for
// bootstrap.
type sessionRunner struct {
	t   *target
	p   sshclient.Prompter
	env [][2]string
}

func (r *sessionRunner) Start(ctx context.Context, command string) (interp.Conn, error) {
	// The hello awaited next says whether the command started: no round
	// trip for the exec reply before the payload goes.
	c, e, err := r.t.startExec(ctx, r.p, r.env, nil, command)
	if err != nil {
		return interp.Conn{}, fmt.Errorf("start interpreter session: %w", err)
	}
	c.interpreters.Add(1)
	release := func() {
		c.interpreters.Add(-1)
		c.release()
	}
	return interp.Conn{Stdin: e.Stdin(), Stdout: e.Stdout(), Stderr: e.Stderr(), Wait: sessionWait(e, release)}, nil
}

// sessionWait returns an interp.Conn Wait for sess, whose end it awaits
// from now on, then calls release. A wait whose ctx ends first closes the
// session and returns; the await ends once the server confirms the close
// (or the connection goes), not when a stuck remote command would exit.
func sessionWait(sess *sshclient.Exec, release func()) func(context.Context) error {
	sess.AtEnd(release)
	return func(ctx context.Context) error {
		select {
		case <-sess.Done():
			return sess.Wait()
		case <-ctx.Done():
			_ = sess.Close()
			return fmt.Errorf("remote command still running: %w", ctx.Err())
		}
	}
}

// startAgent boots an interpreter for python through r.
func (t *target) startAgent(ctx context.Context, r bootstrap.Runner, python string) (*interp.Client, error) {
	if t.agents.start != nil {
		return t.agents.start(ctx, python, r)
	}
	return bootstrap.Start(ctx, r, python, t.log)
}
