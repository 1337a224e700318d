package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// chunkSize is the largest read from one side in one go.
	chunkSize = 32 << 10
	// queueChunks bounds the chunks in flight per direction. With full
	// chunks that is 8 MiB, far more than a loopback SSH session keeps
	// in flight, so the bound only matters as back-pressure.
	queueChunks = 256
)

// Stats is a snapshot of a relay's counters. See the package doc for what
// each counter means.
type Stats struct {
	// Connections is the number of client connections accepted.
	Connections int `json:"connections"`
	// BytesUp is the payload delivered from clients to the target.
	BytesUp int64 `json:"bytes_up"`
	// BytesDown is the payload delivered from the target to clients.
	BytesDown int64 `json:"bytes_down"`
	// Turns is the number of client→server to server→client direction
	// changes, summed over all connections.
	Turns int `json:"turns"`
}

// Relay accepts TCP connections and relays each to a target address,
// counting traffic and optionally delaying it. Create one with [Start].
type Relay struct {
	ln      net.Listener
	target  string
	latency time.Duration

	// ctx ends when the relay closes; it bounds dials to the target.
	ctx    context.Context
	cancel context.CancelFunc

	conns     atomic.Int64
	bytesUp   atomic.Int64
	bytesDown atomic.Int64
	turns     atomic.Int64

	// stalled, when not nil, is closed when a stall ends (see Stall).
	stallMu sync.Mutex
	stalled chan struct{}

	mu sync.Mutex
	// stopCtxClose unregisters the close-on-ctx-done hook set by Start.
	stopCtxClose func() bool
	live         map[*pair]struct{}
	closed       bool

	wg          sync.WaitGroup
	closeOnce   sync.Once
	closeResult error
}

// Start listens on listen (for example "127.0.0.1:0") and relays every
// accepted connection to target. latency is the one-way delay added in
// each direction; a round trip through the relay takes 2×latency longer.
// Zero adds no delay. The relay closes when ctx ends or when Close is
// called.
func Start(ctx context.Context, listen, target string, latency time.Duration) (*Relay, error) {
	if latency < 0 {
		return nil, fmt.Errorf("relay: negative latency %v", latency)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("relay: listen on %s: %w", listen, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &Relay{
		ln:      ln,
		target:  target,
		latency: latency,
		ctx:     rctx,
		cancel:  cancel,
		live:    make(map[*pair]struct{}),
	}
	r.wg.Add(1)
	go r.acceptLoop()
	// Registered last: if ctx is already done this runs Close at once,
	// which must find the relay fully built.
	r.mu.Lock()
	r.stopCtxClose = context.AfterFunc(ctx, func() { _ = r.Close() })
	r.mu.Unlock()
	return r, nil
}

// Addr returns the host:port that clients connect to.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Port returns the TCP port that clients connect to.
func (r *Relay) Port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// Stats returns a snapshot of the counters. The fields are read one at a
// time, so a snapshot taken while traffic flows may mix instants; take it
// when the traffic of interest has ended.
func (r *Relay) Stats() Stats {
	return Stats{
		Connections: int(r.conns.Load()),
		BytesUp:     r.bytesUp.Load(),
		BytesDown:   r.bytesDown.Load(),
		Turns:       int(r.turns.Load()),
	}
}

// Reset zeroes the counters. Connections that are still open keep
// relaying and keep their direction state, so a turn completed after Reset
// by traffic sent before it still counts.
func (r *Relay) Reset() {
	r.conns.Store(0)
	r.bytesUp.Store(0)
	r.bytesDown.Store(0)
	r.turns.Store(0)
}

// Stall stops (on) or resumes (off) the delivery of data in both
// directions on every connection, current and future, as a network that
// blackholes packets would: the relay keeps accepting connections and
// reading what each side sends, but holds it until the stall ends.
// Nothing is dropped, so after a stall that both ends survive the
// connections carry on. A connection being closed still ends at once.
func (r *Relay) Stall(on bool) {
	r.stallMu.Lock()
	defer r.stallMu.Unlock()
	switch {
	case on && r.stalled == nil:
		r.stalled = make(chan struct{})
	case !on && r.stalled != nil:
		close(r.stalled)
		r.stalled = nil
	}
}

// flowing waits while the relay is stalled; it reports false if the pair
// died meanwhile.
func (p *pair) flowing() bool {
	for {
		p.r.stallMu.Lock()
		ch := p.r.stalled
		p.r.stallMu.Unlock()
		if ch == nil {
			return true
		}
		select {
		case <-ch:
		case <-p.dead:
			return false
		}
	}
}

// Close stops accepting, closes every relayed connection on both sides and
// waits for all of the relay's goroutines to return. It is safe to call
// more than once and from several goroutines; later calls return the first
// call's result. Stats stays readable after Close and then holds the final
// counts, including traffic relayed while the connections were torn down.
func (r *Relay) Close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		r.mu.Lock()
		if r.stopCtxClose != nil {
			r.stopCtxClose()
		}
		r.closed = true
		for p := range r.live {
			p.abort()
		}
		r.mu.Unlock()
		err := r.ln.Close()
		r.wg.Wait()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			r.closeResult = fmt.Errorf("relay: close listener: %w", err)
		}
	})
	return r.closeResult
}

func (r *Relay) acceptLoop() {
	defer r.wg.Done()
	var backoff time.Duration
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if r.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failure such as EMFILE: back off, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-r.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		r.conns.Add(1)
		p := &pair{r: r, client: c, dead: make(chan struct{})}
		if !r.track(p) {
			_ = c.Close()
			return
		}
		r.wg.Add(1)
		go p.run()
	}
}

// track registers p as live; it reports false once the relay is closing.
func (r *Relay) track(p *pair) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.live[p] = struct{}{}
	return true
}

func (r *Relay) untrack(p *pair) {
	r.mu.Lock()
	delete(r.live, p)
	r.mu.Unlock()
}

// direction of a chunk.
type direction int8

const (
	none direction = iota
	up             // client → server
	down           // server → client
)

// pair is one relayed client connection and its connection to the target.
type pair struct {
	r      *Relay
	client net.Conn

	mu     sync.Mutex
	server net.Conn // set once dialed; guarded by mu until then
	last   direction
	dead   chan struct{} // closed by abort
	killed bool
}

// chunk is payload read from one side, stamped with its read time.
type chunk struct {
	data []byte
	at   time.Time
}

func (p *pair) run() {
	defer p.r.wg.Done()
	defer p.r.untrack(p)
	defer p.abort()

	var d net.Dialer
	server, err := d.DialContext(p.r.ctx, "tcp", p.r.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.killed {
		p.mu.Unlock()
		_ = server.Close()
		return
	}
	p.server = server
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(p.client, server, up, &p.r.bytesUp) }()
	go func() { defer wg.Done(); p.pipe(server, p.client, down, &p.r.bytesDown) }()
	wg.Wait()
}

// abort closes both connections at once, dropping queued data, and wakes
// every goroutine of the pair.
func (p *pair) abort() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed {
		return
	}
	p.killed = true
	close(p.dead)
	_ = p.client.Close()
	if p.server != nil {
		_ = p.server.Close()
	}
}

// observe records that a chunk going dir was read, counting a turn when
// the traffic changes from client→server to server→client.
func (p *pair) observe(dir direction) {
	p.mu.Lock()
	if dir == down && p.last == up {
		p.r.turns.Add(1)
	}
	p.last = dir
	p.mu.Unlock()
}

// pipe relays src to dst in one direction: a reader stamps chunks and a
// writer delivers each at its stamp plus the relay latency. On a clean EOF
// from src it half-closes dst once the queue is drained; on any error it
// aborts the pair.
func (p *pair) pipe(src, dst net.Conn, dir direction, counter *atomic.Int64) {
	if p.r.latency == 0 {
		p.pipeDirect(src, dst, dir, counter)
		return
	}
	queue := make(chan chunk, queueChunks)
	readErr := make(chan error, 1)
	go func() {
		defer close(queue)
		buf := make([]byte, chunkSize)
		for {
			n, err := src.Read(buf)
			ackNow(src)
			if n > 0 {
				c := chunk{data: append([]byte(nil), buf[:n]...), at: time.Now()}
				p.observe(dir)
				select {
				case queue <- c:
				case <-p.dead:
					readErr <- net.ErrClosed
					return
				}
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()

	var timer *time.Timer
	for c := range queue {
		if wait := time.Until(c.at.Add(p.r.latency)); p.r.latency > 0 && wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-p.dead:
				timer.Stop()
				drain(queue)
				return
			}
		}
		if !p.flowing() {
			drain(queue)
			return
		}
		// Counted before the write: the peer may answer, and the answer be
		// relayed back, before this goroutine runs again after Write.
		counter.Add(int64(len(c.data)))
		n, err := dst.Write(c.data)
		if err != nil {
			counter.Add(int64(n - len(c.data)))
			p.abort()
			drain(queue)
			return
		}
	}
	if timer != nil {
		timer.Stop()
	}
	if err := <-readErr; !errors.Is(err, io.EOF) {
		p.abort()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if err := cw.CloseWrite(); err != nil {
			p.abort()
		}
	}
}

// pipeDirect is pipe without added latency: the reader writes each chunk
// itself. A handoff to a second goroutine would add a wakeup to every
// turn the relay is there to observe, not to slow down.
func (p *pair) pipeDirect(src, dst net.Conn, dir direction, counter *atomic.Int64) {
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		ackNow(src)
		if n > 0 {
			p.observe(dir)
			if !p.flowing() {
				return
			}
			// Counted before the write, as in pipe.
			counter.Add(int64(n))
			if w, werr := dst.Write(buf[:n]); werr != nil {
				counter.Add(int64(w - n))
				p.abort()
				return
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p.abort()
			return
		}
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if err := cw.CloseWrite(); err != nil {
			p.abort()
		}
	}
}

// ackNow has c acknowledge what it has read at once (TCP_QUICKACK). A
// relayed connection is two TCP connections, and on the relay's side of
// each the ACK timing is the relay's, not that of the endpoint behind it.
// sshd leaves Nagle's algorithm on for sessions without a terminal, so a
// delayed ACK from the relay could hold sshd's next packet for up to 40 ms
// even for a client that acknowledges at once, as the bridge does. Stock
// ssh runs through the same relay, so it can only gain from this too.
func ackNow(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	if raw, err := sc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
		})
	}
}

// drain waits for the reader to close queue. The pair is aborted, so the
// reader's blocked Read or send returns promptly.
func drain(queue <-chan chunk) {
	for range queue {
	}
}
