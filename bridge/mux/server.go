package mux

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/ssh"
)

// Master is the connection a Listener shares with its clients.
type Master interface {
	// OpenChannel opens a channel on the master's connection; done ends
	// its use (a master with ControlPersist counts it as a session).
	OpenChannel(ctx context.Context, kind string, payload []byte) (ch ssh.Channel, reqs <-chan *ssh.Request, done func(), err error)
	// SendEnv is the master's own SendEnv: a client's variables must
	// pass it as well.
	SendEnv() []string
	// PTYRefusal is how the master answers a pty-req sshd refuses
	// (clientloop.c client_status_confirm): closes, when it asked for a
	// terminal itself (-t, -tt), ends the session; quiet, when it logs
	// below ERROR, keeps the refusal from the client's stderr.
	PTYRefusal() (closes, quiet bool)
	// Forward opens a port forwarding (or, with cancel, closes one), as
	// the master process owns them; allocated is the port a server chose
	// for a remote forward asked for port 0. err's text is the reason
	// the client is told.
	Forward(ctx context.Context, cancel bool, f Forward) (allocated int, err error)
	// Terminate ends the master at once (`ssh -O exit`).
	Terminate()
	// StopListening is `ssh -O stop`: the socket is gone already; the
	// master ends once its sessions have.
	StopListening()
	// Busy counts a client's control connection in (+1) and out (-1):
	// ssh's master counts it as an open channel, so ControlPersist
	// counts from the last one's end.
	Busy(delta int)
}

// Forward is a forwarding a client asks for (MUX_C_OPEN_FWD).
type Forward struct {
	Kind        uint32 // 1 local, 2 remote, 3 dynamic
	ListenHost  string
	ListenPort  int // PortIsPath: ListenHost is a unix socket path
	ConnectHost string
	ConnectPort int // PortIsPath: ConnectHost is a unix socket path
}

// PortIsPath marks a port whose host is a unix socket path.
const PortIsPath = -2

// ErrMasterGone is what a Master's OpenChannel or Forward returns (wraps)
// when its connection ended under the request: ssh's master exits then
// with the request unanswered, and the client, dropped without a reply,
// says "read from master failed".
var ErrMasterGone = errors.New("the master's connection ended")

// Serve answers clients until the listener is closed; ctx is given to
// what they ask of m.
func (l *Listener) Serve(ctx context.Context, m Master, log logrus.FieldLogger) {
	for {
		c, err := l.ln.AcceptUnix()
		if err != nil {
			l.mu.Lock()
			closed := l.closed
			l.mu.Unlock()
			if !closed {
				log.WithError(err).Warn("control socket: accept failed; no more mux clients")
			}
			return
		}
		go l.serveClient(ctx, c, m, log)
	}
}

// serveClient is one mux client's control connection (mux_master_read_cb).
func (l *Listener) serveClient(ctx context.Context, c *net.UnixConn, m Master, log logrus.FieldLogger) {
	defer c.Close()
	// The master's mux-control channel, from accept to the client's end.
	ctl := l.takeID()
	defer l.freeID(ctl)
	if err := checkPeer(c); err != nil {
		log.WithError(err).Error("control socket: client refused")
		return
	}
	m.Busy(1)
	defer m.Busy(-1)
	if err := writePacket(c, builder(nil).u32(msgHello).u32(protocolVersion)); err != nil {
		return
	}
	p, err := readPacket(c)
	if err != nil {
		return
	}
	if typ, err := p.u32(); err != nil || typ != msgHello {
		log.Errorf("mux_master_read_cb: expected MUX_MSG_HELLO(0x%08x), received 0x%08x", msgHello, typ)
		return
	}
	if ver, err := p.u32(); err != nil || ver != protocolVersion {
		log.Errorf("mux_master_process_hello: unsupported multiplexing protocol version %d (expected %d)", ver, protocolVersion)
		return
	}
	cl := &client{l: l, c: c, m: m, log: log}
	for {
		p, err := readPacket(c)
		if err != nil {
			cl.gone()
			return
		}
		typ, err1 := p.u32()
		rid, err2 := p.u32()
		if err1 != nil || err2 != nil {
			cl.gone()
			return
		}
		if err := cl.handle(ctx, typ, rid, p); err != nil {
			log.WithError(err).Debug("mux client dropped")
			cl.gone()
			return
		}
	}
}

// checkPeer refuses a client of another uid, root excepted, as mux.c does.
func checkPeer(c *net.UnixConn) error {
	peer, err := wire.PeerUID(c)
	if err != nil {
		return fmt.Errorf("getpeereid: %w", err)
	}
	if uid := os.Getuid(); peer != 0 && peer != uid {
		return fmt.Errorf("multiplex uid mismatch: peer euid %d != uid %d", peer, uid)
	}
	return nil
}

// client is one control connection; it carries at most one session.
type client struct {
	l   *Listener
	c   *net.UnixConn
	m   Master
	log logrus.FieldLogger
	s   *session
}

// gone is the client's end: its session's channel closes, as the
// master's control cleanup does.
func (cl *client) gone() {
	if cl.s != nil {
		cl.s.abandon()
		<-cl.s.done
	}
}

func (cl *client) reply(b builder) error { return writePacket(cl.c, b) }

func (cl *client) fail(rid uint32, reason string) error {
	return cl.reply(builder(nil).u32(msgFailure).u32(rid).str(reason))
}

// handle answers one request; an error drops the client.
func (cl *client) handle(ctx context.Context, typ, rid uint32, p *packet) error {
	switch typ {
	case msgAliveCheck:
		return cl.reply(builder(nil).u32(msgAlive).u32(rid).u32(uint32(cl.l.PID())))
	case msgTerminate:
		err := cl.reply(builder(nil).u32(msgOK).u32(rid))
		cl.m.Terminate()
		return err
	case msgStopListening:
		cl.l.Close()
		cl.m.StopListening()
		return cl.reply(builder(nil).u32(msgOK).u32(rid))
	case msgOpenFwd, msgCloseFwd:
		f, err := parseForward(p)
		if err != nil {
			return err
		}
		port, err := cl.m.Forward(ctx, typ == msgCloseFwd, f)
		switch {
		case errors.Is(err, ErrMasterGone):
			return err
		case err != nil:
			return cl.fail(rid, err.Error())
		case port != 0:
			return cl.reply(builder(nil).u32(msgRemotePort).u32(rid).u32(uint32(port)))
		}
		return cl.reply(builder(nil).u32(msgOK).u32(rid))
	case msgNewSession:
		return cl.newSession(ctx, rid, p)
	case msgNewStdioFwd:
		return cl.stdioForward(ctx, rid, p)
	}
	// MUX_C_PROXY among them.
	cl.log.Errorf("mux_master_read_cb: unsupported mux message 0x%08x", typ)
	return cl.fail(rid, "unsupported request")
}

func parseForward(p *packet) (Forward, error) {
	var f Forward
	kind, err := p.u32()
	lh, err2 := p.str()
	lp, err3 := p.u32()
	ch, err4 := p.str()
	cp, err5 := p.u32()
	if err := errors.Join(err, err2, err3, err4, err5); err != nil {
		return f, err
	}
	for _, v := range []uint32{lp, cp} {
		if v != portIsPath && v > 65535 {
			return f, fmt.Errorf("invalid port %d: %w", v, errMalformed)
		}
	}
	port := func(v uint32) int {
		if v == portIsPath {
			return PortIsPath
		}
		return int(v)
	}
	return Forward{Kind: kind, ListenHost: lh, ListenPort: port(lp), ConnectHost: ch, ConnectPort: port(cp)}, nil
}

// receiveFDs reads n descriptors passed one per message, as mm_send_fd
// sends them.
func receiveFDs(c *net.UnixConn, n int) ([]int, error) {
	var fds []int
	for range n {
		buf := make([]byte, 1)
		oob := make([]byte, syscall.CmsgSpace(4))
		_, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err == nil {
			var fd int
			fd, err = oneRight(oob[:oobn])
			if err == nil {
				fds = append(fds, fd)
				continue
			}
		}
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, err
	}
	return fds, nil
}

func oneRight(oob []byte) (int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return -1, err
	}
	var got []int
	for _, m := range msgs {
		if fds, err := syscall.ParseUnixRights(&m); err == nil {
			got = append(got, fds...)
		}
	}
	if len(got) != 1 {
		for _, fd := range got {
			syscall.Close(fd)
		}
		return -1, errors.New("expected one descriptor")
	}
	return got[0], nil
}
