package sshclient

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// KeepAlive sends "keepalive@openssh.com" global requests every interval,
// like OpenSSH's ServerAliveInterval: any reply, even a failure, shows the
// server is alive; when more than countMax intervals pass without one,
// onDead is called once and the probes stop. countMax <= 0 means OpenSSH's
// default, 3. onDead should close c: requests still waiting for a reply
// end then. With interval <= 0 (ServerAliveInterval 0, OpenSSH's default)
// nothing ends the connection, as nothing ends ssh's: a link silent for
// minutes that comes back keeps it. onRTT, if set, gets each probe's
// round-trip time; the first probe goes after a second, so that it is
// known early, yet not measured behind the requests that follow a login,
// and with interval <= 0 it is the only one.
//
// It runs on timers, with no goroutine of its own between probes (a
// fleet has one connection a target); stop ends it, and the caller calls
// it once the connection has closed.
func KeepAlive(c *ssh.Client, interval time.Duration, countMax int, onDead func(), onRTT func(time.Duration)) (stop func()) {
	if countMax <= 0 {
		countMax = 3
	}
	k := &keepAlive{c: c, every: interval, countMax: int32(countMax), onDead: onDead, onRTT: onRTT}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.first = time.AfterFunc(time.Second, k.probe)
	if interval > 0 {
		k.next = time.AfterFunc(interval, k.onInterval)
	}
	return k.stop
}

type keepAlive struct {
	c        *ssh.Client
	every    time.Duration // ServerAliveInterval
	countMax int32
	onDead   func()
	onRTT    func(time.Duration)
	missed   atomic.Int32

	mu          sync.Mutex
	stopped     bool
	first, next *time.Timer // the first probe, the next interval
}

// probe sends one request and waits for its reply, which may never come.
func (k *keepAlive) probe() {
	start := time.Now()
	if _, _, err := k.c.SendRequest("keepalive@openssh.com", true, nil); err == nil {
		k.missed.Store(0)
		if k.onRTT != nil {
			k.onRTT(time.Since(start))
		}
	}
}

// onInterval runs once an interval: the verdict on the probes so far,
// then the next probe, with the next interval already timed so that a
// probe left without a reply does not hold it back.
func (k *keepAlive) onInterval() {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	if k.missed.Add(1) > k.countMax {
		k.stopped = true
		k.first.Stop()
		k.mu.Unlock()
		if k.onDead != nil {
			k.onDead()
		}
		return
	}
	k.next.Reset(k.every)
	k.mu.Unlock()
	k.probe()
}

func (k *keepAlive) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	k.first.Stop()
	if k.next != nil {
		k.next.Stop()
	}
}

// TimeoutMessage is what ssh prints when keepalives go unanswered
// ("Timeout, server 127.0.0.1 not responding.").
func (s *Settings) TimeoutMessage() string {
	return fmt.Sprintf("Timeout, server %s not responding.", s.HostName)
}
