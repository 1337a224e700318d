package bridge

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

// ErrRunning means another daemon already serves the socket.
var ErrRunning = errors.New("a bridge daemon is already running")

// Listen prepares the socket directory (0700, ours), takes the socket's lock
// for the life of the process, removes a stale socket and listens with
// mode 0600. The returned listener releases the lock when closed.
func Listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := wire.EnsurePrivateDir(dir); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(wire.SideFile(path, "daemon.lock"), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open daemon lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrRunning
		}
		return nil, fmt.Errorf("lock daemon: %w", err)
	}
	// Holding the lock, any socket file left here is stale: its daemon died.
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		lock.Close()
		return nil, ErrRunning
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		lock.Close()
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		lock.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	return &lockedListener{Listener: ln, lock: lock}, nil
}

type lockedListener struct {
	net.Listener
	lock *os.File
}

func (l *lockedListener) Close() error {
	err := l.Listener.Close()
	l.lock.Close()
	return err
}
