package bridge

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/journal"
	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// invocation is one shim's conversation: one ssh, scp or sftp run.
type invocation struct {
	id   uint64
	conn net.Conn
	// hello is the shim's first frame, its command line parsed (by the
	// shim: the daemon never parses argv).
	hello fakessh.Hello
	// cancel ends the invocation's context: the shim went away.
	cancel context.CancelFunc
	log    logrus.FieldLogger

	wmu sync.Mutex
	// handedOver: a frame sent made the C front hand the call to the Go
	// shim (counted in handovers once). Guarded by wmu.
	handedOver bool
	handovers  *handoverCounts

	// Filled in by accept: the shim's stdin and its control messages.
	stdin   *io.PipeReader
	signals chan string
	winch   chan [2]int
	gone    chan struct{} // closed when the shim hangs up
	// accepted: the shim was told to send stdin.
	accepted bool

	bytesIn, bytesOut atomic.Int64
	quiet             bool // -q or LogLevel quiet/fatal/error
	// settings are the invocation's effective settings, once resolved:
	// a connection it makes uses them.
	settings *sshclient.Settings
	// master: the invocation made its connection, as the ssh that
	// becomes a ControlMaster does. mustLogin: it found no master, so
	// its first connection is its own (see target.use).
	master, mustLogin atomic.Bool
	// found is the master's connection it found instead, as ssh's mux
	// client connects to its socket: gone by its first session, the
	// invocation logs in itself, as that client does.
	found   atomic.Pointer[sshConn]
	started time.Time
	// pid is the shim's, where the daemon sees it (sandboxReason).
	pid int

	// reg counts, for status, the invocations no target's row shows
	// (nil: a control request, not counted).
	reg *registry

	mu      sync.Mutex
	route   string  // set by countRoute
	routeOn *target // where countRoute counted route
	target  *target // set by countRoute
	epoch   uint64  // the target's drain epoch when attached
	// trying is the route serving the invocation (serveSSH), counted
	// for it if it ends uncounted; noTarget: counted without a target.
	trying   string
	noTarget bool

	entry *journal.Entry // nil-safe: nil records nothing
	// noStdinCapture keeps stdin out of the journal; set before accept.
	noStdinCapture bool
	// outputGone is closed when the shim could not write stdout
	// (wire.OutputClosed): stdout is dropped from then on. Made on first
	// use (outputGoneChan): a session's output may be relayed before
	// accept starts the shim's reader.
	outputGone               chan struct{}
	outputGoneMade, goneOnce sync.Once
	secrets                  secretSink
	// sawSecret: a password was typed (secrets learnt one).
	sawSecret atomic.Bool
}

// secretSink learns the passwords typed, to mask them (the journal). It
// keeps no copy: the caller may overwrite the slice afterwards.
type secretSink interface{ AddSecret([]byte) }

// secretNoter passes secrets to sink, noting that one was seen.
type secretNoter struct {
	sink secretSink
	saw  *atomic.Bool
}

func (n secretNoter) AddSecret(b []byte) {
	n.saw.Store(true)
	n.sink.AddSecret(b)
}

// where returns the invocation's target label and route, once known.
func (iv *invocation) where() (target, route string) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if iv.target != nil {
		target = iv.target.label
	}
	return target, iv.route
}

func (iv *invocation) send(t wire.Type, p []byte) error {
	iv.wmu.Lock()
	defer iv.wmu.Unlock()
	if iv.hello.Front && !iv.handedOver && iv.handovers != nil {
		if why := frontHandover(t, p, iv.hello.StdinTTY); why != "" {
			iv.handedOver = true
			iv.handovers.add(why)
		}
	}
	return wire.Write(iv.conn, t, p)
}

// stdout and stderr return writers that frame data to the shim.
func (iv *invocation) stdout() io.Writer { return frameWriter{iv, wire.Stdout} }
func (iv *invocation) stderr() io.Writer { return frameWriter{iv, wire.Stderr} }

type frameWriter struct {
	iv *invocation
	t  wire.Type
}

func (w frameWriter) Write(p []byte) (int, error) {
	if w.t == wire.Stdout && w.iv.outputClosed() {
		return len(p), nil
	}
	for off := 0; off < len(p); {
		n := min(len(p)-off, 32<<10)
		if err := w.iv.send(w.t, p[off:off+n]); err != nil {
			return off, err
		}
		off += n
	}
	w.iv.bytesOut.Add(int64(len(p)))
	if w.t == wire.Stdout {
		w.iv.entry.AppendStdout(p)
	} else {
		w.iv.entry.AppendStderr(p)
	}
	return len(p), nil
}

// errorf writes an OpenSSH-style message line (CRLF, as ssh's logger
// does on stderr).
func (iv *invocation) errorf(format string, args ...any) {
	_, _ = fmt.Fprintf(iv.stderr(), format+"\r\n", args...)
}

// Notify implements sshclient.Notifier: messages ssh prints while it
// connects (already filtered by LogLevel, line endings included).
func (iv *invocation) Notify(text string) {
	_, _ = io.WriteString(iv.stderr(), text)
}

var _ sshclient.Notifier = (*invocation)(nil)

func (iv *invocation) exit(code int) {
	_ = iv.send(wire.Exit, wire.ExitPayload(code))
}

func (iv *invocation) fallback(reason string) {
	iv.countUnrouted(routeFallback)
	if iv.reg != nil {
		iv.reg.countFallback(reason)
	}
	iv.entry.SetRoute(routeFallback)
	iv.entry.HideCommand()
	iv.entry.AppendStderr([]byte("ansible-bridge: handed to the real " + iv.hello.Prog + ": " + reason + "\n"))
	_ = iv.send(wire.Fallback, []byte(reason))
}

// countUnrouted counts, for status, an invocation no route counted (a
// become step whose client was killed at sudo's password prompt, a
// failed login, a fallback): on its target, in the route serving it
// (trying), or outcome; without a target, by outcome (the route serving
// it, or "failed") in the daemon's row. Each invocation is counted once:
// invocations = routes (but mux) + that row.
func (iv *invocation) countUnrouted(outcome string) {
	iv.mu.Lock()
	counted, t := iv.route != "" || iv.noTarget, iv.target
	if outcome == "" {
		outcome = cmp.Or(iv.trying, outcomeFailed)
	}
	if !counted && t == nil && iv.reg != nil {
		iv.noTarget = true
	}
	iv.mu.Unlock()
	switch {
	case counted || iv.reg == nil:
	case t != nil:
		t.countRoute(iv, outcome)
	default:
		iv.reg.countNoTarget(outcome, 1)
	}
}

// outcomeFailed counts an invocation that ended before any route took
// it (a configuration error ssh reports, a login that failed).
const outcomeFailed = "failed"

// handBack hands a transfer the bridge does not serve in full to the
// real scp or sftp, which reaches the target through the shim's ssh: over
// the daemon's connection, as it would over an ssh master. input is what
// the daemon read of stdin (all of it, to its end; nil for none), for the
// real binary to read again.
func (iv *invocation) handBack(input []byte, reason string) {
	if input != nil {
		_ = iv.send(wire.Replay, input)
	}
	_ = iv.send(wire.ViaBridge, nil)
	iv.fallback(reason)
}

// Prompt implements sshclient.Prompter. It runs before accept, while no
// other goroutine reads the shim's frames.
func (iv *invocation) Prompt(ctx context.Context, text string, echo bool) (string, error) {
	b, err := iv.prompt(ctx, text, echo)
	if err != nil {
		return "", err
	}
	// The ssh client takes strings (they cannot be overwritten).
	answer := string(b)
	clear(b)
	return answer, nil
}

// PromptSecret asks without echo and returns the answer as bytes the
// caller overwrites once used (a key's passphrase).
func (iv *invocation) PromptSecret(ctx context.Context, text string) ([]byte, error) {
	return iv.prompt(ctx, text, false)
}

func (iv *invocation) prompt(ctx context.Context, text string, echo bool) ([]byte, error) {
	if iv.stdin != nil {
		return nil, errors.New("prompt after the session started")
	}
	if !iv.hello.CanPrompt {
		return nil, errors.New("no terminal to prompt on")
	}
	p, _ := json.Marshal(wire.PromptMsg{Text: text, Echo: echo})
	if err := iv.send(wire.Prompt, p); err != nil {
		return nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := wire.Read(iv.conn)
		if err != nil {
			// The shim is gone (sshpass kills it on a second prompt):
			// stop logging in rather than answer for it.
			iv.cancel()
			return nil, fmt.Errorf("read prompt reply: %w", err)
		}
		switch f.Type {
		case wire.PromptReply:
			if !echo && iv.secrets != nil {
				iv.secrets.AddSecret(f.Payload) // a password
			}
			return f.Payload, nil
		case wire.PromptFail:
			return nil, fmt.Errorf("prompt failed: %s", f.Payload)
		case wire.Signal:
			iv.cancel()
			return nil, fmt.Errorf("interrupted by SIG%s", f.Payload)
		case wire.WindowSize:
		default:
			return nil, fmt.Errorf("unexpected frame %q while prompting", f.Type)
		}
	}
}

// StartProxy implements sshclient.ProxyStarter: the shim starts the
// ProxyCommand as ssh would, as its child (wire.ProxyCommand), and hands
// over the pipes. The daemon never waits for it: the shim's child, it is
// reaped by init once the shim is gone, as ssh's proxy is after
// ControlPersist's fork. Like a prompt it runs before accept.
func (iv *invocation) StartProxy(ctx context.Context, shell, command string, stderrNull bool) (*os.File, *os.File, func(), error) {
	uc, ok := iv.conn.(*net.UnixConn)
	if !ok || iv.stdin != nil {
		return nil, nil, nil, sshclient.ErrProxyHere
	}
	p, _ := json.Marshal(wire.ProxyMsg{Shell: shell, Command: command, StderrNull: stderrNull})
	if err := iv.send(wire.ProxyCommand, p); err != nil {
		return nil, nil, nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, err
		}
		f, fds, err := wire.ReadFDs(uc)
		if err != nil {
			iv.cancel()
			return nil, nil, nil, fmt.Errorf("read proxy command reply: %w", err)
		}
		if f.Type == wire.ProxyStarted {
			return iv.proxyStarted(f.Payload, fds)
		}
		closeFDs(fds)
		switch f.Type {
		case wire.Signal:
			iv.cancel()
			return nil, nil, nil, fmt.Errorf("interrupted by SIG%s", f.Payload)
		case wire.WindowSize:
		default:
			return nil, nil, nil, fmt.Errorf("unexpected frame %q while starting the proxy command", f.Type)
		}
	}
}

// proxyStarted takes the shim's ProxyStarted: pid, then the read end of
// the proxy's stdout, the write end of its stdin and maybe its pidfd.
func (iv *invocation) proxyStarted(payload []byte, fds []int) (*os.File, *os.File, func(), error) {
	if len(payload) != 4 || len(fds) < 2 || len(fds) > 3 {
		closeFDs(fds)
		return nil, nil, nil, fmt.Errorf("malformed proxy command reply (%d bytes, %d descriptors)", len(payload), len(fds))
	}
	pid := int(binary.BigEndian.Uint32(payload))
	for _, fd := range fds[:2] {
		_ = syscall.SetNonblock(fd, true) // pollable: deadlines work
	}
	r, w := os.NewFile(uintptr(fds[0]), "proxy stdout"), os.NewFile(uintptr(fds[1]), "proxy stdin")
	hangup := func() {}
	if len(fds) == 3 {
		// By pidfd, as ssh_kill_proxy_command does by pid: a pid used
		// again (the proxy gone and reaped) is not signalled.
		pidfd := fds[2]
		hangup = func() {
			_ = unix.PidfdSendSignal(pidfd, syscall.SIGHUP, nil, 0)
			_ = unix.Close(pidfd)
		}
	}
	iv.log.WithField("pid", pid).Debug("proxy command started by the shim")
	return r, w, hangup, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}

var (
	_ sshclient.Prompter       = (*invocation)(nil)
	_ sshclient.SecretPrompter = (*invocation)(nil)
	_ sshclient.ProxyStarter   = (*invocation)(nil)
)

// accept tells the shim to start sending stdin and starts the goroutine
// that demultiplexes its frames. mode "raw" asks the shim to put its
// terminal in raw mode (a PTY session on an interactive terminal).
func (iv *invocation) accept(mode string) error {
	iv.listen()
	iv.accepted = true
	return iv.send(wire.Accept, []byte(mode))
}

// listen starts the goroutine that reads the shim's frames, once. Before
// accept the shim sends no stdin, only signals and window sizes.
func (iv *invocation) listen() {
	if iv.gone != nil {
		return
	}
	r, w := io.Pipe()
	iv.stdin = r
	iv.signals = make(chan string, 4)
	iv.winch = make(chan [2]int, 4)
	iv.gone = make(chan struct{})
	go iv.readShim(w)
}

// hangup returns a channel closed when the shim goes away: killed, or
// exiting on a signal (it tells the daemon, then exits). It reads the
// shim's frames from then on, so no prompt may follow.
func (iv *invocation) hangup() <-chan struct{} {
	iv.listen()
	return iv.gone
}

func (iv *invocation) readShim(w *io.PipeWriter) {
	defer close(iv.gone)
	stdinOpen := true
	for {
		var buf *[]byte
		var payload []byte
		f, err := wire.ReadWith(iv.conn, func(n int) []byte {
			if buf = stdinBuf(n); buf == nil {
				payload = make([]byte, n)
			} else {
				payload = (*buf)[:n]
			}
			return payload
		})
		if err == nil {
			err = iv.shimFrame(f, w, &stdinOpen)
		}
		// Read or dropped, whole or cut short, a frame may hold a password
		// or a no_log task's wrapper; a reader has its copy (a pipe hands
		// over), and a pooled buffer goes back empty.
		clear(payload)
		if buf != nil {
			stdinBufs.Put(buf)
		}
		if err != nil {
			if stdinOpen {
				w.CloseWithError(errShimGone)
			}
			return
		}
	}
}

// stdinBufs hold the shim's larger frames (its stdin, in chunks of up to
// 256 KiB) while the daemon hands them on: a module's wrapper came in a
// new buffer each task, a fleet's largest garbage.
var stdinBufs = sync.Pool{New: func() any { return new([]byte) }}

// stdinBuf is a buffer of stdinBufs with room for n bytes, or nil for a
// frame small enough, or too large, to allocate as it comes.
func stdinBuf(n int) *[]byte {
	if n < 4<<10 || n > 256<<10 {
		return nil
	}
	b := stdinBufs.Get().(*[]byte)
	if cap(*b) < n {
		*b = make([]byte, n, max(n, 64<<10))
	}
	return b
}

// shimFrame handles one frame the shim sent once the invocation was
// accepted (readShim clears its payload after); an error means the shim
// is to be taken as gone.
func (iv *invocation) shimFrame(f wire.Frame, w *io.PipeWriter, stdinOpen *bool) error {
	switch f.Type {
	case wire.Stdin:
		if *stdinOpen {
			iv.bytesIn.Add(int64(len(f.Payload)))
			if !iv.noStdinCapture {
				iv.entry.AppendStdin(f.Payload)
			}
			if _, err := w.Write(f.Payload); err != nil {
				*stdinOpen = false // the session stopped reading
			}
		}
	case wire.OutputClosed:
		iv.goneOnce.Do(func() { close(iv.outputGoneChan()) })
	case wire.StdinEOF:
		if *stdinOpen {
			w.Close()
			*stdinOpen = false
		}
	case wire.Signal:
		select {
		case iv.signals <- string(f.Payload):
		default:
		}
	case wire.WindowSize:
		if rows, cols, err := wire.Size(f.Payload); err == nil {
			select {
			case iv.winch <- [2]int{rows, cols}:
			default:
			}
		}
	default:
		iv.log.WithField("frame", string(f.Type)).Warn("unexpected frame from shim; hanging up")
		return errShimGone
	}
	return nil
}

var errShimGone = errors.New("shim disconnected")

// watchHangup returns ctx, cancelled if the shim hangs up before stop:
// killed while its login runs, where ssh's login dies with it. It polls
// for the peer's close without reading, so prompts read on.
func (iv *invocation) watchHangup(ctx context.Context) (context.Context, func()) {
	sc, ok := iv.conn.(syscall.Conn)
	if !ok {
		return ctx, func() {}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		// A poll that does not block, on a ticker: a blocked one would
		// hold an OS thread per login, which Go never gives back.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			hup := false
			_ = raw.Control(func(fd uintptr) {
				fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
				if n, _ := unix.Poll(fds, 0); n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0 {
					hup = true
				}
			})
			if hup {
				iv.log.Info("shim hung up while logging in: login abandoned")
				cancel()
				return
			}
		}
	}()
	return ctx, func() { close(done); cancel() }
}

// stopStdin is ssh's chan_rcvd_eow: the shim stops reading its stdin and
// leaves it open, and what it sent already is dropped.
func (iv *invocation) stopStdin() {
	_ = iv.send(wire.StopStdin, nil)
	iv.stdin.CloseWithError(errStdinStopped)
}

// outputGoneChan is closed once the shim could not write stdout.
func (iv *invocation) outputGoneChan() chan struct{} {
	iv.outputGoneMade.Do(func() { iv.outputGone = make(chan struct{}) })
	return iv.outputGone
}

// outputClosed tells whether the shim could not write stdout.
func (iv *invocation) outputClosed() bool {
	select {
	case <-iv.outputGoneChan():
		return true
	default:
		return false
	}
}

// getenv looks a variable up in the shim's environment.
func (iv *invocation) getenv(key string) string {
	prefix := key + "="
	for _, kv := range iv.hello.Env {
		if strings.HasPrefix(kv, prefix) {
			return kv[len(prefix):]
		}
	}
	return ""
}

// clientEnv is what sshclient needs to know of the shim's world: its
// user and home are the passwd entry's, as ssh reads them (the daemon
// runs as the shim's uid), never $USER or $HOME. A uid with no entry is
// a *fallbackError: ssh refuses it ("No user exists for uid N"), and so
// the real ssh does.
func (iv *invocation) clientEnv() (sshclient.Env, error) {
	pw, err := passwdEntry()
	if err != nil {
		return sshclient.Env{}, &fallbackError{"no passwd entry for the uid: ssh refuses to run"}
	}
	return sshclient.Env{
		Home:     pw.HomeDir,
		User:     pw.Username,
		Cwd:      iv.hello.Cwd,
		AuthSock: iv.getenv("SSH_AUTH_SOCK"),
		Environ:  iv.hello.Env,
		Umask:    iv.hello.Umask,
	}, nil
}

// passwdEntry is the daemon's uid's passwd entry, as getpwuid gives it:
// getent asks NSS (LDAP and sssd users too), once. Go's user.Current
// and LookupId make one up from $USER and $HOME where there is none.
var passwdEntry = sync.OnceValues(func() (*user.User, error) {
	uid := strconv.Itoa(os.Getuid())
	out, err := exec.Command("getent", "passwd", uid).Output()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return nil, fmt.Errorf("no passwd entry for uid %s", uid) // getent's 2: not found
	case err != nil:
		return user.Current() // no getent: Go's own lookup
	}
	f := strings.Split(strings.TrimRight(string(out), "\n"), ":")
	if len(f) < 7 {
		return nil, fmt.Errorf("getent passwd %s: %q", uid, out)
	}
	return &user.User{Username: f[0], Uid: f[2], Gid: f[3], Name: f[4], HomeDir: f[5]}, nil
})
