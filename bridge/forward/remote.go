package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/ssh"
)

// remoteFwd is a -R forward: what was asked of the server and, once it
// answered, what it allocated.
type remoteFwd struct {
	spec     Spec
	bindHost string        // channel_rfwd_bind_host(listen host), as sent
	done     chan struct{} // closed when the server has answered
	// Set under Set.mu before done closes.
	established bool
	allocated   int
	err         error
}

// listenPort is the port the server listens on, as forwarded-tcpip names it.
func (f *remoteFwd) listenPort() int {
	if f.spec.ListenPort == 0 {
		return f.allocated
	}
	return f.spec.ListenPort
}

// rfwdBindHost is channel_rfwd_bind_host.
func rfwdBindHost(listenHost string) string {
	switch listenHost {
	case "":
		return "localhost"
	case "*":
		return ""
	}
	return listenHost
}

func remoteFailure(spec Spec, err error) *Error {
	if spec.ListenPort == PortIsPath {
		return &Error{Reason: "remote port forwarding failed for listen path " + spec.ListenHost, Err: err}
	}
	return &Error{Reason: fmt.Sprintf("remote port forwarding failed for listen port %d", spec.ListenPort), Err: err}
}

func (s *Set) openRemote(ctx context.Context, spec Spec, log logrus.FieldLogger) (int, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return 0, remoteFailure(spec, fmt.Errorf("%w: %w", ErrConnectionLost, net.ErrClosed))
		}
		f := s.findRemote(spec)
		if f == nil {
			break // with s.mu held
		}
		s.mu.Unlock()
		// OpenSSH would answer a duplicate at once even while the first
		// request is unanswered (with port 0 if allocated); waiting gives
		// the real answer.
		select {
		case <-f.done:
		case <-ctx.Done():
			return 0, fmt.Errorf("forward: waiting for %s: %w", s.describe(spec), ctx.Err())
		}
		if f.err == nil {
			log.Debug("mux_master_process_open_fwd: found existing forwarding")
			return allocatedFor(f), nil
		}
		// It failed and is gone: ask again, as OpenSSH would.
	}
	if err := s.claimLocked(); err != nil {
		s.mu.Unlock()
		log.Error(err)
		return 0, remoteFailure(spec, err)
	}
	f := &remoteFwd{spec: spec, bindHost: rfwdBindHost(spec.ListenHost), done: make(chan struct{})}
	s.remote = append(s.remote, f)
	// The request carries on if ctx ends: the forward outlives its client.
	s.wg.Go(func() { s.request(f, log) })
	s.mu.Unlock()

	select {
	case <-f.done:
	case <-ctx.Done():
		return 0, fmt.Errorf("forward: waiting for %s: %w", s.describe(spec), ctx.Err())
	}
	if f.err != nil {
		return 0, f.err
	}
	return allocatedFor(f), nil
}

func allocatedFor(f *remoteFwd) int {
	if f.spec.ListenPort == 0 {
		return f.allocated
	}
	return 0
}

func (s *Set) findRemote(spec Spec) *remoteFwd {
	for _, f := range s.remote {
		if f.spec.same(spec) {
			return f
		}
	}
	return nil
}

// request is channel_request_remote_forwarding and
// mux_confirm_remote_forward.
func (s *Set) request(f *remoteFwd, log logrus.FieldLogger) {
	var (
		ok   bool
		resp []byte
		err  error
	)
	if f.spec.ListenPort == PortIsPath {
		ok, _, err = s.client.SendRequest("streamlocal-forward@openssh.com", true,
			ssh.Marshal(&struct{ Path string }{f.spec.ListenHost}))
	} else {
		ok, resp, err = s.client.SendRequest("tcpip-forward", true,
			ssh.Marshal(&struct {
				Host string
				Port uint32
			}{f.bindHost, uint32(f.spec.ListenPort)}))
	}
	allocated := 0
	switch {
	case err != nil:
		err = fmt.Errorf("forward: %s: %w: %w", s.describe(f.spec), ErrConnectionLost, err)
	case !ok:
		err = errors.New("refused by the server")
	case f.spec.ListenPort == 0:
		var p struct{ Port uint32 }
		if uerr := ssh.Unmarshal(resp, &p); uerr != nil || p.Port > 65535 || p.Port == 0 {
			// OpenSSH's master exits here ("Invalid allocated port").
			err = fmt.Errorf("invalid allocated port in reply %x", resp)
		}
		allocated = int(p.Port)
	}

	s.mu.Lock()
	closed := s.closed
	if err != nil {
		f.err = remoteFailure(f.spec, err)
		for i, g := range s.remote {
			if g == f {
				s.remote = append(s.remote[:i:i], s.remote[i+1:]...)
				break
			}
		}
	} else {
		f.established, f.allocated = true, allocated
	}
	close(f.done)
	s.mu.Unlock()

	if err != nil {
		log.Errorf("mux_confirm_remote_forward: %s", f.err)
		return
	}
	if allocated != 0 {
		log.Debugf("Allocated port %d for mux remote forward to %s:%d", allocated, f.spec.ConnectHost, f.spec.ConnectPort)
	}
	if closed { // Close ran meanwhile and left this one to us
		s.sendCancel(f)
	}
}

func (s *Set) cancelRemote(ctx context.Context, spec Spec) error {
	for {
		s.mu.Lock()
		f := s.findRemote(spec)
		if f == nil {
			s.mu.Unlock()
			return &Error{Reason: reasonNotForwarded}
		}
		if f.established {
			for i, g := range s.remote {
				if g == f {
					s.remote = append(s.remote[:i:i], s.remote[i+1:]...)
					break
				}
			}
			s.mu.Unlock()
			s.sendCancel(f)
			return nil
		}
		s.mu.Unlock()
		// OpenSSH would cancel before the answer and then fail the
		// pending open with "unknown forwarding id"; let it finish.
		select {
		case <-f.done:
		case <-ctx.Done():
			return fmt.Errorf("forward: waiting for %s: %w", s.describe(spec), ctx.Err())
		}
	}
}

// sendCancel is channel_request_rforward_cancel: no reply is asked for.
func (s *Set) sendCancel(f *remoteFwd) {
	var err error
	if f.spec.ListenPort == PortIsPath {
		_, _, err = s.client.SendRequest("cancel-streamlocal-forward@openssh.com", false,
			ssh.Marshal(&struct{ Path string }{f.spec.ListenHost}))
	} else {
		_, _, err = s.client.SendRequest("cancel-tcpip-forward", false,
			ssh.Marshal(&struct {
				Host string
				Port uint32
			}{f.bindHost, uint32(f.listenPort())}))
	}
	if err != nil {
		s.log.WithField("forward", s.describe(f.spec)).Debugf("send cancel: %v", err)
	}
}

// claimLocked takes the forwarded-tcpip and forwarded-streamlocal channel
// types from x/crypto's client. Its own forwarding (Client.Listen) would
// accept a channel before connecting, match on what it parsed, refuse
// originators that are not IP addresses and ask for replies to cancels,
// where OpenSSH connects first, matches the bind host as sent and
// cancels without a reply; and it knows no remote dynamic forwards.
func (s *Set) claimLocked() error {
	if s.claimed {
		return nil
	}
	tcp := s.client.HandleChannelOpen("forwarded-tcpip")
	unix := s.client.HandleChannelOpen("forwarded-streamlocal@openssh.com")
	if tcp == nil || unix == nil {
		return errors.New("forwarded-tcpip channels are already taken on this connection (ssh.Client.Listen used?)")
	}
	s.claimed = true
	go s.dispatch(tcp)
	go s.dispatch(unix)
	return nil
}

// dispatch is client_input_channel_open for forwarded channels; it runs
// until the connection ends.
func (s *Set) dispatch(in <-chan ssh.NewChannel) {
	for nc := range in {
		target, ok := s.match(nc)
		if !ok || !s.spawn(func() { s.serveForwarded(nc, target) }) {
			nc.Reject(ssh.Prohibited, "open failed")
		}
	}
}

// match is channel_connect_by_listen_address and _path: which forward
// the server's channel is for, and where it goes.
func (s *Set) match(nc ssh.NewChannel) (Spec, bool) {
	var (
		tcp   bool
		host  string
		port  uint32
		where string
	)
	if nc.ChannelType() == "forwarded-tcpip" {
		var p struct {
			Addr     string
			Port     uint32
			OrigAddr string
			OrigPort uint32
		}
		if err := ssh.Unmarshal(nc.ExtraData(), &p); err != nil || p.Port > 0xffff || p.OrigPort > 0xffff {
			s.log.Errorf("client_request_forwarded_tcpip: bad request %x", nc.ExtraData())
			return Spec{}, false
		}
		tcp, host, port = true, p.Addr, p.Port
		where = "listen_port " + strconv.Itoa(int(p.Port))
	} else {
		var p struct{ Path, Reserved string }
		if err := ssh.Unmarshal(nc.ExtraData(), &p); err != nil {
			s.log.Errorf("client_request_forwarded_streamlocal: bad request %x", nc.ExtraData())
			return Spec{}, false
		}
		host, where = p.Path, "path "+p.Path
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.remote {
		if tcp && f.spec.ListenPort != PortIsPath && f.bindHost == host && f.listenPort() == int(port) {
			return f.spec, true
		}
		if !tcp && f.spec.ListenPort == PortIsPath && f.spec.ListenHost == host {
			return f.spec, true
		}
	}
	if !s.closed {
		s.log.Errorf("WARNING: Server requests forwarding for unknown %s", where)
	}
	return Spec{}, false
}

// serveForwarded connects a forwarded channel to its target (or, for a
// remote dynamic forward, to where its SOCKS request says) and relays.
func (s *Set) serveForwarded(nc ssh.NewChannel, spec Spec) {
	log := s.log.WithField("forward", s.describe(spec))
	if spec.ConnectPort == 0 {
		s.serveRemoteDynamic(nc, log)
		return
	}
	conn, cf := connectTo(s.ctx, spec.ConnectHost, spec.ConnectPort)
	if cf != nil {
		s.connectFailed(cf, log)
		nc.Reject(cf.rejection())
		return
	}
	if !s.track(conn) {
		nc.Reject(ssh.Prohibited, "open failed")
		return
	}
	defer s.untrack(conn)
	ch, reqs, err := nc.Accept()
	if err != nil {
		conn.Close()
		return
	}
	s.relay(conn, ch, reqs, nil, nil)
}

// serveRemoteDynamic is rdynamic: the channel is confirmed first so the
// SOCKS request can arrive over it; a failed connect closes it without a
// reply.
func (s *Set) serveRemoteDynamic(nc ssh.NewChannel, log logrus.FieldLogger) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	if !s.track(ch) {
		go ssh.DiscardRequests(reqs)
		return
	}
	req, err := readSOCKS(ch, ch)
	var conn net.Conn
	if err == nil {
		var cf *connectFailure
		if conn, cf = connectTo(s.ctx, req.host, int(req.port)); cf != nil {
			s.connectFailed(cf, log)
			err = cf
		}
	}
	if err == nil && !s.track(conn) {
		err = net.ErrClosed
	}
	s.untrack(ch)
	if err != nil {
		log.Debugf("rdynamic: %v", err)
		ch.Close()
		ssh.DiscardRequests(reqs)
		return
	}
	defer s.untrack(conn)
	s.relay(conn, ch, reqs, req.rest, req.reply)
}

// connectFailed says what ssh's master says of a forwarded channel's
// target it could not connect: in the log, and on the stderr of a master
// in the foreground (Options.Say).
func (s *Set) connectFailed(cf *connectFailure, log logrus.FieldLogger) {
	msg := cf.message()
	log.WithError(cf.err).Errorf("connect_to %s port %d: failed", cf.host, cf.port)
	if msg != "" && s.opts.Say != nil {
		s.opts.Say(msg)
	}
}
