package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/forward"
	"github.com/ansible-bridge/ansible-bridge/bridge/mux"
	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"golang.org/x/crypto/ssh"
)

// routeMux counts what real ssh clients asked of a master's control
// socket: sessions, stdio and port forwards.
const routeMux = "mux"

// listenMux puts c's control socket at its ControlPath once c's master
// has logged in, as ssh's new master does (muxserver_listen): a real ssh
// with the same ControlPath then multiplexes over c. A socket already
// there is ssh's "disabling multiplexing" (said to the master, which
// goes on without one); any other failure ends the master with ssh's
// message.
func (c *sshConn) listenMux(master *invocation, s *sshclient.Settings) error {
	l, err := mux.Listen(s.ControlPath)
	var exists *mux.ExistsError
	var fatal *mux.FatalError
	switch {
	case errors.As(err, &exists):
		if s.Says("ERROR") && master != nil {
			master.errorf("%s", exists.Error())
		}
		return nil
	case errors.As(err, &fatal):
		level := "FATAL"
		if fatal.Logged {
			level = "ERROR"
		}
		msg := fatal.Msg
		if !s.Says(level) {
			msg = ""
		}
		return &sshclient.ConnError{Msg: msg, Err: fatal}
	case err != nil:
		return err
	}
	c.mux = l
	c.startMaster(s)
	c.t.control.Store(l)
	go l.Serve(context.Background(), muxMaster{c}, c.t.log.WithField("mux", s.ControlPath))
	return nil
}

// startMaster gives a ControlPersist master a process of its own
// (masterStub), whose pid its control socket's clients are told, as of
// ssh's backgrounded master. Without ControlPersist ssh's master is the
// ssh that logged in; the daemon's pid stands for it, as the daemon
// relays the SIGWINCH a mux client sends there to its sessions.
func (c *sshConn) startMaster(s *sshclient.Settings) {
	prog := c.t.reg.masterStub
	if prog == "" || s.ControlPersist == sshclient.PersistNo {
		return
	}
	l := c.mux
	stub, err := startMasterStub(prog, s.ControlPath, l.WindowChanged, c.masterKilled)
	if err != nil {
		c.t.log.WithError(err).Warn("no process of its own for the master: -O check names the daemon's")
		return
	}
	c.stub = stub
	l.SetPID(stub.pid)
}

// masterKilled ends c as ssh's master ends when killed by sig: its
// sessions end and, for a signal ssh catches, its socket goes; for one
// it does not (SIGKILL), the socket stays, refusing.
func (c *sshConn) masterKilled(sig syscall.Signal) {
	c.t.log.WithField("signal", sig).Info("the master's process was killed: its connection closes")
	if sig != 0 && !caughtBySSH(sig) {
		c.mux.Abandon()
	}
	t := c.t
	t.mu.Lock()
	current := slices.Contains(t.conns, c)
	t.mu.Unlock()
	if current {
		// The target's connections are this master's.
		t.stop(true)
		return
	}
	c.kill() // a master stopped (-O stop) whose sessions ran on
}

// ownsControlPath reports whether the socket at path is the control
// socket of t's master, without waiting for a login in progress.
func (t *target) ownsControlPath(path string) bool {
	return t.control.Load().At(path)
}

// orphaned reports whether t's master listened at path and no longer
// does there (its socket removed, or replaced by another's): ssh's
// clients can no longer reach that master.
func (t *target) orphaned(path string) bool {
	l := t.control.Load()
	return l != nil && !l.At(path)
}

// muxMaster is a connection as its control socket's clients share it.
type muxMaster struct{ c *sshConn }

func (m muxMaster) OpenChannel(ctx context.Context, kind string, payload []byte) (ssh.Channel, <-chan *ssh.Request, func(), error) {
	c, t := m.c, m.c.t
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return nil, nil, nil, mux.ErrMasterGone
	}
	c.active++
	c.mu.Unlock()
	t.touched()
	ch, reqs, err := c.client.OpenChannel(kind, payload)
	if err != nil {
		c.release()
		var refused *ssh.OpenChannelError
		if !errors.As(err, &refused) {
			// No answer: the connection ended under the open.
			err = fmt.Errorf("%w: %w", mux.ErrMasterGone, err)
		}
		return nil, nil, nil, fmt.Errorf("open %s channel: %w", kind, err)
	}
	t.mu.Lock()
	t.routes[routeMux]++
	t.mu.Unlock()
	t.muxBusy(1)
	done := func() {
		t.muxBusy(-1)
		c.release()
	}
	return ch, reqs, done, nil
}

// muxBusy counts a mux client's connection or open channel (a session,
// a forwarded connection) in flight, as ssh's master counts open
// channels: the target does not expire under it, and ControlPersist
// counts from its end.
func (t *target) muxBusy(delta int) {
	t.lastUse.Store(time.Now().UnixNano())
	if t.inflight.Add(int32(delta)) == 0 {
		t.nowIdle()
	}
}

func (m muxMaster) SendEnv() []string { return m.c.sendEnv }

func (m muxMaster) PTYRefusal() (closes, quiet bool) { return m.c.ttyRequired, m.c.masterQuiet }

func (m muxMaster) Forward(ctx context.Context, cancel bool, f mux.Forward) (int, error) {
	port, err := m.c.forward(ctx, cancel, f)
	if errors.Is(err, forward.ErrConnectionLost) {
		err = fmt.Errorf("%w: %w", mux.ErrMasterGone, err)
	}
	return port, err
}

func (m muxMaster) Terminate() {
	m.c.t.log.Info("mux client asked the master to exit")
	m.c.t.stop(true)
}

func (m muxMaster) Busy(delta int) { m.c.t.muxBusy(delta) }

func (m muxMaster) StopListening() {
	m.c.t.log.Info("mux client asked the master to stop listening")
	m.c.t.stop(false)
}
