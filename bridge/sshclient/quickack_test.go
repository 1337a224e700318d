package sshclient

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// quickAck reads the socket's TCP_QUICKACK setting.
func quickAck(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	v := -1
	if err := raw.Control(func(fd uintptr) {
		v, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK)
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestQuickAck: a TCP transport acknowledges what it reads at once, so
// that sshd's Nagle-delayed packets are not held for a delayed ACK.
func TestQuickAck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().(*net.TCPAddr)
	tr, err := dialTCP(t.Context(), &Settings{HostName: "127.0.0.1", Port: addr.Port})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.conn.Close()
	qc, ok := tr.conn.(*quickAckConn)
	if !ok {
		t.Fatalf("transport is a %T, not a *quickAckConn", tr.conn)
	}
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// Linux leaves quick-ack mode by itself once the connection is in
	// interactive (ping-pong) mode; exchange a few turns to get there.
	buf := make([]byte, 16)
	for i := 0; i < 4; i++ {
		if _, err := srv.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := qc.TCPConn.Read(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := qc.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("TCP_QUICKACK before: %d", quickAck(t, qc.TCPConn))
	if _, err := srv.Write([]byte("z")); err != nil {
		t.Fatal(err)
	}
	if _, err := qc.Read(buf); err != nil {
		t.Fatal(err)
	}
	if v := quickAck(t, qc.TCPConn); v != 1 {
		t.Fatalf("TCP_QUICKACK after a read = %d, want 1", v)
	}
}
