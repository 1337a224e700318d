package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/interp"
	shellquote "github.com/kballard/go-shellquote"
)

// Route names of the fast paths.
const (
	routeCached = "cached" // echo ~, mkdir, chmod u+x, rm -r answered by the bridge
	routeModule = "module" // AnsiballZ run by a persistent interpreter
)

// serveHousekeeping answers Ansible's temp-dir housekeeping without a
// round trip where it safely can. done is false when the command must
// run on the target as usual.
func (s *Server) serveHousekeeping(ctx context.Context, iv *invocation, t *target, inv *fakessh.SSHInvocation, settings *sshclient.Settings, command string) (code int, done bool) {
	if inv.TTY >= 2 && !iv.hello.StdinTTY {
		// Module runs come with -tt when pipelining is off.
		if c := classify(command); c.kind == cmdRunPython && c.script != "" {
			return s.serveModule(ctx, iv, t, inv, settings, c)
		}
		return 0, false
	}
	c := classify(command)
	switch c.kind {
	case cmdEchoHome:
		if out, ok := t.house.home(command); ok {
			t.countRoute(iv, routeCached)
			_, _ = iv.stdout().Write([]byte(out))
			return 0, true
		}
		var out, errb bytes.Buffer
		t.countRoute(iv, routeExec)
		code := s.serveExec(ctx, iv, t, inv, settings, command, execOpts{stdout: &out, stderr: &errb})
		if code == 0 && errb.Len() == 0 {
			t.house.setHome(command, out.String())
		}
		return code, true
	case cmdMkTemp:
		if !transfersThroughBridge(iv.hello.Env) {
			// The uploads will not come through the bridge: the directory
			// must exist on the target (see transfers.go).
			t.countSlow(iv, "sftp/scp are not the bridge's shims (only ssh_executable set?): temp dirs and modules go to the target; put the shim directory first on PATH, or set sftp_executable and scp_executable too")
			return 0, false
		}
		if t.house.baseKnown(c.base) {
			t.countRoute(iv, routeCached)
			t.house.addTemp(c.base, c.dir)
			_, _ = fmt.Fprintf(iv.stdout(), "%s=%s\n", c.name, c.dir)
			return 0, true
		}
		// The first temp dir under base: only base is made on the target,
		// by the `umask 77 && mkdir -p` of Ansible's own command (so its
		// errors read the same), and the dir is held like any other.
		t.countRoute(iv, routeExec)
		mkBase := "( umask 77 && mkdir -p \"` echo " + c.base + " `\" ) && sleep 0"
		code := s.serveExec(ctx, iv, t, inv, settings, shellquote.Join("/bin/sh", "-c", mkBase), execOpts{})
		if code == 0 {
			t.house.addTemp(c.base, c.dir)
			t.house.knowBase(c.base)
			_, _ = fmt.Fprintf(iv.stdout(), "%s=%s\n", c.name, c.dir)
		}
		return code, true
	case cmdChmodUX:
		for _, p := range c.paths {
			st, _ := t.house.lookup(p)
			if st == nil || !st.held() {
				return 0, false
			}
		}
		for _, p := range c.paths {
			st, name := t.house.lookup(p)
			if !st.chmodUX(name) {
				// Not held (any more): the real chmod reports it.
				return 0, false
			}
		}
		t.countRoute(iv, routeCached)
		return 0, true
	case cmdRmTemp:
		st, name := t.house.lookup(c.paths[0])
		if st == nil || name != "" {
			return 0, false
		}
		t.house.dropTemp(st.dir)
		if st.held() {
			t.countRoute(iv, routeCached)
			return 0, true
		}
		if ag := t.anyAgent(); ag != nil && st.writtenByAgent() {
			// rm -f -r reports nothing and always succeeds: no need to
			// wait, nor for an answer at all. The agent runs it before
			// any later request, which keeps stock's order.
			if err := ag.RemoveAllNoWait(st.dir); err == nil {
				t.unsynced.Store(ag)
				t.countRoute(iv, routeCached)
				return 0, true
			}
		}
		return 0, false
	case cmdRunPython:
		return s.serveModule(ctx, iv, t, inv, settings, c)
	case cmdSetFacl:
		// An unprivileged become user is to read a temp dir and its
		// wrapper: its interpreter gets the wrapper from the bridge, so
		// nothing needs exposing. Any other file goes the stock way.
		for _, p := range c.paths {
			st, name := t.house.lookup(p)
			if st == nil {
				return 0, false
			}
			if name != "" && (!strings.HasPrefix(name, "AnsiballZ_") || t.heldWrapper(p) == nil) {
				return 0, false
			}
		}
		t.countRoute(iv, routeCached)
		return 0, true
	}
	return 0, false
}

// maxPipedModule bounds how much piped stdin is read to look for an
// AnsiballZ wrapper before the command is passed through instead.
const maxPipedModule = 64 << 20

// serveModule runs an AnsiballZ module in the target's persistent
// interpreter: a wrapper held in a shared temp dir, or one piped on stdin
// (pipelining). Anything else, or a target without that python, is
// passed through.
func (s *Server) serveModule(ctx context.Context, iv *invocation, t *target, inv *fakessh.SSHInvocation, settings *sshclient.Settings, c ansibleCmd) (int, bool) {
	var wrapper []byte
	if c.script != "" {
		if wrapper = t.heldWrapper(c.script); wrapper == nil {
			return 0, false
		}
		iv.entry.SetModuleSource(wrapper)
	} else {
		// Log in (and prompt for a password) while the shim can still
		// answer: once stdin flows, prompts are over.
		c, err := t.use(ctx, iv, func(*sshConn) error { return nil })
		if err != nil {
			return connFailure(iv, err), true
		}
		c.release()
		if err := iv.accept(""); err != nil {
			return 255, true
		}
		data, err := io.ReadAll(io.LimitReader(iv.stdin, maxPipedModule))
		if err != nil || !t.recognised(iv, data) {
			return s.passthroughWith(ctx, iv, t, inv, settings, data), true
		}
		wrapper = data
	}
	python := strings.Join(c.python, " ")
	ag, err := t.agent(ctx, iv, python, sendEnv(settings.SendEnv, iv.hello.Env))
	if err != nil {
		if c.script != "" {
			return 0, false
		}
		return s.passthroughWith(ctx, iv, t, inv, settings, wrapper), true
	}
	req, held := moduleRequest(iv, inv, t, c, wrapper)
	t.countRoute(iv, routeModule)
	if u := deletedUser(wrapper); u != "" {
		t.retireUser(ctx, iv, ag, u)
	}
	res, err := ag.RunModule(ctx, req)
	if errors.Is(err, interp.ErrRestart) {
		// /etc/environment or ~/.pam_environment changed: a fresh login
		// would see it, so the task runs in a fresh interpreter.
		iv.log.Info("login environment changed; restarting the interpreter")
		t.retireAgent(python)
		if ag, err = t.agent(ctx, iv, python, sendEnv(settings.SendEnv, iv.hello.Env)); err == nil {
			res, err = ag.RunModule(ctx, req)
		}
	}
	return s.moduleResult(iv, settings, req, held, res, err), true
}

// heldWrapper returns the AnsiballZ wrapper at script if the bridge has
// its content, else nil.
func (t *target) heldWrapper(script string) []byte {
	st, name := t.house.lookup(script)
	if st == nil || name == "" {
		return nil
	}
	f, ok := st.file(name)
	if !ok || !isAnsiballZ(f.data) {
		return nil
	}
	return f.data
}

// moduleRequest is the interpreter request for a module run: the wrapper,
// the VAR=value prefixes, a PTY as -tt asks, and every held temp dir
// (not only the wrapper's: a piped module, such as copy with pipelining,
// finds its source there through its arguments).
// It also returns the held dirs the request writes to the target.
func moduleRequest(iv *invocation, inv *fakessh.SSHInvocation, t *target, c ansibleCmd, wrapper []byte) (interp.ModuleRequest, []*sharedTemp) {
	req := interp.ModuleRequest{Wrapper: wrapper, ScriptPath: c.script}
	if len(c.env) > 0 {
		req.Env = map[string]string{}
		for _, kv := range c.env {
			req.Env[kv[0]] = kv[1]
		}
	}
	var st *sharedTemp
	if c.script != "" {
		st, _ = t.house.lookup(c.script)
	}
	held := t.house.held()
	for _, h := range held {
		skip := ""
		if h == st && !keepRemoteFiles(wrapper) {
			skip = path.Base(c.script)
		}
		dirs, files := h.onTargetSpec(skip)
		req.Dirs = append(req.Dirs, dirs...)
		req.Files = append(req.Files, files...)
	}
	if wantTTY(inv, iv.hello.StdinTTY) {
		req.PTY = &interp.PTY{Term: iv.getenv("TERM"), Rows: iv.hello.Rows, Cols: iv.hello.Cols}
	}
	return req, held
}

// moduleResult passes a module run's result to the shim, as ssh would
// have, and returns the exit status.
func (s *Server) moduleResult(iv *invocation, settings *sshclient.Settings, req interp.ModuleRequest, held []*sharedTemp, res *interp.Result, err error) int {
	if err != nil {
		iv.log.WithError(err).Warn("module run in the interpreter failed")
		iv.errorf("ansible-bridge: persistent interpreter failed: %v", err)
		return 255
	}
	if len(req.Dirs) > 0 {
		for _, h := range held {
			h.markOnTarget()
		}
	}
	_, _ = iv.stdout().Write(res.Stdout)
	_, _ = iv.stderr().Write(res.Stderr)
	if req.PTY != nil && !iv.quiet {
		iv.errorf("Shared connection to %s closed.", settings.HostName)
	}
	return res.ExitCode
}

// passthroughWith runs the command on the target as usual, replaying the
// stdin already read.
func (s *Server) passthroughWith(ctx context.Context, iv *invocation, t *target, inv *fakessh.SSHInvocation, settings *sshclient.Settings, stdin []byte) int {
	command := strings.Join(inv.Command, " ")
	if err := t.materializeHeld(ctx, iv); err != nil {
		return materializeFailure(iv, err)
	}
	t.countRoute(iv, routeExec)
	return s.serveExec(ctx, iv, t, inv, settings, command, execOpts{stdinPrefix: stdin})
}

// isAnsiballZ recognises Ansible's module wrapper, in any format the
// bridge runs (package ansiballz).
func isAnsiballZ(src []byte) bool { return ansiballz.Is(src) }

// recognised reports whether src, what a python on the target was about
// to read, is a module wrapper the bridge runs. A source that looks like
// a wrapper but does not take apart (a newer ansible-core?) is counted as
// a slow path with the reason; plain Python (a script Ansible pipes, a
// user's own) is not worth a line.
func (t *target) recognised(iv *invocation, src []byte) bool {
	_, err := ansiballz.Parse(src)
	if err == nil {
		return true
	}
	if bytes.Contains(src, []byte("_ANSIBALLZ_WRAPPER")) || bytes.Contains(src, []byte("_ansiballz_main")) {
		t.countSlow(iv, "unrecognised module wrapper ("+err.Error()+"; a newer ansible-core?)")
	}
	return false
}

// keepRemoteFiles tells whether the task runs with ANSIBLE_KEEP_REMOTE_FILES,
// which Ansible passes in the module's internal arguments.
func keepRemoteFiles(wrapper []byte) bool {
	return bytes.Contains(wrapper, []byte(`"_ansible_keep_remote_files": true`))
}
