package fakessh

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"golang.org/x/sys/unix"
)

// startProxy runs the daemon's ProxyCommand as ssh_proxy_connect does:
// a child of this process, in its session and process group, with its
// terminal, umask, limits, cwd and environment, stdin and stdout on
// pipes, stderr this process's or /dev/null. It neither waits for the
// child nor kills it: a ControlPersist connection's proxy outlives the
// ssh that started it. The daemon gets the pipes' other ends and the
// pidfd (wire.ProxyStarted); an exec that fails prints what ssh's child
// does and leaves the pipes closed at the far end, as its exit does.
func startProxy(conn net.Conn, wmu *sync.Mutex, payload []byte) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("proxy command over a %T", conn)
	}
	var m wire.ProxyMsg
	if err := json.Unmarshal(payload, &m); err != nil {
		return fmt.Errorf("proxy command request: %w", err)
	}
	var in, out [2]int // the proxy's stdin and stdout
	if err := unix.Pipe2(in[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("proxy pipes: %w", err)
	}
	if err := unix.Pipe2(out[:], unix.O_CLOEXEC); err != nil {
		closeFDs(in[:]...)
		return fmt.Errorf("proxy pipes: %w", err)
	}
	// The daemon's ends: it reads and writes them with deadlines.
	_ = unix.SetNonblock(out[0], true)
	_ = unix.SetNonblock(in[1], true)
	defer closeFDs(out[0], in[1])
	stdin, stdout := os.NewFile(uintptr(in[0]), "proxy stdin"), os.NewFile(uintptr(out[1]), "proxy stdout")
	stderr := os.Stderr
	if m.StderrNull {
		if stderr, _ = os.OpenFile(os.DevNull, os.O_RDWR, 0); stderr != nil {
			defer stderr.Close()
		}
	}
	pidfd := -1
	p, err := os.StartProcess(m.Shell, []string{m.Shell, "-c", m.Command}, &os.ProcAttr{
		Files: []*os.File{stdin, stdout, stderr},
		Sys:   &syscall.SysProcAttr{PidFD: &pidfd},
	})
	stdin.Close()
	stdout.Close()
	pid := 0
	if err != nil {
		pidfd = -1
		if !m.StderrNull {
			// perror(shell) in ssh's child, which then exits 1.
			fmt.Fprintf(os.Stderr, "%s: %s\n", m.Shell, errnoText(err))
		}
	} else {
		pid = p.Pid
		_ = p.Release() // never waited for: init reaps it once this process is gone
	}
	fds := []int{out[0], in[1]}
	if pidfd >= 0 {
		defer closeFDs(pidfd)
		fds = append(fds, pidfd)
	}
	wmu.Lock()
	defer wmu.Unlock()
	if err := wire.WriteFDs(uc, wire.ProxyStarted, binary.BigEndian.AppendUint32(nil, uint32(pid)), fds); err != nil {
		return fmt.Errorf("send the proxy to the daemon: %w", err)
	}
	return nil
}

func closeFDs(fds ...int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// errnoText is C's strerror for an exec error ("No such file or
// directory"): Go's text for the errno, with glibc's capital.
func errnoText(err error) string {
	var errno syscall.Errno
	s := err.Error()
	if errors.As(err, &errno) {
		s = errno.Error()
	}
	if s != "" {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}
