package sshclient

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net"
	"syscall"
	"time"
)

// sunPathMax is the size of a unix socket address's path (sun_path).
const sunPathMax = 108

// ControlSocket is what ssh finds at a ControlPath before it
// multiplexes (mux.c's muxclient, for ControlMaster auto and no).
type ControlSocket int

const (
	NoControlSocket ControlSocket = iota // nothing there, or a stale socket ssh removed
	ListeningMaster                      // a master accepts on it
	UnusableSocket                       // connect failed otherwise: ssh says so and goes on
)

// ProbeControlPath does what ssh does with path before it multiplexes:
// a path too long for a socket is fatal; a socket (or file) that refuses
// connections is stale and removed where ssh may become master
// (ControlMaster other than no); any other failure is reported (note)
// and ssh goes on without a master.
func ProbeControlPath(path, controlMaster string) (ControlSocket, string, error) {
	if len(path) >= sunPathMax {
		return 0, "", &ConnError{Msg: fmt.Sprintf("ControlPath too long ('%s' >= %d bytes)", path, sunPathMax), Err: errors.New("ControlPath too long")}
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

// ControlConnectError is what `ssh -O` says, exit 255, when no master
// answered at path (DialControl's err): the path too long for a socket,
// or connect's error.
func ControlConnectError(path string, err error) string {
	if len(path) >= sunPathMax {
		return fmt.Sprintf("ControlPath too long ('%s' >= %d bytes)", path, sunPathMax)
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

// CheckMuxListen does what ssh's new master does with its ControlPath
// once logged in (mux.c's muxserver_listen): it listens on a temporary
// name beside it, and fails as ssh does where it cannot (exit 255 after
// the message). The socket is removed again: the daemon's master lives
// in the daemon.
func CheckMuxListen(path string) error {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	suffix := make([]byte, 16)
	for i := range suffix {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(letters))))
		if err != nil {
			return err
		}
		suffix[i] = letters[n.Int64()]
	}
	tmp := path + "." + string(suffix)
	if len(tmp) >= sunPathMax {
		return &ConnError{Msg: fmt.Sprintf("unix_listener: path \"%s\" too long for Unix domain socket", tmp), Err: errors.New("ControlPath too long")}
	}
	l, err := net.Listen("unix", tmp)
	if err != nil {
		return &ConnError{Msg: fmt.Sprintf("unix_listener: cannot bind to path %s: %s", tmp, strerror(err)), Err: err}
	}
	return l.Close() // and unlinks tmp
}
