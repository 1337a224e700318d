package sshclient

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// quickAckConn acknowledges what it reads at once (TCP_QUICKACK after
// every read; Linux turns it off again by itself). sshd leaves Nagle's
// algorithm on for sessions without a terminal, so a packet it writes
// while an earlier one is unacknowledged waits for that ACK, which the
// receiver may delay by up to 40 ms: that stalled the first session of
// every connection by ~40 ms (sshd's channel confirmation, behind the
// host keys it sends once authentication succeeds).
type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

// withQuickAck wraps a TCP connection; anything else is returned as is.
func withQuickAck(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &quickAckConn{TCPConn: tc, raw: raw}
}

func (c *quickAckConn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	if n > 0 {
		_ = c.raw.Control(setQuickAck)
	}
	return n, err
}

func setQuickAck(fd uintptr) {
	_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
}
