package sshclient

import (
	"runtime"
	"sync"
	"time"
)

// keyCollectGap is the least time between the starts of two series of
// collections for dropped keys: what a key left behind is overwritten
// within about this and one series of its drop, as a password typed for
// an invocation is within the daemon's two ticks (bridge's collectTicks).
const keyCollectGap = 2 * time.Second

// droppedKeys runs collectKeys for the keys dropped since its last series
// began. A fleet's first task logs in to every target at once, and three
// full collections for each login cost the daemon more than the login
// itself (50 targets, 10 tasks each, on a slow guest: the daemon's CPU
// 3.6 s, 2.3 s with no collection).
var droppedKeys = &coalescer{run: collectKeys, gap: keyCollectGap}

// coalescer runs run once for all the requests made since its last run
// began, each run starting after the requests it covers and at least gap
// after the previous one started. It keeps no goroutine while idle.
type coalescer struct {
	run func()
	gap time.Duration

	mu      sync.Mutex
	running bool // a goroutine runs, or waits to run, the series
	pending bool // a request came after the current series began
}

// request asks for a run that starts after this call.
func (c *coalescer) request() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = true
	if !c.running {
		c.running = true
		go c.loop()
	}
}

func (c *coalescer) loop() {
	for {
		c.mu.Lock()
		if !c.pending {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.pending = false // this run covers every request so far
		c.mu.Unlock()
		started := time.Now()
		c.run()
		if wait := time.Until(started.Add(c.gap)); wait > 0 {
			time.Sleep(wait) // the rate limit, not a synchronisation
		}
	}
}

// collectKeys runs the collections after which nothing of a dropped key
// is left: the first frees the key, the cleanups it queues evict what
// the crypto packages cached for it, a later one frees that. Each round
// waits for a cleanup queued with those.
func collectKeys() {
	for range 3 {
		done := make(chan struct{})
		runtime.AddCleanup(new([64]byte), func(c chan struct{}) { close(c) }, done)
		runtime.GC()
		select {
		case <-done:
		case <-time.After(time.Second):
		}
	}
}
