package bridge

import (
	"os"
	"syscall"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// routeControl is `ssh -O check|stop|exit`, answered as a ControlMaster
// would. It looks the target up but never makes one: r.t is nil.
const routeControl = "control"

var controlRoute = route{
	name:  routeControl,
	match: func(r *request) bool { return r.inv.Control != "" },
	serve: func(r *request) (int, bool) { return r.serveControl(), true },
}

// serveControl answers `ssh -O cmd` as an OpenSSH control master would,
// with the target's connection standing in for the master. Ansible uses
// check and stop for `meta: reset_connection`.
func (r *request) serveControl() int {
	iv, inv := r.iv, r.inv
	path := r.settings.ControlPath
	if path == "" {
		iv.errorf("No ControlPath specified for \"-O\" command")
		return fakessh.ExitSSHError
	}
	t := r.s.targets.lookup(path)
	var dialErr error
	if t == nil || !t.ownsControlPath(path) {
		if dialErr = sshclient.DialControl(path); dialErr == nil {
			iv.fallback(reasonRealMaster)
			return -1
		}
	}
	if t != nil {
		t.countRoute(iv, routeControl)
		iv.log = iv.log.WithField("target", t.label)
	}
	running := t != nil && t.hasLive()
	iv.log.WithField("control", inv.Control).WithField("running", running).Info("control request")
	if !running {
		if dialErr == nil { // the socket went with its master meanwhile
			dialErr = syscall.ENOENT
		}
		iv.errorf("%s", sshclient.ControlConnectError(path, dialErr))
		return fakessh.ExitSSHError
	}
	switch inv.Control {
	case "check":
		iv.errorf("Master running (pid=%d)", os.Getpid())
	case "stop":
		t.stop(false)
		iv.errorf("Stop listening request sent.")
	case "exit":
		t.stop(true)
		iv.errorf("Exit request sent.")
	default:
		// forward, cancel, proxy: not something the bridge can honour.
		iv.fallback("-O " + inv.Control)
		return -1
	}
	return 0
}
