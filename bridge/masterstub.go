package bridge

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"golang.org/x/sys/unix"
)

// masterStub is the process standing for one ControlPersist master: ssh's
// master is a process per ControlPath, whose pid `ssh -O check` names,
// which `kill` ends (that master only) and which is gone after `-O exit`.
// It is the C front in its stub mode (fakessh/front: ~100 KB, where a Go
// program would be a runtime per target), titled as ssh's ("ssh: PATH
// [mux]"), waiting on a socket to the daemon: the daemon's one descriptor
// per master. Killed, it ends its master (died); the daemon ending the
// master ends it (end).
type masterStub struct {
	pid  int
	sock *os.File
	done chan struct{} // closed once reaped and its death reported

	mu     sync.Mutex
	ended  bool // the daemon ended it: its death is no news
	reaped bool // waited for: the pid may be another's
}

// startMasterStub starts prog as the process of the master at
// controlPath. winch is called for each SIGWINCH the process gets (a mux
// client's, relayed), died once it has died of anything but end, with
// the signal that killed it (0 if none did).
func startMasterStub(prog, controlPath string, winch func(), died func(sig syscall.Signal)) (*masterStub, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("master process: socketpair: %w", err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("master process: %w", err)
	}
	// No pidfd (os.StartProcess keeps one): the socket is the one
	// descriptor a master costs the daemon.
	pid, err := syscall.ForkExec(prog, []string{"ssh: " + controlPath + " [mux]"}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{fakessh.MasterStubEnv + "=1"},
		Files: []uintptr{null.Fd(), null.Fd(), null.Fd(), uintptr(fds[1])},
		// A session of its own, as ssh's daemonised master: the
		// daemon's terminal and process group signals are not its.
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	null.Close()
	unix.Close(fds[1])
	if err != nil {
		unix.Close(fds[0])
		return nil, fmt.Errorf("master process %s: %w", prog, err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_, _ = syscall.Wait4(pid, nil, 0, nil)
		return nil, fmt.Errorf("master process: %w", err)
	}
	m := &masterStub{pid: pid, sock: os.NewFile(uintptr(fds[0]), "master-stub"), done: make(chan struct{})} // polled, not a thread
	go m.watch(winch, died)
	return m, nil
}

// watch reads the stub's socket until it dies, then reaps it.
func (m *masterStub) watch(winch func(), died func(sig syscall.Signal)) {
	defer close(m.done)
	var b [64]byte
	for {
		n, err := m.sock.Read(b[:])
		for range n {
			winch()
		}
		if err != nil {
			break
		}
	}
	m.sock.Close()
	var ws syscall.WaitStatus
	for {
		// Its socket closed as it exited: this waits at most for the
		// rest of its exit.
		_, err := syscall.Wait4(m.pid, &ws, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	m.mu.Lock()
	m.reaped = true
	ended := m.ended
	m.mu.Unlock()
	if ended {
		return
	}
	var sig syscall.Signal
	if ws.Signaled() {
		sig = ws.Signal()
	}
	died(sig)
}

// end ends the stub, as its master has ended (ControlPersist run out,
// `-O exit`, the connection lost, the last session after `-O stop`).
func (m *masterStub) end() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ended || m.reaped {
		m.ended = true
		return
	}
	m.ended = true
	// Not yet reaped: the pid is still the stub's.
	_ = syscall.Kill(m.pid, syscall.SIGKILL)
}

// caughtBySSH reports whether ssh's master catches sig (clientloop.c's
// signal_handler: it exits cleanly, removing its control socket) rather
// than dying of it with the socket left in place.
func caughtBySSH(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM:
		return true
	}
	return false
}
