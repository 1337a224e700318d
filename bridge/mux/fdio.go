package mux

import (
	"errors"
	"io"
	"sync"

	"golang.org/x/sys/unix"
)

// errWoken is a wait cut short because the session ended.
var errWoken = errors.New("session ended")

// waker ends every wait on a session's descriptors at once: an eventfd
// that stays readable once written.
type waker struct {
	fd   int
	once sync.Once
}

func newWaker() (*waker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &waker{fd: fd}, nil
}

func (w *waker) wake() {
	w.once.Do(func() {
		var one = [8]byte{7: 1}
		_, _ = unix.Write(w.fd, one[:])
	})
}

// passedFD is a descriptor a client passed. Its flags are shared with the
// client's parent (a terminal, a shell's pipe) and are left alone: it is
// waited on with poll(2), which the waker can cut short.
type passedFD struct {
	fd int
	w  *waker
}

// wait polls for events on the descriptor, or the waker.
func (p passedFD) wait(events int16) error {
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: events}, {Fd: int32(p.w.fd), Events: unix.POLLIN}}
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
		if fds[0].Revents != 0 {
			return nil
		}
	}
}

func (p passedFD) Read(b []byte) (int, error) {
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
