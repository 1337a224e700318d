package bridge

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/ansible-bridge/ansible-bridge/bootstrap"
	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/interp"
	"golang.org/x/crypto/ssh"
)

// agentSlot is one persistent interpreter of a target, per python
// command line. A failed start is remembered, so that a target without
// that python stays on passthrough (raw still works there).
type agentSlot struct {
	mu     sync.Mutex
	client *interp.Client
	failed error
}

// agents are a target's interpreters.
type agents struct {
	mu    sync.Mutex
	slots map[string]*agentSlot
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
	c, err := bootstrap.Start(ctx, &sessionRunner{t: t, p: p, env: env}, python, t.log)
	if err != nil {
		t.log.WithError(err).WithField("python", python).Info("no persistent interpreter; this target stays on passthrough for it")
		slot.failed = err
		return nil, err
	}
	info := c.Info()
	t.log.WithField("python", python).WithField("pid", info.PID).Info("interpreter started")
	slot.client = c
	return c, nil
}

// anyAgent returns a running interpreter of the target, or nil.
func (t *target) anyAgent() *interp.Client {
	t.agents.mu.Lock()
	defer t.agents.mu.Unlock()
	for _, s := range t.agents.slots {
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
		slot.mu.Lock()
		if slot.client != nil {
			_ = slot.client.Close()
		}
		slot.mu.Unlock()
	}
}

// retireAgents closes the target's interpreters (reset_connection) and
// forgets failed starts, so that a later step tries again.
func (t *target) retireAgents() {
	t.agents.mu.Lock()
	slots := t.agents.slots
	t.agents.slots = nil
	t.agents.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		if s.client != nil {
			_ = s.client.Close()
		}
		s.mu.Unlock()
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
	var sess *ssh.Session
	c, err := r.t.use(ctx, r.p, func(c *sshConn) error {
		var err error
		sess, err = c.client.NewSession()
		return err
	})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	fail := func(err error) (io.WriteCloser, io.Reader, io.Reader, func() error, error) {
		sess.Close()
		c.release()
		return nil, nil, nil, nil, fmt.Errorf("start interpreter session: %w", err)
	}
	for _, kv := range r.env {
		_ = sess.Setenv(kv[0], kv[1])
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
