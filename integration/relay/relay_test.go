package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startServer listens on 127.0.0.1:0 and runs handle for every accepted
// connection, closing it afterwards. Cleanup closes the listener and waits
// for the handlers, which return once the relay closes its side.
func startServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// echo copies everything back and half-closes at EOF.
func echo(c net.Conn) {
	_, _ = io.Copy(c, c)
	_ = c.(*net.TCPConn).CloseWrite()
}

// startEcho starts an echo server.
func startEcho(t *testing.T) string {
	t.Helper()
	return startServer(t, echo)
}

// startRelay starts a relay in front of target, closed at cleanup.
func startRelay(t *testing.T, target string, latency time.Duration) *Relay {
	t.Helper()
	r, err := Start(context.Background(), "127.0.0.1:0", target, latency)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// dial connects to the relay, closed at cleanup.
func dial(t *testing.T, r *Relay) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatalf("dial relay: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// pingPong writes msg and reads exactly len(msg) bytes back.
func pingPong(t *testing.T, c net.Conn, msg []byte) {
	t.Helper()
	if _, err := c.Write(msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo mismatch: got %q, want %q", got, msg)
	}
}

// relayGoroutines returns the stacks of live goroutines running relay
// methods.
func relayGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "integration/relay.(*") {
			out = append(out, g)
		}
	}
	return out
}

// checkNoRelayGoroutines fails t if relay goroutines are still running.
// Close has waited for them, but a goroutine that has signalled its
// WaitGroup may not have been torn down yet, so this allows a moment for
// that, as goleak does; a real leak stays.
func checkNoRelayGoroutines(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		gs := relayGoroutines()
		if len(gs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after Close:\n%s", strings.Join(gs, "\n\n"))
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBytesAndConnections(t *testing.T) {
	for _, tc := range []struct {
		name    string
		latency time.Duration
		conns   int
		size    int
	}{
		{"no latency", 0, 3, 1 << 20},
		{"latency", 2 * time.Millisecond, 2, 256 << 10},
		{"empty", 0, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRelay(t, startEcho(t), tc.latency)
			payload := make([]byte, tc.size)
			rand.Read(payload)

			var wg sync.WaitGroup
			errs := make(chan error, tc.conns)
			for range tc.conns {
				c := dial(t, r)
				wg.Add(1)
				go func() {
					defer wg.Done()
					var got []byte
					done := make(chan error, 1)
					go func() {
						var err error
						got, err = io.ReadAll(c)
						done <- err
					}()
					if _, err := c.Write(payload); err != nil {
						errs <- err
						return
					}
					c.CloseWrite()
					if err := <-done; err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, payload) {
						errs <- errors.New("echoed payload differs")
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			// Close waits for the relay's goroutines, so the counters are final.
			if err := r.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			want := Stats{
				Connections: tc.conns,
				BytesUp:     int64(tc.conns * tc.size),
				BytesDown:   int64(tc.conns * tc.size),
			}
			got := r.Stats()
			got.Turns = 0 // depends on chunking; see TestTurns
			if got != want {
				t.Errorf("Stats = %+v, want %+v", got, want)
			}
		})
	}
}

func TestTurns(t *testing.T) {
	banner := []byte("SSH-2.0-test\r\n")
	for _, tc := range []struct {
		name   string
		server func(net.Conn)
		banner bool // the server speaks first
		conns  int
		rounds int
	}{
		{"echo", echo, false, 1, 7},
		{"echo concurrent", echo, false, 3, 5},
		{"server speaks first", func(c net.Conn) {
			c.Write(banner)
			echo(c)
		}, true, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRelay(t, startServer(t, tc.server), time.Millisecond)
			var wg sync.WaitGroup
			for i := range tc.conns {
				c := dial(t, r)
				wg.Add(1)
				go func() {
					defer wg.Done()
					if tc.banner {
						got := make([]byte, len(banner))
						if _, err := io.ReadFull(c, got); err != nil {
							t.Errorf("read banner: %v", err)
							return
						}
					}
					for j := range tc.rounds {
						msg := bytes.Repeat([]byte{byte('a' + i)}, 10+j*5000)
						pingPong(t, c, msg)
					}
				}()
			}
			wg.Wait()
			if err := r.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if got, want := r.Stats().Turns, tc.conns*tc.rounds; got != want {
				t.Errorf("Turns = %d, want %d", got, want)
			}
		})
	}
}

func TestTurnsPipelined(t *testing.T) {
	// Requests sent without waiting for answers make at most one turn each
	// and at least one in all; the exact number depends on timing.
	r := startRelay(t, startEcho(t), 0)
	c := dial(t, r)
	const n = 20
	msg := []byte("ping")
	for range n {
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	if _, err := io.ReadFull(c, make([]byte, n*len(msg))); err != nil {
		t.Fatalf("read: %v", err)
	}
	r.Close()
	if got := r.Stats().Turns; got < 1 || got > n {
		t.Errorf("Turns = %d, want 1..%d", got, n)
	}
}

func TestReset(t *testing.T) {
	r := startRelay(t, startEcho(t), 0)
	c := dial(t, r)
	pingPong(t, c, []byte("before"))
	r.Reset()
	pingPong(t, c, []byte("after!!"))
	r.Close()
	want := Stats{Connections: 0, BytesUp: 7, BytesDown: 7, Turns: 1}
	if got := r.Stats(); got != want {
		t.Errorf("Stats after Reset = %+v, want %+v", got, want)
	}
}

func TestLatency(t *testing.T) {
	const latency = 40 * time.Millisecond
	type stamps struct{ recv, sent time.Time }
	seen := make(chan stamps, 1)
	target := startServer(t, func(c net.Conn) {
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		recv := time.Now()
		sent := time.Now()
		c.Write(b)
		seen <- stamps{recv, sent}
		io.Copy(io.Discard, c)
	})
	r := startRelay(t, target, latency)
	c := dial(t, r)

	start := time.Now()
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("read: %v", err)
	}
	end := time.Now()
	s := <-seen
	if d := s.recv.Sub(start); d < latency {
		t.Errorf("client→server took %v, want ≥ %v", d, latency)
	}
	if d := end.Sub(s.sent); d < latency {
		t.Errorf("server→client took %v, want ≥ %v", d, latency)
	}
	if d := end.Sub(start); d < 2*latency {
		t.Errorf("round trip took %v, want ≥ %v", d, 2*latency)
	}
}

func TestLatencyPipelines(t *testing.T) {
	// Chunks are queued, not slept on one by one, so n back-to-back
	// messages take about one round trip, not n. Timing upper bounds are
	// flaky on loaded machines, so this only logs; the lower bound holds.
	const latency = 20 * time.Millisecond
	const n = 10
	r := startRelay(t, startEcho(t), latency)
	c := dial(t, r)
	msg := []byte("0123456789")
	start := time.Now()
	for range n {
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("write: %v", err)
		}
		time.Sleep(time.Millisecond) // separate chunks on the wire
	}
	if _, err := io.ReadFull(c, make([]byte, n*len(msg))); err != nil {
		t.Fatalf("read: %v", err)
	}
	d := time.Since(start)
	if d < 2*latency {
		t.Errorf("took %v, want ≥ %v", d, 2*latency)
	}
	t.Logf("%d pipelined messages through %v one-way latency: %v (serialized would be ≥ %v)", n, latency, d, n*latency)
}

func TestDialFailure(t *testing.T) {
	// A port that was just free: the dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close()

	r := startRelay(t, target, 0)
	c := dial(t, r)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read from relay with dead target succeeded")
	} else if isTimeout(err) {
		t.Fatal("relay kept client connection open after failed dial")
	}
	r.Close()
	if got := r.Stats().Connections; got != 1 {
		t.Errorf("Connections = %d, want 1", got)
	}
}

func TestCloseNoLeak(t *testing.T) {
	for _, tc := range []struct {
		name    string
		latency time.Duration
	}{
		{"no latency", 0},
		// Queued chunks must not hold Close until their delivery time.
		{"queued behind long latency", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRelay(t, startEcho(t), tc.latency)
			var clients []net.Conn
			for i := range 4 {
				c := dial(t, r)
				clients = append(clients, c)
				if i%2 == 0 {
					c.Write(bytes.Repeat([]byte("x"), 100<<10))
				}
			}
			if tc.latency == 0 {
				pingPong(t, clients[1], []byte("live"))
			}
			// Wait until every connection is being relayed.
			for deadline := time.Now().Add(10 * time.Second); ; {
				r.mu.Lock()
				n := len(r.live)
				r.mu.Unlock()
				if n == len(clients) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d live pairs, want %d", n, len(clients))
				}
				time.Sleep(time.Millisecond)
			}
			if len(relayGoroutines()) == 0 {
				t.Fatal("relayGoroutines finds nothing while the relay runs")
			}

			if err := r.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			checkNoRelayGoroutines(t)
			for _, c := range clients {
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.Copy(io.Discard, c); err != nil && isTimeout(err) {
					t.Errorf("client connection still open after Close")
				}
			}
			if _, err := net.Dial("tcp", r.Addr()); err == nil {
				t.Errorf("relay still accepting after Close")
			}
			if err := r.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

func TestContextEndCloses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Start(ctx, "127.0.0.1:0", startEcho(t), 0)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	c := dial(t, r)
	pingPong(t, c, []byte("hi"))
	cancel()
	// Close after the context ended waits for the close it triggered.
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkNoRelayGoroutines(t)
	if _, err := net.Dial("tcp", r.Addr()); err == nil {
		t.Errorf("relay still accepting after context end")
	}
}

func TestAddrPort(t *testing.T) {
	r := startRelay(t, "127.0.0.1:1", 0)
	_, port, err := net.SplitHostPort(r.Addr())
	if err != nil {
		t.Fatalf("Addr %q: %v", r.Addr(), err)
	}
	if want := strconv.Itoa(r.Port()); port != want {
		t.Errorf("Addr %q has port %s, Port() = %s", r.Addr(), port, want)
	}
}

func TestStartErrors(t *testing.T) {
	if _, err := Start(context.Background(), "127.0.0.1:0", "127.0.0.1:1", -time.Second); err == nil {
		t.Error("Start with negative latency succeeded")
	}
	if _, err := Start(context.Background(), "256.0.0.1:0", "127.0.0.1:1", 0); err == nil {
		t.Error("Start on a bad address succeeded")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestStall: a stalled relay delivers nothing either way, keeps what was
// sent, delivers it once the stall ends, and closes while stalled.
func TestStall(t *testing.T) {
	for _, latency := range []time.Duration{0, time.Millisecond} {
		t.Run(latency.String(), func(t *testing.T) {
			r := startRelay(t, startEcho(t), latency)
			c := dial(t, r)
			pingPong(t, c, []byte("before"))
			r.Stall(true)
			r.Stall(true) // idempotent
			if _, err := c.Write([]byte("held")); err != nil {
				t.Fatal(err)
			}
			// Nothing may come back while stalled. A short look can only
			// miss a failure, never invent one.
			_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			if n, err := c.Read(make([]byte, 16)); n != 0 || err == nil {
				t.Fatalf("read %d bytes (%v) through a stalled relay", n, err)
			}
			_ = c.SetReadDeadline(time.Time{})
			r.Stall(false)
			r.Stall(false)
			got := make([]byte, 4)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
				t.Fatalf("after the stall: %q, %v", got, err)
			}
			// A new connection made during a stall gets nothing, and a
			// relay closed during a stall ends every connection.
			r.Stall(true)
			c2 := dial(t, r)
			if _, err := c2.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			_ = c2.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := c2.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Fatalf("read %d bytes (%v) from a relay closed while stalled", n, err)
			}
			checkNoRelayGoroutines(t)
		})
	}
}
