package bridge

import (
	"bytes"
	"errors"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"

	"github.com/ansible-bridge/ansible-bridge/interp"
)

// routeModule is an AnsiballZ module run by the target's persistent
// interpreter: `PYTHON DIR/AnsiballZ_x.py` with the wrapper held in a
// temp dir, or `PYTHON` with it piped on stdin (pipelining), with
// VAR=value prefixes.
const routeModule = "module"

var moduleRoute = route{
	name: routeModule,
	match: func(r *request) bool {
		// Under -tt without a terminal only a held wrapper is run.
		return r.fast && r.cmd.kind == cmdRunPython && (r.cmd.script != "" || !r.ttNoTerminal())
	},
	serve: func(r *request) (int, bool) { return r.serveModule() },
}

// slowTransfers is why a module wrapper uploaded into a temp dir ran
// through passthrough: the bridge never saw the upload.
const slowTransfers = "sftp/scp are not the bridge's shims (only ssh_executable set?): temp dirs and modules go to the target; put the shim directory first on PATH, or set sftp_executable and scp_executable too"

// serveModule runs an AnsiballZ module in the target's persistent
// interpreter: a wrapper held in a shared temp dir, or one piped on stdin
// (pipelining). Anything else, or a target without that python, is
// passed through.
func (r *request) serveModule() (int, bool) {
	ctx, iv, t, c := r.ctx, r.iv, r.t, r.cmd
	if startupEnv(c.env) != "" {
		t.countSlow(iv, slowStartupEnv)
		return 0, false
	}
	if refused, err := r.terminalRefused(); err != nil {
		return connFailure(iv, err), true
	} else if refused {
		return 0, false
	}
	var wrapper *ansiballz.Wrapper
	if c.script != "" {
		if wrapper = t.heldWrapper(c.script); wrapper == nil {
			if st, name := t.house.lookup(c.script); st != nil && name != "" {
				if _, ok := st.file(name); !ok {
					t.countSlow(iv, slowTransfers)
				}
			}
			return 0, false
		}
		defer wrapper.Forget()
		iv.entry.SetModule(wrapper)
		if why := secretEnv(c, wrapper); why != "" {
			t.countSlow(iv, why)
			return 0, false
		}
	} else {
		// Log in (and prompt for a password) while the shim can still
		// answer: once stdin flows, prompts are over.
		c, err := t.use(ctx, iv, func(*sshConn) error { return nil })
		if err != nil {
			return connFailure(iv, err), true
		}
		c.release()
		iv.entry.AwaitModule() // readPiped takes it apart
		if err := iv.accept(""); err != nil {
			return fakessh.ExitSSHError, true
		}
		var data []byte
		if data, wrapper = t.readPiped(iv, iv.stdin); wrapper == nil {
			return r.passthrough(data), true
		}
		defer wrapper.Wipe()
		if why := secretEnv(r.cmd, wrapper); why != "" {
			t.countSlow(iv, why)
			return r.passthrough(wrapper.Src), true
		}
	}
	python := strings.Join(c.python, " ")
	ag, err := t.agent(ctx, iv, python, r.sendEnv())
	if err != nil {
		if c.script != "" {
			return 0, false
		}
		return r.passthrough(wrapper.Src), true
	}
	req, held := r.moduleRequest(c, wrapper, "/bin/sh", true)
	t.countRoute(iv, routeModule)
	if ch := changedUsers(wrapper); ch.any() {
		t.retireUsers(ctx, iv, ag, ch)
	}
	tctx, stop := r.taskContext(req.PTY != nil, false)
	defer stop()
	t.touched()
	res, err := ag.RunModule(tctx, req)
	if errors.Is(err, interp.ErrRestart) {
		// /etc/environment, ~/.pam_environment, the login shell's files,
		// the interpreter or a module site imported changed: a fresh
		// login would see it, so the task runs in a fresh interpreter,
		// and the next become step runs its tool and python again.
		iv.log.Info("login environment, interpreter or site imports changed; restarting the interpreters")
		t.retireAgent(python)
		t.retireBecomeAgents()
		if ag, err = t.agent(ctx, iv, python, r.sendEnv()); err != nil {
			// Its python is gone: the step runs as sent, to fail as stock's.
			// No agent writes the held dirs it took: the passthrough
			// does, and rm must not wait for them.
			if req.Written != nil {
				req.Written()
			}
			if c.script != "" {
				return 0, false
			}
			return r.passthrough(wrapper.Src), true
		}
		res, err = ag.RunModule(tctx, req)
	}
	return r.moduleResult(req, held, res, err), true
}

// recognised returns src, what a python on the target was about to
// read, taken apart if it is a module wrapper the bridge runs, else nil.
// A source that looks like a wrapper but does not take apart (a newer
// ansible-core?) is counted as a slow path with the reason; plain Python
// (a script Ansible pipes, a user's own) is not worth a line.
func (t *target) recognised(iv *invocation, src []byte) *ansiballz.Wrapper {
	w, err := ansiballz.Parse(src)
	if err == nil {
		return w
	}
	if bytes.Contains(src, []byte("_ANSIBALLZ_WRAPPER")) || bytes.Contains(src, []byte("_ansiballz_main")) {
		t.countSlow(iv, "unrecognised module wrapper ("+err.Error()+"; a newer ansible-core?)")
	}
	return nil
}
