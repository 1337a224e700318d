package bridge

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
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

// agentSlot is one persistent interpreter of a target, per python
// command line. A failed start is remembered, so that a target without
// that python stays on passthrough (raw still works there).
type agentSlot struct {
	mu       sync.Mutex
	client   *interp.Client
	failed   error
	lastUsed time.Time // guarded by agents.mu
	started  time.Time
	password *passwordHash // a become interpreter's password, if it took one
}

// passwordHash keeps a password only as a salted hash, to check that a
// later step's password is the same.
type passwordHash struct {
	salt [16]byte
	sum  [32]byte
}

func newPasswordHash(pw string) *passwordHash {
	h := &passwordHash{}
	_, _ = rand.Read(h.salt[:])
	h.sum = h.hash(pw)
	return h
}

func (h *passwordHash) hash(pw string) [32]byte {
	return sha256.Sum256(append(h.salt[:], pw...))
}

func (h *passwordHash) matches(pw string) bool {
	sum := h.hash(pw)
	return subtle.ConstantTimeCompare(sum[:], h.sum[:]) == 1
}

// agents are a target's interpreters.
type agents struct {
	mu    sync.Mutex
	slots map[string]*agentSlot
	max   int // at most this many running; 0 means DefaultMaxInterpreters
}

// makeRoom retires the least recently used idle interpreter when the
// target has its maximum running, so that a new one may start. keep is
// the slot about to start. It fails when all of them are busy.
func (t *target) makeRoom(keep *agentSlot) error {
	t.agents.mu.Lock()
	limit := t.agents.max
	if limit <= 0 {
		limit = DefaultMaxInterpreters
	}
	running := 0
	var lru *agentSlot
	var lruKey string
	for k, s := range t.agents.slots {
		if s == keep {
			continue
		}
		c := s.running()
		if c == nil {
			continue
		}
		running++
		if c.Stats().InFlight == 0 && (lru == nil || s.lastUsed.Before(lru.lastUsed)) {
			lru, lruKey = s, k
		}
	}
	if running < limit {
		t.agents.mu.Unlock()
		return nil
	}
	if lru == nil {
		t.agents.mu.Unlock()
		return errInterpreterLimit
	}
	delete(t.agents.slots, lruKey)
	t.agents.mu.Unlock()
	t.log.WithField("python", lruKey).WithField("limit", limit).Info("interpreter limit reached; retiring the least recently used idle one")
	lru.close()
	return nil
}

// interpreterStatus describes the target's running interpreters.
func (t *target) interpreterStatus() []InterpreterStatus {
	t.agents.mu.Lock()
	defer t.agents.mu.Unlock()
	var out []InterpreterStatus
	for python, s := range t.agents.slots {
		c := s.running()
		if c == nil {
			continue
		}
		info, stats := c.Info(), c.Stats()
		out = append(out, InterpreterStatus{
			Python: strings.ReplaceAll(strings.TrimPrefix(python, becomeKeyPrefix), "\x00", " "), User: info.User, PID: info.PID,
			AgeSecs:  time.Since(s.started).Seconds(),
			Requests: stats.Requests, InFlight: stats.InFlight,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Python < out[j].Python })
	return out
}

// running returns the slot's live client, or nil.
func (s *agentSlot) running() *interp.Client {
	if !s.mu.TryLock() {
		// Starting right now: counts as running, not idle.
		return nil
	}
	defer s.mu.Unlock()
	if s.client == nil {
		return nil
	}
	select {
	case <-s.client.Done():
		return nil
	default:
		return s.client
	}
}

func (s *agentSlot) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		_ = s.client.Close()
	}
}

// agent returns the running interpreter for python, starting it over a
// session of the target's connection when needed.
// env holds the variables ssh would send (SendEnv) for the invocation that
// starts it, so the interpreter sees the login environment a stock step
// would.
func (t *target) agent(ctx context.Context, p sshclient.Prompter, python string, env [][2]string) (*interp.Client, error) {
	t.agents.mu.Lock()
	if t.agents.slots == nil {
		t.agents.slots = map[string]*agentSlot{}
	}
	slot := t.agents.slots[python]
	if slot == nil {
		slot = &agentSlot{}
		t.agents.slots[python] = slot
	}
	slot.lastUsed = time.Now()
	t.agents.mu.Unlock()

	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.failed != nil {
		return nil, slot.failed
	}
	if slot.client != nil {
		select {
		case <-slot.client.Done():
			t.log.WithError(slot.client.Err()).Info("interpreter gone; starting a new one")
			slot.client = nil
		default:
			return slot.client, nil
		}
	}
	if err := t.makeRoom(slot); err != nil {
		return nil, err
	}
	c, err := bootstrap.Start(ctx, &sessionRunner{t: t, p: p, env: env}, python, t.log)
	if err != nil {
		t.log.WithError(err).WithField("python", python).Info("no persistent interpreter; this target stays on passthrough for it")
		slot.failed = err
		return nil, err
	}
	info := c.Info()
	t.log.WithField("python", python).WithField("pid", info.PID).Info("interpreter started")
	slot.client, slot.started = c, time.Now()
	return c, nil
}

// runningAgent returns the running interpreter for key, or nil, and the
// password it was started with (nil if none).
func (t *target) runningAgent(key string) (*interp.Client, *passwordHash) {
	t.agents.mu.Lock()
	s := t.agents.slots[key]
	if s != nil {
		s.lastUsed = time.Now()
	}
	t.agents.mu.Unlock()
	if s == nil {
		return nil, nil
	}
	return s.running(), s.password
}

// agentRoom makes room for a new interpreter under key (see makeRoom).
func (t *target) agentRoom(key string) error {
	t.agents.mu.Lock()
	keep := t.agents.slots[key]
	t.agents.mu.Unlock()
	return t.makeRoom(keep)
}

// setAgent records an interpreter started by the caller under key, and
// the password that started it ("" for none). It reports false, and
// records nothing, when another one started meanwhile is running: the
// caller uses its own for its step, then closes it.
func (t *target) setAgent(key string, c *interp.Client, password string) bool {
	slot := &agentSlot{client: c, lastUsed: time.Now(), started: time.Now()}
	if password != "" {
		slot.password = newPasswordHash(password)
	}
	t.agents.mu.Lock()
	defer t.agents.mu.Unlock()
	if t.agents.slots == nil {
		t.agents.slots = map[string]*agentSlot{}
	}
	if old := t.agents.slots[key]; old != nil && old.running() != nil {
		return false
	}
	t.agents.slots[key] = slot
	return true
}

// anyAgent returns a running interpreter of the target's login user, or
// nil.
func (t *target) anyAgent() *interp.Client {
	t.agents.mu.Lock()
	defer t.agents.mu.Unlock()
	for key, s := range t.agents.slots {
		if strings.HasPrefix(key, becomeKeyPrefix) {
			continue
		}
		s.mu.Lock()
		c := s.client
		s.mu.Unlock()
		if c != nil {
			select {
			case <-c.Done():
			default:
				return c
			}
		}
	}
	return nil
}

// retireAgent closes the interpreter for python; the next use starts a
// new one.
func (t *target) retireAgent(python string) {
	t.agents.mu.Lock()
	slot := t.agents.slots[python]
	delete(t.agents.slots, python)
	t.agents.mu.Unlock()
	if slot != nil {
		slot.close()
	}
}

// takeAgents detaches the target's interpreters (reset_connection) and
// forgets failed starts, so that a later step starts afresh; the caller
// closes them (closeAgents).
func (t *target) takeAgents() map[string]*agentSlot {
	t.agents.mu.Lock()
	slots := t.agents.slots
	t.agents.slots = nil
	t.agents.mu.Unlock()
	return slots
}

// closeAgents closes interpreters detached by takeAgents.
func (t *target) closeAgents(slots map[string]*agentSlot) {
	for _, s := range slots {
		s.close()
	}
}

// sessionRunner starts remote commands on the target's connection for
// bootstrap.
type sessionRunner struct {
	t   *target
	p   sshclient.Prompter
	env [][2]string
}

func (r *sessionRunner) Start(ctx context.Context, command string) (io.WriteCloser, io.Reader, io.Reader, func() error, error) {
	c, sess, err := r.t.newSession(ctx, r.p, r.env)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	fail := func(err error) (io.WriteCloser, io.Reader, io.Reader, func() error, error) {
		sess.Close()
		c.release()
		return nil, nil, nil, nil, fmt.Errorf("start interpreter session: %w", err)
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		return fail(err)
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	stderr, err := sess.StderrPipe()
	if err != nil {
		return fail(err)
	}
	if err := sess.Start(command); err != nil {
		return fail(err)
	}
	var once sync.Once
	wait := func() error {
		err := sess.Wait()
		once.Do(c.release)
		return err
	}
	return stdin, stdout, stderr, wait, nil
}
