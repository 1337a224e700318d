package interp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// Errors returned by Client methods; test with errors.Is.
var (
	// ErrAgentGone: the agent exited, the channel closed or Close was
	// called. Every request in flight fails with it.
	ErrAgentGone = errors.New("interp: agent gone")
	// ErrRestart: /etc/environment or ~/.pam_environment changed since the
	// agent started, or a module that site imported into it (a .pth
	// file's), so modules would not see what a fresh login sees.
	// The agent keeps serving other operations; the caller should start a
	// new agent and retry there.
	ErrRestart = errors.New("interp: login environment or site imports changed, agent must be restarted")
	// ErrHandshake: no hello from the agent (no python, bootstrap failure).
	ErrHandshake = errors.New("interp: agent did not start")
)

// maxNoise is how much output before the agent's magic is skipped.
const maxNoise = 64 << 10

// stdinHigh bounds queued stdin data per client before Exec's pump waits.
const stdinHigh = 1 << 20

// Conn is the agent's side of a channel: what the bootstrap started.
type Conn struct {
	// Stdin carries frames to the agent; closing it makes the agent exit.
	Stdin io.WriteCloser
	// Stdout carries frames from the agent.
	Stdout io.Reader
	// Stderr, if set, is logged and its tail kept for error messages.
	Stderr io.Reader
	// Wait, if set, waits for the remote command to end (called by Close).
	// When ctx ends first it must end the command (close the channel,
	// kill the process) and return, so that nothing is left waiting on it.
	Wait func(ctx context.Context) error
}

// AgentInfo describes a running agent, from its hello frame.
type AgentInfo struct {
	Protocol   int    `json:"protocol"`
	Python     string `json:"python"`     // e.g. "3.11.2"
	Executable string `json:"executable"` // sys.executable
	PID        int    `json:"pid"`
	UID        int    `json:"uid"`
	GID        int    `json:"gid"`
	User       string `json:"user"`
	Home       string `json:"home"`
	Cwd        string `json:"cwd"`    // the login directory; tasks run there
	TmpDir     string `json:"tmpdir"` // the temp root (TMPDIR, /tmp...) where modules' payload dirs go while they run
	Umask      *int   `json:"umask"`  // the umask it was started with, the login shell's (nil: an agent that did not say)
}

// Stats counts a client's traffic.
type Stats struct {
	BytesSent     int64         // bytes written to the agent's stdin
	BytesReceived int64         // frame bytes read from the agent's stdout
	Requests      int64         // requests sent
	ZipsSent      int64         // AnsiballZ zips sent (once per hash)
	LastRTT       time.Duration // round trip of the last Ping
	InFlight      int           // requests awaiting their answer
}

// Client talks to one agent. It is safe for concurrent use; requests are
// multiplexed on the channel.
type Client struct {
	log  logrus.FieldLogger
	conn Conn
	info AgentInfo
	// br is small: it lives as long as the interpreter (one per connected
	// target in a fleet), and a frame's payload larger than it is read
	// straight into the payload.
	br *bufio.Reader

	mu      sync.Mutex
	pending map[uint32]*call
	nextID  uint32
	err     error // set once the client is dead

	// writer queue
	qmu     sync.Mutex
	qcond   *sync.Cond
	queue   [][]byte
	qbytes  int
	qclosed bool

	zmu  sync.Mutex
	zips map[[32]byte]*zipState
	// held are the zipFilesKey of the zips sent: a zip with the same
	// files (the same module built by another playbook run) goes as a
	// reference to them (moduleReq.Twin).
	held map[string]bool

	done       chan struct{} // closed when the reader ends
	wdone      chan struct{} // closed when the writer ends
	dead       chan struct{} // closed when err is set
	stderrDone chan struct{}
	stderrTail tail
	closeOnce  sync.Once

	sent, recvd, reqs, zipsSent, rtt atomic.Int64
}

type call struct {
	id     uint32
	resp   chan *response
	stdout sink
	stderr sink
	// written, if set, is called on frameWritten (from readLoop: it must
	// not block).
	written func()
}

// sink receives stream data for a call; it must not block.
type sink interface {
	write(p []byte)
}

type bufSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// write copies p, and overwrites it: a sink owns the payload it is
// given, and a module's output may be a no_log task's.
func (b *bufSink) write(p []byte) {
	b.mu.Lock()
	b.buf.Write(p)
	b.mu.Unlock()
	clear(p)
}

func (b *bufSink) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := append([]byte(nil), b.buf.Bytes()...)
	// A module's output may be a no_log task's: no second copy lingers.
	clear(b.buf.Bytes())
	return out
}

// NewClient waits (bounded by ctx) for the agent's hello on conn and
// returns a client. The agent source must already be on its way (see
// package bootstrap). On failure conn.Stdin is closed and the error wraps
// ErrHandshake with what the agent printed on stderr.
func NewClient(ctx context.Context, conn Conn, log logrus.FieldLogger) (*Client, error) {
	c := &Client{
		log:        log,
		conn:       conn,
		br:         bufio.NewReaderSize(conn.Stdout, 8<<10),
		pending:    map[uint32]*call{},
		zips:       map[[32]byte]*zipState{},
		held:       map[string]bool{},
		done:       make(chan struct{}),
		wdone:      make(chan struct{}),
		dead:       make(chan struct{}),
		stderrDone: make(chan struct{}),
	}
	c.qcond = sync.NewCond(&c.qmu)
	if conn.Stderr != nil {
		go c.readStderr()
	} else {
		close(c.stderrDone)
	}
	type helloResult struct {
		info AgentInfo
		err  error
	}
	hc := make(chan helloResult, 1)
	go func() {
		info, err := c.readHello()
		hc <- helloResult{info, err}
	}()
	var hr helloResult
	select {
	case hr = <-hc:
	case <-ctx.Done():
		_ = conn.Stdin.Close()
		hr.err = ctx.Err()
	}
	if hr.err != nil {
		_ = conn.Stdin.Close()
		// Let stderr say why (e.g. "python3: not found"), briefly.
		select {
		case <-c.stderrDone:
		case <-time.After(2 * time.Second):
		}
		msg := strings.TrimSpace(c.stderrTail.String())
		if conn.Wait != nil {
			werr := waitBounded(context.WithoutCancel(ctx), conn.Wait, 2*time.Second)
			if werr != nil {
				if msg != "" {
					msg += "; "
				}
				msg += werr.Error()
			}
		}
		if msg != "" {
			return nil, fmt.Errorf("%w: %v: %s", ErrHandshake, hr.err, msg)
		}
		return nil, fmt.Errorf("%w: %v", ErrHandshake, hr.err)
	}
	if hr.info.Protocol != Protocol {
		_ = conn.Stdin.Close()
		return nil, fmt.Errorf("%w: agent speaks protocol %d, want %d", ErrHandshake, hr.info.Protocol, Protocol)
	}
	c.info = hr.info
	go c.readLoop()
	go c.writeLoop()
	c.log.WithFields(logrus.Fields{"python": c.info.Python, "pid": c.info.PID, "user": c.info.User, "tmpdir": c.info.TmpDir}).Debug("agent started")
	return c, nil
}

// waitBounded waits at most d for the remote command; past that, wait
// ends it.
func waitBounded(ctx context.Context, wait func(context.Context) error, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := wait(ctx)
	if ctx.Err() != nil {
		return fmt.Errorf("remote command still running after %v, ended: %w", d, ctx.Err())
	}
	return err
}

// readHello skips noise up to the magic, then reads the hello response.
func (c *Client) readHello() (AgentInfo, error) {
	var info AgentInfo
	var noise []byte
	magic := []byte(Magic)
	for {
		b, err := c.br.ReadByte()
		if err != nil {
			if len(noise) > 0 {
				c.log.WithField("noise", string(noise)).Debug("output before agent start")
			}
			if err == io.EOF {
				return info, errors.New("channel closed before hello")
			}
			return info, fmt.Errorf("read hello: %w", err)
		}
		noise = append(noise, b)
		if bytes.HasSuffix(noise, magic) {
			noise = noise[:len(noise)-len(magic)]
			break
		}
		if len(noise) > maxNoise {
			return info, fmt.Errorf("no agent magic in the first %d bytes of output", maxNoise)
		}
	}
	if len(noise) > 0 {
		c.log.WithField("noise", string(noise)).Warn("output before agent start (login scripts?)")
	}
	f, err := readFrame(c.br)
	if err != nil {
		return info, fmt.Errorf("read hello: %w", err)
	}
	c.recvd.Add(int64(headerSize + len(f.payload)))
	if f.typ != frameResp || f.id != 0 {
		return info, fmt.Errorf("unexpected frame type %d id %d instead of hello", f.typ, f.id)
	}
	r, err := decodeResp(f.payload)
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(r.Raw, &info); err != nil {
		return info, fmt.Errorf("decode hello: %w", err)
	}
	return info, nil
}

func (c *Client) readStderr() {
	defer close(c.stderrDone)
	sc := bufio.NewScanner(c.conn.Stderr)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		c.stderrTail.add(line)
		c.log.WithField("stderr", line).Warn("agent stderr")
	}
}

// tail keeps the last few lines of a stream.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(s) > 1024 {
		s = s[:1024]
	}
	t.lines = append(t.lines, s)
	if len(t.lines) > 20 {
		t.lines = t.lines[len(t.lines)-20:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

func (c *Client) readLoop() {
	var err error
	for {
		var f frame
		f, err = readFrame(c.br)
		if err != nil {
			break
		}
		c.recvd.Add(int64(headerSize + len(f.payload)))
		c.mu.Lock()
		cl := c.pending[f.id]
		if f.typ == frameResp {
			delete(c.pending, f.id)
		}
		c.mu.Unlock()
		if cl == nil {
			continue // cancelled, or a late answer
		}
		switch f.typ {
		case frameResp:
			r, derr := decodeResp(f.payload)
			if derr != nil {
				r = &response{Error: derr.Error()}
			}
			cl.resp <- r
		case frameStdout:
			if cl.stdout != nil {
				cl.stdout.write(f.payload)
			}
		case frameStderr:
			if cl.stderr != nil {
				cl.stderr.write(f.payload)
			}
		case frameWritten:
			if cl.written != nil {
				cl.written()
			}
		default:
			c.log.WithField("type", f.typ).Warn("unknown frame type from agent")
		}
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("channel closed")
	}
	c.fail(err)
	c.wipe()
	close(c.done)
}

// wipe overwrites what the client still holds of its tasks once it is
// dead: the zips' base templates (a task's arguments) and the read
// buffer (its last results).
func (c *Client) wipe() {
	c.zmu.Lock()
	for _, st := range c.zips {
		clear(st.base)
	}
	c.zmu.Unlock()
	c.br.Reset(zeroReader{})
	_, _ = c.br.Peek(c.br.Size()) // fills the buffer from zeroReader
}

// zeroReader reads zeros.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// fail marks the client dead and fails every pending request.
func (c *Client) fail(cause error) {
	c.mu.Lock()
	if c.err == nil {
		// Give stderr a moment to tell why the agent died.
		c.mu.Unlock()
		select {
		case <-c.stderrDone:
		case <-time.After(100 * time.Millisecond):
		}
		c.mu.Lock()
	}
	if c.err == nil {
		msg := cause.Error()
		if t := strings.TrimSpace(c.stderrTail.String()); t != "" {
			msg += ": " + t
		}
		c.err = fmt.Errorf("%w: %s", ErrAgentGone, msg)
		close(c.dead)
	}
	pend := c.pending
	c.pending = map[uint32]*call{}
	err := c.err
	c.mu.Unlock()
	for _, cl := range pend {
		cl.resp <- &response{gone: err}
	}
	c.qmu.Lock()
	c.qclosed = true
	c.queue = nil
	c.qbytes = 0
	c.qcond.Broadcast()
	c.qmu.Unlock()
}

// writeChunk bounds each write to the agent's channel: x/crypto keeps,
// for a channel's life, a packet buffer as large as its largest write,
// and for a connection's life a cipher buffer as large as its largest
// packet. An interpreter's channel lasts as long as its target's
// connection, so in a fleet both count per connected target.
const writeChunk = 8 << 10

// WriteChunked writes b to an interpreter's channel w in writes of a
// bounded size (writeChunk), as everything written to one must be.
func WriteChunked(w io.Writer, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := w.Write(b[n:min(n+writeChunk, len(b))])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (c *Client) writeLoop() {
	defer close(c.wdone)
	for {
		c.qmu.Lock()
		for len(c.queue) == 0 && !c.qclosed {
			c.qcond.Wait()
		}
		if len(c.queue) == 0 { // closed, and all written
			c.qmu.Unlock()
			return
		}
		q := c.queue
		c.queue = nil
		n := c.qbytes
		c.qbytes = 0
		c.qcond.Broadcast()
		c.qmu.Unlock()
		buf := make([]byte, 0, n)
		for _, b := range q {
			buf = append(buf, b...)
		}
		_, err := WriteChunked(c.conn.Stdin, buf)
		// Written (or never to be): requests carry tasks' arguments,
		// which must not linger in freed memory.
		clear(buf)
		for _, b := range q {
			clear(b)
		}
		if err != nil {
			c.fail(fmt.Errorf("write to agent: %w", err))
			_ = c.conn.Stdin.Close()
			return
		}
		c.sent.Add(int64(len(buf)))
	}
}

// enqueue queues a frame for the writer; it never blocks.
func (c *Client) enqueue(typ byte, id uint32, payload []byte) error {
	b := encodeFrame(typ, id, payload)
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.qclosed {
		return c.deadErr()
	}
	c.queue = append(c.queue, b)
	c.qbytes += len(b)
	c.qcond.Broadcast()
	return nil
}

// enqueueWait is enqueue with back-pressure, for bulk stream data.
func (c *Client) enqueueWait(ctx context.Context, typ byte, id uint32, payload []byte) error {
	c.qmu.Lock()
	for c.qbytes > stdinHigh && !c.qclosed && ctx.Err() == nil {
		c.qcond.Wait()
	}
	c.qmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.enqueue(typ, id, payload)
}

func (c *Client) deadErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return fmt.Errorf("%w: client closed", ErrAgentGone)
}

// newCall registers a request id.
func (c *Client) newCall(stdout, stderr sink) (*call, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	cl := &call{id: c.nextID, resp: make(chan *response, 1), stdout: stdout, stderr: stderr}
	c.pending[cl.id] = cl
	return cl, nil
}

func (c *Client) forget(cl *call) {
	c.mu.Lock()
	delete(c.pending, cl.id)
	c.mu.Unlock()
}

// send sends a request and returns its call; the caller waits with await.
func (c *Client) send(cl *call, req any, blob ...[]byte) error {
	p, err := encodeReq(req, blob...)
	if err != nil {
		c.forget(cl)
		return err
	}
	c.reqs.Add(1)
	err = c.enqueue(frameReq, cl.id, p)
	clear(p) // enqueue made the frame a copy
	if err != nil {
		c.forget(cl)
		return err
	}
	return nil
}

// await waits for the response to cl. On ctx's end it asks the agent to
// cancel (killing a process the request started) and returns ctx's error.
func (c *Client) await(ctx context.Context, cl *call) (*response, error) {
	select {
	case r := <-cl.resp:
		if r.gone != nil {
			return nil, r.gone
		}
		return r, nil
	case <-ctx.Done():
		c.forget(cl)
		_ = c.enqueue(frameCancel, cl.id, nil)
		return nil, ctx.Err()
	}
}

// roundTrip sends a request and waits for its response.
func (c *Client) roundTrip(ctx context.Context, req any, blob ...[]byte) (*response, error) {
	cl, err := c.newCall(nil, nil)
	if err != nil {
		return nil, err
	}
	if err := c.send(cl, req, blob...); err != nil {
		return nil, err
	}
	return c.await(ctx, cl)
}

// Info describes the agent, as its hello frame said.
func (c *Client) Info() AgentInfo { return c.info }

// Stats returns traffic counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	inFlight := len(c.pending)
	c.mu.Unlock()
	return Stats{
		InFlight:      inFlight,
		BytesSent:     c.sent.Load(),
		BytesReceived: c.recvd.Load(),
		Requests:      c.reqs.Load(),
		ZipsSent:      c.zipsSent.Load(),
		LastRTT:       time.Duration(c.rtt.Load()),
	}
}

// Done is closed when the agent is gone (exited, channel closed, Close).
func (c *Client) Done() <-chan struct{} { return c.dead }

// Err returns why the client is dead, or nil while it is alive.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Ping checks that the agent answers, and records the round trip time
// (see Stats).
func (c *Client) Ping(ctx context.Context) error {
	start := time.Now()
	r, err := c.roundTrip(ctx, map[string]any{"op": "ping"})
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if r.Error != "" {
		return fmt.Errorf("ping: %s", r.Error)
	}
	c.rtt.Store(int64(time.Since(start)))
	return nil
}

// Policy is an agent's answer about what the become tools read
// (sudoers, PAM, passwords, groups), against what it saw at its start.
type Policy struct {
	Changed bool
	// Blind: a directory among them is not readable by the agent's user
	// (/etc/sudoers.d, root's alone), so an edit inside it goes unseen.
	Blind bool
}

// PolicyChanged asks the agent whether what the become tools read
// changed since it started: a become interpreter's tool would decide
// anew.
func (c *Client) PolicyChanged(ctx context.Context) (Policy, error) {
	r, err := c.roundTrip(ctx, map[string]any{"op": "policy"})
	if err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	if r.Error != "" {
		return Policy{}, fmt.Errorf("policy: %s", r.Error)
	}
	return Policy{Changed: r.Changed, Blind: r.Blind}, nil
}

// Close closes the agent's stdin, which makes it exit and remove its temp
// dir, and waits (a few seconds at most) for it to go. Requests in flight
// fail with ErrAgentGone.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.mu.Lock()
		if c.err == nil {
			c.err = fmt.Errorf("%w: client closed", ErrAgentGone)
			close(c.dead)
		}
		c.mu.Unlock()
		// An exit request, then end of input: an agent on a terminal (a
		// become agent under a PTY) never sees the end of its input.
		exit, _ := encodeReq(map[string]any{"op": "exit"})
		c.qmu.Lock()
		c.queue = append(c.queue, encodeFrame(frameReq, 0, exit))
		c.qclosed = true
		c.qcond.Broadcast()
		c.qmu.Unlock()
		select {
		case <-c.wdone:
		case <-time.After(2 * time.Second):
		}
		err = c.conn.Stdin.Close()
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			err = errors.Join(err, errors.New("interp: agent did not exit within 5s of close"))
		}
		select {
		case <-c.stderrDone:
		case <-time.After(time.Second):
		}
		if c.conn.Wait != nil {
			if werr := waitBounded(context.Background(), c.conn.Wait, 5*time.Second); werr != nil {
				err = errors.Join(err, fmt.Errorf("interp: wait: %w", werr))
			}
		}
	})
	return err
}
