package forward

import (
	"io"
	"net"
	"time"

	"golang.org/x/crypto/ssh"
)

// relay copies between conn and ch until both directions end, with
// half-close as OpenSSH's channels do it: EOF from conn is sent as channel
// EOF, channel EOF shuts down conn's write side, the channel is closed
// once both are done, and a peer that closes the channel first stops the
// reading of conn. toConn goes to conn ahead of the channel's data (a
// SOCKS reply), toCh to ch ahead of conn's (what a SOCKS client sent after
// its request).
func (s *Set) relay(conn net.Conn, ch ssh.Channel, reqs <-chan *ssh.Request, toConn, toCh []byte) {
	// x/crypto closes reqs once the channel is closed: by the peer, by
	// our Close being answered, or with the connection.
	peerClosed := make(chan struct{})
	go func() {
		ssh.DiscardRequests(reqs)
		close(peerClosed)
	}()
	if !s.track(ch) {
		return
	}
	defer s.untrack(ch)
	if s.opts.Busy != nil {
		s.opts.Busy(1)
		defer s.opts.Busy(-1)
	}

	down := make(chan struct{})
	go func() {
		defer close(down)
		if _, err := conn.Write(toConn); err == nil {
			io.Copy(conn, ch)
		}
		closeWrite(conn)
	}()
	upDone := make(chan struct{})
	go func() {
		select {
		case <-peerClosed:
			// chan_rcvd_oclose: stop reading; a deadline leaves the
			// write side to finish delivering what arrived.
			conn.SetReadDeadline(time.Unix(1, 0))
		case <-upDone:
		}
	}()
	if _, err := ch.Write(toCh); err == nil {
		io.Copy(ch, conn)
	}
	close(upDone)
	ch.CloseWrite()
	<-down
	ch.Close()
	conn.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}
