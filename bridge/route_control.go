package bridge

import (
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
	// ssh's fatal()s here say nothing under LogLevel QUIET (-q).
	said := r.settings.Says("FATAL")
	if path == "" {
		if said {
			iv.errorf("No ControlPath specified for \"-O\" command")
		}
		return fakessh.ExitSSHError
	}
	switch r.settings.ControlMaster {
	case "yes":
		return r.controlAsMaster()
	case "ask":
		// ssh logs in as a would-be master, which asks before each
		// client: not the bridge's to reproduce.
		iv.fallback("-O " + inv.Control + " with ControlMaster=ask: " + reasonOwnConnection)
		return -1
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
	// ssh reaches a master through its socket only.
	running := t != nil && t.hasLive() && t.ownsControlPath(path)
	iv.log.WithField("control", inv.Control).WithField("running", running).Info("control request")
	if !running {
		if dialErr == nil { // the socket went with its master meanwhile
			dialErr = syscall.ENOENT
		}
		if said {
			iv.errorf("%s", sshclient.ControlConnectError(path, dialErr))
		}
		return fakessh.ExitSSHError
	}
	return r.answerControl(t)
}

// answerControl answers `ssh -O cmd` for t's live master. The requests
// sent are said unless LogLevel is QUIET (-q), as mux.c says them.
func (r *request) answerControl(t *target) int {
	iv, cmd := r.iv, r.inv.Control
	said := !r.inv.Quiet && r.settings.Says("FATAL")
	switch cmd {
	case "check":
		iv.errorf("Master running (pid=%d)", t.control.Load().PID())
	case "stop":
		t.stop(false)
		if said {
			iv.errorf("Stop listening request sent.")
		}
	case "exit":
		t.stop(true)
		if said {
			iv.errorf("Exit request sent.")
		}
	default:
		// forward, cancel, proxy: the real ssh asks the daemon's
		// control socket itself.
		iv.fallback("-O " + cmd)
		return -1
	}
	return 0
}

// controlAsMaster is `ssh -O cmd` with ControlMaster yes, which asks no
// master: ssh logs in and becomes one, and with ControlPersist its
// foreground half asks the backgrounded master the command. Beside a
// live master, or without ControlPersist (ssh then runs a login shell
// too), the real ssh runs it.
func (r *request) controlAsMaster() int {
	iv, inv := r.iv, r.inv
	switch {
	case inv.Control != "check" && inv.Control != "stop" && inv.Control != "exit":
		iv.fallback("-O " + inv.Control)
		return -1
	case r.settings.ControlPersist == sshclient.PersistNo:
		iv.fallback("-O " + inv.Control + " with ControlMaster=yes and no ControlPersist: " + reasonOwnConnection)
		return -1
	}
	t, fallback, err := r.s.share(iv, r.settings)
	switch {
	case err != nil:
		return connFailure(iv, err)
	case fallback != "":
		iv.fallback(fallback)
		return -1
	}
	t.countRoute(iv, routeControl)
	c, err := t.use(r.ctx, iv, func(*sshConn) error { return nil })
	if err != nil {
		return connFailure(iv, err)
	}
	c.release()
	iv.log.WithField("control", inv.Control).Info("control request as a new master")
	return r.answerControl(t)
}
