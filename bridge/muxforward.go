package bridge

import (
	"context"
	"sync"

	"github.com/ansible-bridge/ansible-bridge/bridge/forward"
	"github.com/ansible-bridge/ansible-bridge/bridge/mux"
)

// forwardSet holds the forwards mux clients asked a master for; they
// live as long as its connection, as in the master process.
type forwardSet struct {
	mu  sync.Mutex
	set *forward.Set
}

// forward opens or cancels one of c's forwards for a mux client.
func (c *sshConn) forward(ctx context.Context, cancel bool, f mux.Forward) (int, error) {
	c.forwards.mu.Lock()
	if c.forwards.set == nil {
		s := c.t.settings.Load()
		c.forwards.set = forward.NewSet(c.client.Client, forward.Options{
			GatewayPorts:          s.GatewayPorts,
			StreamLocalBindMask:   s.StreamLocalBindMask,
			StreamLocalBindUnlink: s.StreamLocalBindUnlink,
			Log:                   c.t.log.WithField("forwards", s.ControlPath),
			Busy:                  c.forwarding,
			Say:                   c.sayForeground,
		})
	}
	set := c.forwards.set
	c.forwards.mu.Unlock()
	spec := forward.Spec{Kind: forward.Kind(f.Kind), ListenHost: f.ListenHost, ListenPort: f.ListenPort, ConnectHost: f.ConnectHost, ConnectPort: f.ConnectPort}
	if cancel {
		return 0, set.Cancel(ctx, spec)
	}
	return set.Open(ctx, spec)
}

// forwarding counts a forwarded connection's channel as a session of
// the connection: `-O stop` and ControlPersist wait for it, as ssh's
// master waits for its open channels.
func (c *sshConn) forwarding(delta int) {
	if delta > 0 {
		c.mu.Lock()
		c.active++
		c.mu.Unlock()
		c.t.muxBusy(delta)
		return
	}
	c.t.muxBusy(delta)
	c.release()
}

// sayForeground writes line on the stderr of c's master where that ssh
// runs in the foreground (no ControlPersist) and is still there, as
// ssh's error() does at its LogLevel; a ControlPersist master has
// detached, its stderr /dev/null.
func (c *sshConn) sayForeground(line string) {
	iv := c.foreground
	if iv == nil || iv.settings == nil || !iv.settings.Says("ERROR") {
		return
	}
	select {
	case <-iv.gone:
		return
	default:
	}
	iv.errorf("%s", line)
}

// close ends the forwards (the connection has closed).
func (f *forwardSet) close() {
	f.mu.Lock()
	set := f.set
	f.set = nil
	f.mu.Unlock()
	if set != nil {
		set.Close()
	}
}
