package bridge

import "github.com/ansible-bridge/ansible-bridge/bridge/become"

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
		r.concealUnlessKnown()
		if r.becomeStep {
			// Its stdin may carry a become password the bridge cannot
			// tell from the rest: the journal keeps none of it.
			r.iv.noStdinCapture = true
		}
		return r.passthrough(nil), true
	},
}

// concealUnlessKnown keeps the journal from showing an exec's command and
// output unless the bridge can tell they are no no_log task's: Ansible's
// housekeeping commands, and a module run from a wrapper it holds and
// reads (SetModule decides). raw, script, a user's own command or a
// wrapper it cannot read keep what a no_log task's entry keeps.
func (r *request) concealUnlessKnown() {
	c := classify(r.command)
	if w, err := become.Parse(r.command); err == nil {
		c = classifyInner(w.Inner)
	}
	switch {
	case c.kind == cmdRunPython && c.script != "" && r.t != nil:
		if w := r.t.heldWrapper(c.script); w != nil {
			r.iv.entry.SetModule(w)
			w.Forget()
			return
		}
		r.iv.entry.Conceal()
	case c.kind == cmdOther, c.kind == cmdRunPython:
		r.iv.entry.Conceal()
	}
}
