package bridge

import (
	"bytes"
	"context"
	"fmt"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
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
			t.countRoute(routeCached)
			_, _ = iv.stdout().Write([]byte(out))
			return 0, true
		}
		var out, errb bytes.Buffer
		t.countRoute(routeExec)
		code := s.serveExec(ctx, iv, t, inv, settings, command, execOpts{stdout: &out, stderr: &errb})
		if code == 0 && errb.Len() == 0 {
			t.house.setHome(command, out.String())
		}
		return code, true
	case cmdMkTemp:
		if t.house.baseKnown(c.base) {
			t.countRoute(routeCached)
			t.house.addTemp(c.base, c.dir, false)
			_, _ = fmt.Fprintf(iv.stdout(), "%s=%s\n", c.name, c.dir)
			return 0, true
		}
		t.countRoute(routeExec)
		code := s.serveExec(ctx, iv, t, inv, settings, command, execOpts{})
		if code == 0 {
			t.house.addTemp(c.base, c.dir, true)
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
		t.countRoute(routeCached)
		return 0, true
	case cmdRmTemp:
		st, name := t.house.lookup(c.paths[0])
		if st == nil || name != "" {
			return 0, false
		}
		t.house.dropTemp(st.dir)
		if st.held() {
			t.countRoute(routeCached)
			return 0, true
		}
		return 0, false
	case cmdRunPython:
		return s.serveModule(ctx, iv, t, inv, settings, c)
	}
	return 0, false
}

// serveModule runs an AnsiballZ module. Until persistent interpreters
// land, it only makes sure the temp dir is on the target.
func (s *Server) serveModule(ctx context.Context, iv *invocation, t *target, inv *fakessh.SSHInvocation, settings *sshclient.Settings, c ansibleCmd) (int, bool) {
	return 0, false
}
