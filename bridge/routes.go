package bridge

import "context"

// A route serves one kind of ssh invocation. serveSSH parses the
// invocation once into a request and tries the routes in order: the
// first whose match accepts it serves it. A route's serve may still
// decline (served false) as long as it has sent nothing to the shim and
// read none of its stdin; the next route is tried then. exec, last,
// matches everything.
//
// Adding a fast path is adding a file route_NAME.go with a route value,
// and listing it here before exec. A route file uses no function of
// another: what routes share lives in session.go (running a command or
// subsystem as ssh does, the passthrough) and modulerun.go (a module run
// in an interpreter, the module and become routes'). A route counts what it did in status
// with t.countRoute (the names below, which tests and users read), or
// t.countSlow where it declines for a reason worth a line.
type route struct {
	name  string
	match func(*request) bool
	serve func(*request) (code int, served bool)
}

// routes is the ssh route table, in the order the routes are tried.
//
//	route    file              serves
//	control  route_control.go  ssh -O check|stop|exit, as a ControlMaster
//	dd       route_dd.go       dd of=PATH bs=65536 (piped transfer): held, or dd in the interpreter (or a session)
//	cached   route_cached.go   echo ~, mkdir ansible-tmp, chmod u+x, rm -f -r
//	module   route_module.go   PYTHON [DIR/AnsiballZ_x.py], in the persistent interpreter
//	become   route_become.go   sudo/su/doas around a module, in the become user's interpreter
//	exec     route_exec.go     anything else: a session channel on the persistent connection
//
// sftp and scp are programs of their own (transfer.go), not ssh routes.
var routes = []route{
	controlRoute,
	ddRoute,
	cachedRoute,
	moduleRoute,
	becomeRoute,
	execRoute,
}

// serveSSH serves an ssh invocation through the first route that takes
// it, and returns its exit status (-1: already answered, a fallback).
func (s *Server) serveSSH(ctx context.Context, iv *invocation) int {
	r, code := s.newRequest(ctx, iv)
	if r == nil {
		return code
	}
	for i := range routes {
		rt := &routes[i]
		if !rt.match(r) {
			continue
		}
		iv.mu.Lock()
		iv.trying = rt.name
		iv.mu.Unlock()
		if code, served := rt.serve(r); served {
			return code
		}
	}
	// exec serves everything: not reached.
	return r.passthrough(nil)
}
