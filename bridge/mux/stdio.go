package mux

import (
	"context"
	"errors"
	"io"
	"sync"

	"golang.org/x/crypto/ssh"
)

// stdioForward serves MUX_C_NEW_STDIO_FWD (`ssh -W host:port`): a
// direct-tcpip channel relayed on the client's stdin and stdout.
func (cl *client) stdioForward(ctx context.Context, rid uint32, p *packet) error {
	if _, err := p.str(); err != nil { // reserved
		return err
	}
	host, err := p.str()
	if err != nil {
		return err
	}
	port, err := p.u32()
	if err != nil {
		return err
	}
	fds, err := cl.passenger(rid, 2)
	if fds == nil {
		return err
	}
	// channel_connect_stdio_fwd: the originator is "stdio-forward", port 0.
	payload := ssh.Marshal(struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}{host, port, "stdio-forward", 0})
	ch, reqs, release, err := cl.m.OpenChannel(ctx, "direct-tcpip", payload)
	if err != nil {
		closeAll(fds)
		cl.log.WithError(err).Info("mux stdio forward: channel open failed")
		if errors.Is(err, ErrMasterGone) {
			return err
		}
		return cl.fail(rid, "Session open refused by peer")
	}
	closed := make(chan struct{})
	go func() {
		ssh.DiscardRequests(reqs)
		close(closed)
	}()
	s, err := cl.startSession(ch, release, fds, false)
	if err != nil {
		return err
	}
	go func() {
		defer release()
		defer s.finish()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := io.Copy(s.ch, s.in); err != errWoken {
				_ = s.ch.CloseWrite()
			}
		}()
		_, _ = io.Copy(s.out, s.ch)
		<-closed // the other way may still be open
		s.g.wake()
		wg.Wait()
	}()
	return cl.reply(builder(nil).u32(msgSessionOpened).u32(rid).u32(s.id))
}
