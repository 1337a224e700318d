package sshclient

import (
	"net"
	"sync/atomic"
)

// WireCounter counts the bytes of a connection's transport stream (TCP,
// a ProxyCommand's pipes or a jump host's channel): what goes over the
// wire, encryption and SSH framing included.
type WireCounter struct {
	In, Out atomic.Int64
}

// Wrap returns c counting into w.
func (w *WireCounter) Wrap(c net.Conn) net.Conn {
	return &countingConn{Conn: c, w: w}
}

type countingConn struct {
	net.Conn
	w *WireCounter
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.w.In.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.w.Out.Add(int64(n))
	return n, err
}
