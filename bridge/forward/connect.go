package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// connectFailure is a forwarded channel's target that could not be
// connected. AtOnce: every address failed in connect(2) itself, none
// getting as far as EINPROGRESS (or the name did not resolve): OpenSSH's
// connect_to then fails before any channel exists, and says and refuses
// otherwise than for a failure learnt later from the network.
type connectFailure struct {
	host   string
	port   int
	atOnce bool
	err    error
}

func (e *connectFailure) Error() string { return e.err.Error() }
func (e *connectFailure) Unwrap() error { return e.err }

// message is the line ssh's master logs at ERROR for the failure
// (channels.c connect_to_helper, channel_post_connecting), "" for an
// unknown host: its words are getaddrinfo's, which Go's resolver does
// not give (docs/limits.md).
func (e *connectFailure) message() string {
	var dns *net.DNSError
	if errors.As(e.err, &dns) {
		return ""
	}
	if !e.atOnce {
		return fmt.Sprintf("connect_to %.100s port %d: failed.", e.host, e.port)
	}
	return fmt.Sprintf("connect to %.100s port %d failed: %s", e.host, e.port, strerror(e.err))
}

// rejection is how OpenSSH refuses a forwarded channel it could not
// connect: a failure before any connect was in progress (connect_to
// returns no channel) gives "administratively prohibited: open failed";
// one learnt later from the network, "connect failed" with strerror.
func (e *connectFailure) rejection() (ssh.RejectionReason, string) {
	var errno syscall.Errno
	if e.atOnce || !errors.As(e.err, &errno) {
		return ssh.Prohibited, "open failed"
	}
	return ssh.ConnectionFailed, strerror(errno)
}

// strerror is glibc's text for err's errno: Go's, capitalised.
func strerror(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err.Error()
	}
	msg := errno.Error()
	return strings.ToUpper(msg[:1]) + msg[1:]
}

// connectTo connects to host and port (a unix socket for PortIsPath) as
// channels.c's connect_to does: each address of host in turn, with a
// non-blocking connect(2), the next tried when one fails. Failing, it
// returns a *connectFailure.
func connectTo(ctx context.Context, host string, port int) (net.Conn, *connectFailure) {
	fail := &connectFailure{host: host, port: port, atOnce: true}
	if port == PortIsPath {
		c, _, err := connectOne(ctx, unix.AF_UNIX, &unix.SockaddrUnix{Name: host}, &net.UnixAddr{Name: host, Net: "unix"})
		if err != nil {
			fail.err = err
			return nil, fail
		}
		return c, nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err == nil && len(ips) == 0 {
		err = &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if err != nil {
		fail.err = err
		return nil, fail
	}
	for _, ip := range ips {
		ip = ip.Unmap()
		addr := &net.TCPAddr{IP: ip.AsSlice(), Zone: ip.Zone(), Port: port}
		var sa unix.Sockaddr
		family := unix.AF_INET
		if ip.Is4() {
			sa = &unix.SockaddrInet4{Addr: ip.As4(), Port: port}
		} else {
			family = unix.AF_INET6
			zone, _ := strconv.Atoi(ip.Zone())
			if ifi, err := net.InterfaceByName(ip.Zone()); err == nil {
				zone = ifi.Index
			}
			sa = &unix.SockaddrInet6{Addr: ip.As16(), Port: port, ZoneId: uint32(zone)}
		}
		c, inProgress, err := connectOne(ctx, family, sa, addr)
		if err == nil {
			return c, nil
		}
		fail.err = err
		if inProgress {
			fail.atOnce = false
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fail
}

// connectOne connects a new socket of family to sa without blocking in
// connect(2), waiting for it to complete if in progress; inProgress
// tells that it was.
func connectOne(ctx context.Context, family int, sa unix.Sockaddr, addr net.Addr) (c net.Conn, inProgress bool, err error) {
	opErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: addr.Network(), Addr: addr, Err: err}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, false, opErr(os.NewSyscallError("socket", err))
	}
	err = unix.Connect(fd, sa)
	if err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		return nil, false, opErr(os.NewSyscallError("connect", err))
	}
	inProgress = err == unix.EINPROGRESS
	f := os.NewFile(uintptr(fd), "forward") // non-blocking: in Go's poller
	defer f.Close()
	if inProgress {
		if err := waitConnected(ctx, f); err != nil {
			return nil, true, opErr(err)
		}
	}
	c, err = net.FileConn(f)
	if err != nil {
		return nil, inProgress, opErr(err)
	}
	return c, inProgress, nil
}

// waitConnected waits for f's connect in progress to end, and returns
// its SO_ERROR.
func waitConnected(ctx context.Context, f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	var soErr int
	var gerr error
	// Checked before each wait, not only after one: RawWrite forgets a
	// readiness the poller saw before it began.
	err = rc.Write(func(fd uintptr) bool {
		soErr, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case gerr != nil:
			return true
		case soErr == int(unix.EINPROGRESS), soErr == int(unix.EALREADY), soErr == int(unix.EINTR):
			return false
		case soErr == 0:
			// Connected, or still in progress (ENOTCONN).
			_, perr := unix.Getpeername(int(fd))
			return perr == nil
		}
		return true
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return err
	case gerr != nil:
		return os.NewSyscallError("getsockopt", gerr)
	case soErr != 0:
		return os.NewSyscallError("connect", syscall.Errno(soErr))
	}
	return nil
}
