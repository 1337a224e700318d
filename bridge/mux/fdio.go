package mux

import (
	"errors"
	"io"
	"sync"

	"golang.org/x/sys/unix"
)

// errWoken is a wait cut short because the session ended.
var errWoken = errors.New("session ended")

// fdGuard is a session's hold on the descriptors its client passed: every
// use holds it shared, and the session ends by waking the waits and then
// taking it alone to close them, so that no use can reach a descriptor
// number after it is closed (and perhaps reused).
type fdGuard struct {
	mu     sync.RWMutex
	wakeFD int // an eventfd: stays readable once written
	once   sync.Once
	ended  bool
}

func newFDGuard() (*fdGuard, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &fdGuard{wakeFD: fd}, nil
}

// wake ends every wait on the descriptors, now and later.
func (g *fdGuard) wake() {
	g.once.Do(func() {
		var one = [8]byte{7: 1}
		_, _ = unix.Write(g.wakeFD, one[:])
	})
}

// close wakes the waits and, once they are over, closes fds.
func (g *fdGuard) close(fds []int) {
	g.wake()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended {
		return
	}
	g.ended = true
	closeAll(fds)
	unix.Close(g.wakeFD)
}

// errStopped is a wait on the client's stdin cut short by
// eow@openssh.com.
var errStopped = errors.New("input stopped")

// stopper ends the waits on one descriptor alone.
type stopper struct {
	fd   int // an eventfd: stays readable once written
	once sync.Once
}

func newStopper() (*stopper, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &stopper{fd: fd}, nil
}

func (s *stopper) stop() {
	s.once.Do(func() {
		var one = [8]byte{7: 1}
		_, _ = unix.Write(s.fd, one[:])
	})
}

// passedFD is a descriptor a client passed. Its flags are shared with the
// client's parent (a terminal, a shell's pipe) and are left alone: it is
// waited on with poll(2), which the guard can cut short.
type passedFD struct {
	fd   int
	g    *fdGuard
	stop *stopper // nil, or it ends this descriptor's waits (errStopped)
}

// wait polls for events on the descriptor, or the wake; g.mu is held
// shared.
func (p passedFD) wait(events int16) error {
	if p.g.ended {
		return errWoken
	}
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: events}, {Fd: int32(p.g.wakeFD), Events: unix.POLLIN}}
	if p.stop != nil {
		fds = append(fds, unix.PollFd{Fd: int32(p.stop.fd), Events: unix.POLLIN})
	}
	for {
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if fds[1].Revents != 0 {
			return errWoken
		}
		if len(fds) > 2 && fds[2].Revents != 0 {
			return errStopped
		}
		if fds[0].Revents != 0 {
			return nil
		}
	}
}

func (p passedFD) Read(b []byte) (int, error) {
	p.g.mu.RLock()
	defer p.g.mu.RUnlock()
	for {
		if err := p.wait(unix.POLLIN); err != nil {
			return 0, err
		}
		n, err := unix.Read(p.fd, b)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			continue
		case err == unix.EIO:
			// A terminal whose other side has gone: end of input.
			return 0, io.EOF
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Write writes b whole, a pipe buffer's worth at a time so that a
// blocking descriptor the poll found writable does not block.
func (p passedFD) Write(b []byte) (int, error) {
	p.g.mu.RLock()
	defer p.g.mu.RUnlock()
	done := 0
	for done < len(b) {
		if err := p.wait(unix.POLLOUT); err != nil {
			return done, err
		}
		chunk := b[done:]
		if len(chunk) > 4096 {
			chunk = chunk[:4096]
		}
		n, err := unix.Write(p.fd, chunk)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}
