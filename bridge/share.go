package bridge

import (
	"os"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
)

// Connection sharing follows OpenSSH's multiplexing exactly, so that
// authentication is exactly as strict as ssh's:
//
//   - an invocation shares a connection only through its expanded
//     ControlPath: one target per path;
//   - ControlMaster auto (or no) joins the target's live connection as a
//     mux client would, without logging in;
//   - ControlMaster auto (or yes) with no live connection logs in with its
//     own settings and credentials, even when another's login completes
//     meanwhile (two ssh racing to be master each log in, side by side:
//     the second to finish finds the socket taken and keeps its
//     connection to itself), and its
//     connection becomes the path's master, kept for ControlPersist
//     after its last session (none: it ends with that session, or
//     with its ssh, killed: masterGone, endOrphanedOwnSessions);
//   - everything else ssh runs on a connection of its own (no
//     ControlPath; ControlMaster no or yes beside a master; ask, which
//     tries no master, as yes; autoask without one, whose confirmation
//     the bridge does not reproduce), and so
//     does the real ssh: the invocation is handed to it;
//   - a control socket that a real ssh master listens on is that
//     master's: the real ssh multiplexes over it;
//   - the daemon's master listens on its ControlPath (package mux), so a
//     real ssh with that path (the user's own, or one an invocation is
//     handed to) multiplexes over the daemon's connection.

// Fallback reasons of the connection-sharing rules. They are OpenSSH's
// contract, not a shortcoming: doctor does not count them as failures.
const (
	reasonNoControlPath = "no ControlPath: ssh connects on its own"
	reasonRealMaster    = "ControlPath is a master started by ssh"
	reasonOwnConnection = "ssh would connect on its own"
)

// SharingFallback reports whether reason is one of the connection-sharing
// rules': the real ssh serves such an invocation as OpenSSH's contract
// asks, not for want of anything in the bridge.
func SharingFallback(reason string) bool {
	return reason == reasonNoControlPath || reason == reasonRealMaster || strings.HasSuffix(reason, ": "+reasonOwnConnection)
}

// share returns the target iv's settings multiplex onto, or why the real
// ssh should serve iv instead; err is ssh's fatal error about the
// ControlPath.
func (s *Server) share(iv *invocation, settings *sshclient.Settings) (t *target, fallback string, err error) {
	if settings.ControlPath == "" {
		return nil, reasonNoControlPath, nil
	}
	note := ""
	own := s.targets.lookup(settings.ControlPath)
	switch {
	case settings.ControlMaster == "ask":
		// As yes, ssh tries no master: it logs in, and asks before each
		// client once it is one (mux.c's muxclient).
		return nil, "ControlMaster=ask: " + reasonOwnConnection, nil
	case own != nil && own.ownsControlPath(settings.ControlPath):
		// The daemon's own master socket: found as ssh would find it,
		// without dialling it.
	case settings.ControlMaster == "auto" || settings.ControlMaster == "no":
		// What ssh does with the socket first, as a mux client.
		var found sshclient.ControlSocket
		found, note, err = sshclient.ProbeControlPath(settings)
		switch {
		case err != nil:
			return nil, "", err
		case found == sshclient.ListeningMaster:
			return nil, reasonRealMaster, nil
		}
	case settings.ControlMaster == "yes":
		if sshclient.DialControl(settings.ControlPath) == nil {
			return nil, reasonRealMaster, nil
		}
	default:
		return nil, "ControlMaster=" + settings.ControlMaster + ": " + reasonOwnConnection, nil
	}
	t = s.targets.lookup(settings.ControlPath)
	if t != nil {
		t.endOrphanedOwnSessions()
	}
	// Only through its socket does ssh find a master: one whose socket
	// was removed or replaced serves its sessions on, but no new client.
	live := t != nil && t.hasLive() && t.ownsControlPath(settings.ControlPath)
	if t != nil && !live && t.orphaned(settings.ControlPath) {
		t.stop(false)
	}
	switch {
	case live && settings.ControlMaster == "yes":
		return nil, "ControlMaster=yes beside a master: " + reasonOwnConnection, nil
	case !live && settings.ControlMaster == "no":
		return nil, "ControlMaster=no without a master: " + reasonOwnConnection, nil
	case !live && exists(settings.ControlPath):
		// What ssh could not remove (a directory; anything, for yes):
		// its new master cannot listen there, and it runs without one,
		// saying so ("ControlSocket ... already exists").
		return nil, "something at the ControlPath: " + reasonOwnConnection, nil
	}
	if note != "" && settings.Says("ERROR") {
		iv.errorf("%s", note)
	}
	t = s.targets.get(settings, iv)
	iv.mustLogin.Store(!live)
	if live {
		iv.found.Store(t.masterConn())
	}
	iv.log = iv.log.WithField("target", t.label)
	return t, "", nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
