package bridge

import (
	"context"
	"sync"

	"github.com/ansible-bridge/ansible-bridge/interp"
)

// A become interpreter runs many steps after one run of its tool (sudo,
// su, doas), which decided then that the login user may become its
// user. Stock runs the tool for every step: a step after a change of
// what the tool reads (sudoers, PAM, limits, passwords, groups; the
// agent's POLICY_FILES) gets the tool's new answer, a refusal or a
// password prompt. So each agent keeps what it saw at its start, and:
//   - a step run in a become interpreter says whether what the tools
//     read changed (no round trip: it comes with the step's result);
//   - before a become interpreter runs a step after anything else ran on
//     the target (t.changes moved since it last looked), the bridge asks
//     it, and a root one beside it that can read what it cannot (sudoers.d
//     is root's alone): one round trip;
//
// and a change retires every become interpreter of the target, so that
// the next step runs the tool again. An unprivileged one with no root
// one to ask cannot see an edit inside /etc/sudoers.d: it is retired
// then, the tool deciding as for stock.

// touched counts one thing run on the target that could change what the
// become tools read, and returns the count with it.
func (t *target) touched() uint64 { return t.changes.Add(1) }

// touchedAsLogin is touched for what the login user does itself (a file
// transfer): only root can change what the become tools read, so
// nothing is counted where the login user's interpreter says it is not
// root.
func (t *target) touchedAsLogin() {
	if ag := t.anyAgent(); ag == nil || ag.Info().UID == 0 {
		t.touched()
	}
}

// keepBecomeAgent reports whether ag, key's interpreter, may run the
// next step: nothing ran on the target since it last looked (seen), or
// what the tools read is unchanged. If not, the target's become
// interpreters are retired.
func (t *target) keepBecomeAgent(ctx context.Context, iv *invocation, key slotKey, ag *interp.Client, seen uint64) bool {
	now := t.changes.Load()
	if now == seen {
		return true
	}
	t.policyChecks.Add(1)
	ask := []*interp.Client{ag}
	if ag.Info().UID != 0 {
		if root := t.rootBecomeAgent(); root != nil {
			ask = append(ask, root)
		}
	}
	answers := make([]interp.Policy, len(ask))
	errs := make([]error, len(ask))
	var wg sync.WaitGroup
	for i, c := range ask {
		wg.Go(func() { answers[i], errs[i] = c.PolicyChanged(ctx) })
	}
	wg.Wait()
	keep := true
	for i := range ask {
		keep = keep && errs[i] == nil && !answers[i].Changed
	}
	if keep && answers[0].Blind && len(ask) == 1 {
		keep = false // nothing can tell: as if it had changed
	}
	if keep {
		t.agents.sawPolicy(key, ag, now)
		return true
	}
	iv.log.WithField("interpreter", key.String()).Info("what the become tools read may have changed: become interpreters retired, the tool runs again")
	t.retireBecomeAgents()
	return false
}

// afterBecomeStep retires the target's become interpreters if the step
// ag ran (counted as touched returned before) changed what the tools
// read; else it notes that ag has seen everything up to that step.
func (t *target) afterBecomeStep(iv *invocation, key slotKey, ag *interp.Client, before uint64, res *interp.Result) {
	if res == nil {
		return
	}
	if res.PolicyChanged {
		iv.log.WithField("interpreter", key.String()).Info("step changed what the become tools read: become interpreters retired, the next step runs the tool again")
		t.retireBecomeAgents()
		return
	}
	t.agents.sawPolicy(key, ag, before)
}

// rootBecomeAgent returns a running become interpreter of uid 0, or nil.
func (t *target) rootBecomeAgent() *interp.Client {
	t.agents.mu.Lock()
	defer t.agents.mu.Unlock()
	for key, s := range t.agents.slots {
		if key.become != "" && s.alive() && s.client.Info().UID == 0 {
			return s.client
		}
	}
	return nil
}

// retireBecomeAgents takes the target's become interpreters out of use,
// and closes them once the invocations in flight (this one too) are done.
func (t *target) retireBecomeAgents() {
	t.agents.mu.Lock()
	var closing []*agentSlot
	for key, s := range t.agents.slots {
		if key.become != "" {
			delete(t.agents.slots, key)
			closing = append(closing, takeLocked(s)...)
		}
	}
	t.agents.mu.Unlock()
	t.policyRetired.Add(int64(len(closing)))
	if t.drain.retire(closing) {
		t.closeAgents(closing)
	}
}

// sawPolicy records that key's interpreter ag has seen what ran on the
// target up to count n.
func (a *agents) sawPolicy(key slotKey, ag *interp.Client, n uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.slots[key]; s != nil && s.client == ag && n > s.policySeen {
		s.policySeen = n
	}
}
