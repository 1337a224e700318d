package main

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"golang.org/x/sys/unix"
)

// checkSocketUsable fails where no shim could reach a daemon whatever
// the directory's owner and mode: a relative ANSIBLE_BRIDGE_SOCKET, or a
// socket directory that does not exist and cannot be made (a read-only
// /tmp in a container). Every shim would fall back to the real binary,
// or fail in strict mode.
func checkSocketUsable(env doctorEnv) check {
	c := check{name: "socket path"}
	if err := wire.CheckSocketPath(env.socket); err != nil {
		c.detail = err.Error() + ": every shim fails"
		c.fix = "set " + wire.SocketEnv + " to an absolute path"
		return c
	}
	dir := filepath.Dir(env.socket)
	// The deepest existing ancestor: the shim makes the rest there.
	have := dir
	fi, err := os.Lstat(have)
	for err != nil && filepath.Dir(have) != have {
		have = filepath.Dir(have)
		fi, err = os.Lstat(have)
	}
	if have != dir && err == nil {
		if !fi.IsDir() {
			err = errors.New("not a directory")
		} else {
			err = unix.Access(have, unix.W_OK|unix.X_OK)
		}
		if err != nil {
			c.detail = "cannot create " + dir + " in " + have + ": " + err.Error() + "; every shim runs the real binary (" + fakessh.RequireEnv + "=1: fails)"
			c.fix = "set " + wire.SocketEnv + " to a path in a writable directory (in a container: under /runner or a tmpfs), or XDG_RUNTIME_DIR"
			return c
		}
	}
	c.ok, c.detail = true, env.socket
	return c
}
