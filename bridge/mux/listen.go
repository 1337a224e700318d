package mux

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
)

// ExistsError is muxserver_listen's "ControlSocket %s already exists,
// disabling multiplexing": ssh goes on without a master socket.
type ExistsError struct{ Path string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("ControlSocket %s already exists, disabling multiplexing", e.Path)
}

// FatalError is a failure ssh exits on (255) after saying Msg, with
// fatal(), or with error() when Logged (unix_listener logs its own
// failure, and ssh exits without a word more).
type FatalError struct {
	Msg    string
	Err    error
	Logged bool
}

func (e *FatalError) Error() string { return e.Msg }
func (e *FatalError) Unwrap() error { return e.Err }

// Listener is a master's control socket.
type Listener struct {
	path string
	ln   *net.UnixListener
	dev  uint64
	ino  uint64

	// pid is the master's process, which `ssh -O check` names and a
	// client sends SIGWINCH to; 0 for the daemon's own.
	pid atomic.Int32

	mu       sync.Mutex
	closed   bool
	ids      map[uint32]bool // channel numbers in use
	sessions map[*session]bool
}

// SetPID makes pid the master's process that clients are told of.
func (l *Listener) SetPID(pid int) { l.pid.Store(int32(pid)) }

// PID is the master's process: the one SetPID gave, or the daemon's.
func (l *Listener) PID() int {
	if l == nil {
		return os.Getpid()
	}
	if pid := l.pid.Load(); pid > 0 {
		return int(pid)
	}
	return os.Getpid()
}

// Listen puts a control socket at path as ssh's new master does: bound
// under a temporary name beside it with mode 0600, then hard-linked into
// place, so that a client never finds a socket that does not accept yet
// and two masters racing for one path cannot both win.
func Listen(path string) (*Listener, error) {
	tmp, err := tempName(path)
	if err != nil {
		return nil, err
	}
	if len(tmp) >= sshclient.SunPathMax {
		return nil, &FatalError{Msg: fmt.Sprintf("unix_listener: path \"%s\" too long for Unix domain socket", tmp), Err: syscall.ENAMETOOLONG, Logged: true}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) && (errno == syscall.EINVAL || errno == syscall.EADDRINUSE) {
			return nil, &ExistsError{Path: tmp}
		}
		return nil, &FatalError{Msg: fmt.Sprintf("unix_listener: cannot bind to path %s: %s", tmp, sshclient.Strerror(err)), Err: err, Logged: true}
	}
	// The name is about to go: closing must not unlink what may by then
	// be someone else's.
	ln.SetUnlinkOnClose(false)
	// ssh binds under umask 0177; the umask is the whole process's here.
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		_ = os.Remove(tmp)
		return nil, &FatalError{Msg: fmt.Sprintf("unix_listener: cannot bind to path %s: %s", tmp, sshclient.Strerror(err)), Err: err, Logged: true}
	}
	if err := os.Link(tmp, path); err != nil {
		_ = os.Remove(tmp)
		ln.Close()
		if errors.Is(err, syscall.EEXIST) {
			return nil, &ExistsError{Path: path}
		}
		return nil, &FatalError{Msg: fmt.Sprintf("link mux listener %s => %s: %s", tmp, path, sshclient.Strerror(err)), Err: err}
	}
	_ = os.Remove(tmp)
	l := &Listener{path: path, ln: ln, ids: map[uint32]bool{}, sessions: map[*session]bool{}}
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err == nil {
		l.dev, l.ino = st.Dev, st.Ino
	}
	return l, nil
}

// tempName is path with ssh's random 16-letter suffix.
func tempName(path string) (string, error) {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	suffix := make([]byte, 16)
	for i := range suffix {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(letters))))
		if err != nil {
			return "", fmt.Errorf("random socket name: %w", err)
		}
		suffix[i] = letters[n.Int64()]
	}
	return path + "." + string(suffix), nil
}

// At reports whether the socket at path is still this listener's.
func (l *Listener) At(path string) bool {
	if l == nil || path != l.path {
		return false
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	return !closed && l.inPlace()
}

// inPlace reports whether the file at the listener's path is its socket,
// not one put there since.
func (l *Listener) inPlace() bool {
	var st syscall.Stat_t
	return syscall.Lstat(l.path, &st) == nil && st.Dev == l.dev && st.Ino == l.ino
}

// Close stops listening and removes the socket, if it is still this
// listener's, as a master does on `-O stop` and on exit. Sessions already
// open go on.
func (l *Listener) Close() { l.close(true) }

// Abandon stops listening and leaves the socket file where it is, as a
// master killed by a signal it does not catch (SIGKILL) leaves it: a
// client then finds it refusing.
func (l *Listener) Abandon() { l.close(false) }

func (l *Listener) close(unlink bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.mu.Unlock()
	if unlink && l.inPlace() {
		_ = os.Remove(l.path)
	}
	_ = l.ln.Close()
}
