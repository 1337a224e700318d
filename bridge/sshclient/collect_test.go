package sshclient

import (
	"testing"
	"time"
)

// TestCoalescer: requests made while a run is under way get one more run,
// started after them; a request to an idle coalescer runs at once; none
// runs without a request.
func TestCoalescer(t *testing.T) {
	started := make(chan int, 16)
	release := make(chan struct{})
	runs := 0
	c := &coalescer{gap: 0, run: func() {
		runs++
		started <- runs
		<-release
	}}

	c.request()
	if n := <-started; n != 1 {
		t.Fatalf("run %d first", n)
	}
	// Ten requests during the first run: one run covers them all.
	for range 10 {
		c.request()
	}
	release <- struct{}{}
	if n := <-started; n != 2 {
		t.Fatalf("run %d second", n)
	}
	release <- struct{}{}
	waitIdle(t, c)
	if runs != 2 {
		t.Fatalf("%d runs for 11 requests, 10 of them during the first run; want 2", runs)
	}

	// Idle again: the next request runs at once.
	c.request()
	if n := <-started; n != 3 {
		t.Fatalf("run %d after idle", n)
	}
	release <- struct{}{}
	waitIdle(t, c)
	if runs != 3 {
		t.Fatalf("%d runs; want 3", runs)
	}
}

// TestCoalescerGap: a run requested during the previous one starts no
// sooner than gap after that one started.
func TestCoalescerGap(t *testing.T) {
	const gap = 50 * time.Millisecond
	starts := make(chan time.Time, 4)
	release := make(chan struct{})
	c := &coalescer{gap: gap, run: func() {
		starts <- time.Now()
		<-release
	}}
	c.request()
	first := <-starts
	c.request()
	release <- struct{}{}
	second := <-starts
	release <- struct{}{}
	if d := second.Sub(first); d < gap {
		t.Fatalf("second run %v after the first; want at least %v", d, gap)
	}
	waitIdle(t, c)
}

// waitIdle waits for c's goroutine to end: running is cleared as it does.
func waitIdle(t *testing.T, c *coalescer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		running := c.running
		c.mu.Unlock()
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the coalescer's goroutine did not end")
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
}
