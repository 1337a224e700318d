package sshclient

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// SunPathMax is the size of a unix socket address's path (sun_path).
const SunPathMax = 108

// ControlSocket is what ssh finds at a ControlPath before it
// multiplexes (mux.c's muxclient, for ControlMaster auto and no).
type ControlSocket int

const (
	NoControlSocket ControlSocket = iota // nothing there, or a stale socket ssh removed
	ListeningMaster                      // a master accepts on it
	UnusableSocket                       // connect failed otherwise: ssh says so and goes on
)

// ProbeControlPath does what ssh does with s's ControlPath before it
// multiplexes: a path too long for a socket is fatal; a socket (or file)
// that refuses connections is stale and removed where ssh may become
// master (ControlMaster other than no); any other failure is reported
// (note, an error() line the caller shows if s.Says("ERROR")) and ssh
// goes on without a master.
func ProbeControlPath(s *Settings) (ControlSocket, string, error) {
	path, controlMaster := s.ControlPath, s.ControlMaster
	if len(path) >= SunPathMax {
		return 0, "", failure(s.LogLevel, errors.New("ControlPath too long"), fatalLine(fmt.Sprintf("ControlPath too long ('%s' >= %d bytes)", path, SunPathMax)))
	}
	err := DialControl(path)
	switch {
	case err == nil:
		return ListeningMaster, "", nil
	case errors.Is(err, syscall.ENOENT):
		return NoControlSocket, "", nil
	case errors.Is(err, syscall.ECONNREFUSED):
		if controlMaster != "no" {
			_ = syscall.Unlink(path) // not a directory: unlink(2) as ssh's
		}
		return NoControlSocket, "", nil
	}
	return UnusableSocket, "Control socket connect(" + clip100(path) + "): " + strerror(err), nil
}

// DialControl connects to the control socket at path, as ssh's mux
// client does, and hangs up: nil if a master answers there.
func DialControl(path string) error {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

// ControlConnectError is what `ssh -O` says with fatal(), exit 255, when
// no master answered at path (DialControl's err): the path too long for
// a socket, or connect's error.
func ControlConnectError(path string, err error) string {
	if len(path) >= SunPathMax {
		return fmt.Sprintf("ControlPath too long ('%s' >= %d bytes)", path, SunPathMax)
	}
	return "Control socket connect(" + clip100(path) + "): " + strerror(err)
}

// clip100 is C's %.100s: at most 100 bytes.
func clip100(s string) string {
	if len(s) > 100 {
		return s[:100]
	}
	return s
}
