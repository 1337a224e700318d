package sshclient

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// KeepAlive sends "keepalive@openssh.com" global requests every interval,
// like OpenSSH's ServerAliveInterval: any reply, even a failure, shows the
// server is alive; when more than countMax intervals pass without one,
// onDead is called once and KeepAlive returns. It also returns when ctx is
// done or the connection closes. countMax <= 0 means OpenSSH's default, 3.
// onDead should close c: requests still waiting for a reply end then.
// With interval <= 0 (ServerAliveInterval 0, OpenSSH's default) nothing
// ends the connection, as nothing ends ssh's: a link silent for minutes
// that comes back keeps it. onRTT, if set, gets each probe's round-trip
// time; the first probe goes after a second, so that it is known early,
// yet not measured behind the requests that follow a login, and with
// interval <= 0 it is the only one.
func KeepAlive(ctx context.Context, c *ssh.Client, interval time.Duration, countMax int, onDead func(), onRTT func(time.Duration)) {
	if countMax <= 0 {
		countMax = 3
	}
	closed := make(chan struct{})
	go func() {
		_ = c.Wait()
		close(closed)
	}()
	var missed atomic.Int32
	probe := func() {
		start := time.Now()
		if _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); err == nil {
			missed.Store(0)
			if onRTT != nil {
				onRTT(time.Since(start))
			}
		}
	}
	first := time.AfterFunc(time.Second, probe)
	defer first.Stop()
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-closed:
			return
		case <-tick:
		}
		if int(missed.Add(1)) > countMax {
			if onDead != nil {
				onDead()
			}
			return
		}
		go probe()
	}
}

// TimeoutMessage is what ssh prints when keepalives go unanswered
// ("Timeout, server 127.0.0.1 not responding.").
func (s *Settings) TimeoutMessage() string {
	return fmt.Sprintf("Timeout, server %s not responding.", s.HostName)
}
