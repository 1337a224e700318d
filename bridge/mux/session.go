package mux

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// sessionRequest is MUX_C_NEW_SESSION's body.
type sessionRequest struct {
	tty, subsystem bool
	escape         uint32
	term, command  string
	env            []string
}

func parseSession(p *packet) (*sessionRequest, error) {
	var r sessionRequest
	var flags [4]uint32
	if _, err := p.str(); err != nil { // reserved
		return nil, err
	}
	for i := range flags {
		v, err := p.u32()
		if err != nil {
			return nil, err
		}
		flags[i] = v
	}
	// flags[1] and [2] ask for X11 and agent forwarding, which a master
	// grants only where its own ForwardX11 and ForwardAgent are on; the
	// daemon's masters have neither (they run as the real ssh).
	r.tty, r.subsystem = flags[0] != 0, flags[3] != 0
	var err error
	if r.escape, err = p.u32(); err != nil {
		return nil, err
	}
	if r.term, err = p.str(); err != nil {
		return nil, err
	}
	if r.command, err = p.str(); err != nil {
		return nil, err
	}
	for !p.empty() {
		kv, err := p.str()
		if err != nil {
			return nil, err
		}
		r.env = append(r.env, kv)
	}
	return &r, nil
}

// session is a passenger session: a session channel run on the client's
// descriptors.
type session struct {
	cl     *client
	id     uint32
	ch     ssh.Channel
	in     passedFD
	out    passedFD
	errOut *lockedWriter
	g      *fdGuard
	fds    []int // fds[0] is -1 once eow@openssh.com closed it
	tty    bool
	// inStop ends the relay of the client's stdin on eow@openssh.com;
	// inStopped drops what it had read.
	inStop    *stopper
	inStopped atomic.Bool

	closeOnce sync.Once
	done      chan struct{} // the session has ended and its descriptors are closed
	forceOnce sync.Once
	forced    chan struct{} // closed by ~.: the client is let go at once
}

// newSession serves MUX_C_NEW_SESSION (mux_master_process_new_session,
// mux_session_confirm, client_session2_setup).
func (cl *client) newSession(ctx context.Context, rid uint32, p *packet) error {
	req, err := parseSession(p)
	if err != nil {
		return err
	}
	fds, err := cl.passenger(rid, 3)
	if fds == nil {
		return err
	}
	var modes wire.Termios
	if req.tty {
		// Before the client puts its terminal in raw mode.
		if t, err := unix.IoctlGetTermios(fds[0], unix.TCGETS); err == nil {
			modes = wire.Termios{Iflag: t.Iflag, Oflag: t.Oflag, Cflag: t.Cflag, Lflag: t.Lflag, Cc: t.Cc[:]}
		} else {
			cl.log.WithError(err).Debug("mux_master_process_new_session: tcgetattr")
		}
	}
	ch, reqs, release, err := cl.m.OpenChannel(ctx, "session", nil)
	if err != nil {
		closeAll(fds)
		cl.log.WithError(err).Info("mux session: channel open failed")
		if errors.Is(err, ErrMasterGone) {
			return err
		}
		return cl.fail(rid, "Session open refused by peer")
	}
	s, err := cl.startSession(ch, release, fds, req.tty)
	if err != nil {
		return err
	}
	go func() {
		s.run(reqs, req, modes)
		release()
	}()
	return cl.reply(builder(nil).u32(msgSessionOpened).u32(rid).u32(s.id))
}

// passenger receives a passenger request's n descriptors, and refuses
// the request as the master does when they do not come or a session is
// open already: fds is nil then.
func (cl *client) passenger(rid uint32, n int) (fds []int, err error) {
	fds, err = receiveFDs(cl.c, n)
	if err != nil {
		_ = cl.fail(rid, "did not receive file descriptors")
		return nil, err
	}
	if cl.s != nil {
		closeAll(fds)
		return nil, cl.fail(rid, "Multiple sessions not supported")
	}
	return fds, nil
}

// startSession makes the session that will run on ch with the passed
// descriptors; if it cannot, it closes them and ch, and releases ch.
func (cl *client) startSession(ch ssh.Channel, release func(), fds []int, tty bool) (*session, error) {
	g, err := newFDGuard()
	var inStop *stopper
	if err == nil {
		if inStop, err = newStopper(); err != nil {
			g.close(nil)
		}
	}
	if err != nil {
		ch.Close()
		release()
		closeAll(fds)
		return nil, err
	}
	s := &session{cl: cl, id: cl.l.takeID(), ch: ch, g: g, fds: fds, tty: tty, inStop: inStop, done: make(chan struct{}), forced: make(chan struct{})}
	s.in = passedFD{fd: fds[0], g: g, stop: inStop}
	s.out = passedFD{fd: fds[1], g: g}
	if len(fds) > 2 {
		s.errOut = &lockedWriter{w: passedFD{fd: fds[2], g: g}}
	}
	cl.s = s
	cl.l.track(s, true)
	return s, nil
}

// run sets the session up as ssh's master does (pty-req, env, then exec,
// shell or subsystem) and relays it until the channel closes.
func (s *session) run(reqs <-chan *ssh.Request, req *sessionRequest, modes wire.Termios) {
	defer s.finish()
	exit := make(chan struct{})
	go s.serveRequests(reqs, exit)
	refusedClose := false // a refused pty-req closes the session
	if req.tty {
		ws, _ := unix.IoctlGetWinsize(s.fds[0], unix.TIOCGWINSZ)
		if ws == nil {
			ws = &unix.Winsize{}
		}
		payload := ssh.Marshal(struct {
			Term                   string
			Cols, Rows, XPix, YPix uint32
			Modes                  string
		}{req.term, uint32(ws.Col), uint32(ws.Row), uint32(ws.Xpixel), uint32(ws.Ypixel), encodeModes(fakessh.TerminalModes(modes))})
		if ok, err := s.ch.SendRequest("pty-req", true, payload); err == nil && !ok {
			closes, quiet := s.cl.m.PTYRefusal()
			refusedClose = closes
			if !closes {
				if !quiet {
					_, _ = io.WriteString(s.errOut, "PTY allocation request failed\r\n")
				}
				_ = s.cl.reply(builder(nil).u32(msgTTYAllocFail).u32(s.id))
			}
		}
	}
	patterns := s.cl.m.SendEnv()
	for _, kv := range req.env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" || !sshclient.MatchAny(patterns, name) {
			continue
		}
		_, _ = s.ch.SendRequest("env", false, ssh.Marshal(struct{ Name, Value string }{name, val}))
	}
	kind, payload := "shell", []byte(nil)
	switch {
	case req.command != "" && req.subsystem:
		kind, payload = "subsystem", ssh.Marshal(struct{ Name string }{req.command})
	case req.command != "":
		kind, payload = "exec", ssh.Marshal(struct{ Command string }{req.command})
	}
	if ok, err := s.ch.SendRequest(kind, true, payload); err == nil && !ok {
		// ssh's master queues "exec request failed" for the client's
		// stderr, but closes the channel's output with it unwritten.
		s.ch.Close()
	}
	if refusedClose {
		// The command runs (exec went out with the pty-req), unread:
		// chan_write_failed and chan_read_failed send eow@openssh.com
		// (sshd stops reading the command's stdout) and EOF, and drop
		// the output until the server closes the channel; an
		// exit-status still reaches the client (the master's message
		// for its stderr, queued, is not written).
		_, _ = s.ch.SendRequest("eow@openssh.com", false, nil)
		_ = s.ch.CloseWrite()
		go func() { _, _ = io.Copy(io.Discard, s.ch.Stderr()) }()
		_, _ = io.Copy(io.Discard, s.ch)
		<-exit
		return
	}
	var relays sync.WaitGroup
	relays.Add(2)
	go func() {
		defer relays.Done()
		if _, err := io.Copy(s.out, s.ch); err != nil && err != errWoken {
			// The client's stdout is gone: the master tells the remote
			// (chan_write_failed), whose next write then fails.
			_, _ = s.ch.SendRequest("eow@openssh.com", false, nil)
			_, _ = io.Copy(io.Discard, s.ch)
		}
	}()
	go func() {
		defer relays.Done()
		if _, err := io.Copy(s.errOut, s.ch.Stderr()); err != nil && err != errWoken {
			// The client's stderr is gone: ssh's master drops what
			// comes for it from then on.
			_, _ = io.Copy(io.Discard, s.ch.Stderr())
		}
	}()
	go s.relayInput(req)
	ended := make(chan struct{})
	go func() {
		relays.Wait()
		<-exit
		close(ended)
	}()
	select {
	case <-ended:
	case <-s.forced:
		// The channel is closed; the remote may take its time to
		// close its side, which the client does not wait for.
	}
}

// relayInput sends the client's stdin, through the escape filter where
// the session has a terminal and an escape character, and EOF after it.
func (s *session) relayInput(req *sessionRequest) {
	var in io.Reader = s.in
	if req.tty && req.escape != noEscape {
		in = NewEscapeFilter(s.in, byte(req.escape), s)
	}
	_, err := io.Copy(inputWriter{s}, in)
	switch {
	case errors.Is(err, errStopped):
		s.closeInput()
	case !errors.Is(err, errWoken):
		_ = s.ch.CloseWrite()
	}
}

// inputWriter is the channel as the client's stdin goes to it: nothing
// more after eow@openssh.com.
type inputWriter struct{ s *session }

func (w inputWriter) Write(b []byte) (int, error) {
	if w.s.inStopped.Load() {
		return 0, errStopped
	}
	return w.s.ch.Write(b)
}

// stopInput is the master's chan_rcvd_eow: the remote command closed its
// stdin, and the client's is read no more.
func (s *session) stopInput() {
	s.inStopped.Store(true)
	s.g.mu.RLock()
	defer s.g.mu.RUnlock()
	if !s.g.ended { // else finish closes inStop
		s.inStop.stop()
	}
}

// closeInput closes the master's copy of the client's stdin, as
// chan_shutdown_read does, and sends no EOF; the client keeps its own
// copy open (a writer blocks, and gets EPIPE once the client exits).
func (s *session) closeInput() {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if s.g.ended || s.fds[0] < 0 {
		return
	}
	unix.Close(s.fds[0])
	s.fds[0] = -1
}

// serveRequests takes the session's requests until the channel closes:
// an exit status goes to the client at once, as the master sends it.
func (s *session) serveRequests(reqs <-chan *ssh.Request, done chan<- struct{}) {
	defer close(done)
	for r := range reqs {
		ok := false
		if r.Type == "eow@openssh.com" {
			s.stopInput()
		}
		if r.Type == "exit-status" && len(r.Payload) >= 4 && !s.isForced() {
			ok = true
			_ = s.cl.reply(builder(nil).u32(msgExitMessage).u32(s.id).u32(binary.BigEndian.Uint32(r.Payload)))
		}
		if r.WantReply {
			_ = r.Reply(ok, nil)
		}
	}
}

// abandon is the client going away: the channel closes as the master
// closes a dead client's (chan_read_failed, chan_write_failed): EOF, then
// eow@openssh.com, then close.
func (s *session) abandon() {
	s.g.wake()
	_ = s.ch.CloseWrite()
	_, _ = s.ch.SendRequest("eow@openssh.com", false, nil)
	_ = s.ch.Close()
}

// force is ~. (channel_force_close): the channel closes and the client
// is let go at once, whatever the remote does after.
func (s *session) force() {
	s.forceOnce.Do(func() { close(s.forced) })
	s.abandon()
}

func (s *session) isForced() bool {
	select {
	case <-s.forced:
		return true
	default:
		return false
	}
}

// finish releases the descriptors once the session has ended.
func (s *session) finish() {
	s.closeOnce.Do(func() {
		_ = s.ch.Close()
		s.cl.l.track(s, false)
		s.cl.l.freeID(s.id)
		s.g.close(s.fds)
		unix.Close(s.inStop.fd) // no wait or stop is left on it (g.ended)
		close(s.done)
		// The client reads the end of its session as the end of the
		// control connection.
		_ = s.cl.c.CloseWrite()
	})
}

// windowChanged sends the terminal's size, as the master does for each
// session with a terminal on SIGWINCH.
func (s *session) windowChanged() {
	s.g.mu.RLock()
	if s.g.ended {
		s.g.mu.RUnlock()
		return
	}
	ws, err := unix.IoctlGetWinsize(s.fds[0], unix.TIOCGWINSZ)
	s.g.mu.RUnlock()
	if err != nil {
		return
	}
	_, _ = s.ch.SendRequest("window-change", false, ssh.Marshal(struct{ Cols, Rows, XPix, YPix uint32 }{uint32(ws.Col), uint32(ws.Row), uint32(ws.Xpixel), uint32(ws.Ypixel)}))
}

// encodeModes is a pty-req's encoded terminal modes.
func encodeModes(m map[uint8]uint32) string {
	ops := make([]int, 0, len(m))
	for op := range m {
		ops = append(ops, int(op))
	}
	slices.Sort(ops)
	var b []byte
	for _, op := range ops {
		b = append(b, byte(op))
		b = binary.BigEndian.AppendUint32(b, m[uint8(op)])
	}
	return string(append(b, 0)) // TTY_OP_END
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// lockedWriter serialises the session's stderr between the remote's and
// the escape filter's messages.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
