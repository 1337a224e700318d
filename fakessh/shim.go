package fakessh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// DisableEnv set to 1 makes every shim exec the real binary.
const DisableEnv = "ANSIBLE_BRIDGE_DISABLE"

// RequireEnv set to 1 is strict mode: where the shim would run the real
// binary for the bridge's own reasons (socket directory unusable, daemon
// cannot start or answer, an invocation too large for the protocol), it
// fails instead, with one line on stderr and exit 255, which Ansible
// reports as UNREACHABLE with that line. Fallbacks that OpenSSH's
// contract requires (an option or a shape the bridge does not serve,
// DisableEnv, what the daemon hands back) still run the real binary.
const RequireEnv = "ANSIBLE_BRIDGE_REQUIRE"

// Main runs the shim for prog ("ssh", "scp" or "sftp") with argv (without
// argv[0]) and returns its exit status. When the bridge cannot serve the
// invocation it execs the real binary instead and does not return.
func Main(prog string, argv []string) int {
	// What the caller left ignored stays so for what ssh does before its
	// session, and for the real binary exec'd. Go keeps an inherited
	// SIG_IGN for SIGINT and SIGHUP only; SIGQUIT's and SIGTERM's the C
	// front tells.
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGHUP} {
		if signal.Ignored(sig) {
			ignoredAtStart = append(ignoredAtStart, sig)
		}
	}
	for _, name := range strings.Fields(os.Getenv(IgnoredSignalsEnv)) {
		sig := map[string]syscall.Signal{"QUIT": syscall.SIGQUIT, "TERM": syscall.SIGTERM}[name]
		if sig != 0 {
			callerIgnoresQuit = callerIgnoresQuit || sig == syscall.SIGQUIT
			ignoredAtStart = append(ignoredAtStart, sig)
			signal.Ignore(sig)
		}
	}
	os.Unsetenv(IgnoredSignalsEnv)
	os.Unsetenv(BatchOpenEnv)
	if spec, ok := os.LookupEnv(ResumeEnv); ok {
		// The C front closed what ssh closes before it dialled.
		os.Unsetenv(ResumeEnv)
		return resume(prog, argv, spec)
	}
	if prog == "ssh" {
		CloseInherited()
	}
	growStdinPipe()
	if os.Getenv(DisableEnv) == "1" {
		return fallback(prog, argv, DisableEnv+"=1")
	}
	hello, reason := NewHello(prog, argv)
	if reason != "" {
		return fallback(prog, argv, reason)
	}
	sock := wire.SocketPath()
	if err := wire.CheckSocketPath(sock); err != nil {
		// A setting that cannot work anywhere: said at once, strict or
		// not, rather than every call falling back unseen.
		fmt.Fprintf(os.Stderr, "ansible-bridge: %s: %v\r\n", prog, err)
		return ExitSSHError
	}
	hello.describeProcess()
	payload, err := json.Marshal(hello)
	if err != nil {
		return bridgeFallback(prog, argv, "cannot encode the invocation: "+err.Error())
	}
	if len(payload) > wire.MaxPayload {
		// OpenSSH has no such limit; the daemon takes no larger frame.
		return bridgeFallback(prog, argv, fmt.Sprintf("argv and environment too large for the bridge (%d bytes, at most %d)", len(payload), wire.MaxPayload))
	}
	ctx, cancel := context.WithTimeout(context.Background(), daemonStartTimeout)
	conn, err := DialDaemon(ctx, sock)
	cancel()
	if err != nil {
		return bridgeFallback(prog, argv, "bridge daemon unavailable: "+err.Error())
	}
	defer conn.Close()
	code, fb, err := converse(conn, prog, payload, hello.StdinTTY, fresh)
	return finish(prog, argv, code, fb, err)
}

// finish ends an invocation the daemon answered: with its exit status, or
// with the real binary where it declined.
func finish(prog string, argv []string, code int, fb *declined, err error) int {
	if fb != nil {
		if fb.input != nil {
			if err := replayStdin(fb.input); err != nil {
				fmt.Fprintf(os.Stderr, "ansible-bridge: %s: %v\r\n", prog, err)
				return ExitSSHError
			}
		}
		if ssh := siblingSSH(); fb.viaBridge && ssh != "" {
			return execReal(prog, append([]string{"-S", ssh}, argv...), DaemonReason+fb.reason, false)
		}
		return fallback(prog, argv, DaemonReason+fb.reason)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge: %s: %v\r\n", prog, err)
		return ExitSSHError
	}
	return code
}

// declined is the daemon's answer that the real binary should serve the
// invocation: why, and the input it consumed, if any (nil: none).
type declined struct {
	reason string
	input  []byte
	// viaBridge: the real scp or sftp reaches the target through the
	// shim's ssh, multiplexed over the daemon's connection as it would
	// be over an ssh master.
	viaBridge bool
}

// progress is how far a conversation got before this process took it
// on: the C front (fakessh/front) hands it over where it stops.
type progress int

const (
	fresh        progress = iota // nothing sent
	helloSent                    // the daemon has the hello
	stdinPumping                 // the daemon accepted; stdin is not all sent
	stdinSent                    // the daemon accepted and has all of stdin
)

// converse runs one invocation over conn, from where it stands (payload:
// the hello to send first, if fresh; stdinTTY: stdin is a terminal the
// daemon may ask to make raw). It returns the exit status, or why the
// daemon declined it: before any input was consumed, or with all of it
// handed back.
func converse(conn net.Conn, prog string, payload []byte, stdinTTY bool, from progress) (code int, fb *declined, err error) {
	var wmu sync.Mutex
	send := func(t wire.Type, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return wire.Write(conn, t, p)
	}
	if from == fresh {
		if err := send(wire.Hello, payload); err != nil {
			return 0, nil, fmt.Errorf("send hello: %w", err)
		}
	}
	var restore func()
	var replay []byte
	via := false
	// Accepted, the invocation is a session of the daemon's connection.
	accepted := from != fresh && from != helloSent
	defer func() {
		if restore != nil {
			restore()
		}
	}()
	// Signals are forwarded from the hello on, and caught even where the
	// caller ignores them (Ansible's workers ignore SIGINT), as ssh as a
	// mux client catches them; but ssh's mux client leaves SIGQUIT as it
	// found it (mux.c): ignored, or caught here only to die of it. They
	// are never unwatched: the process exits right after, and
	// signal.Stop would wait for the signal loop.
	var signalLine atomic.Pointer[[]byte]
	sigs := make(chan os.Signal, 8)
	watched := []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH}
	if prog != "ssh" || !callerIgnoresQuit {
		watched = append(watched, syscall.SIGQUIT)
	}
	signal.Notify(sigs, watched...)
	var acceptedFlag atomic.Bool
	acceptedFlag.Store(accepted)
	go forwardSignals(prog, sigs, send, acceptedFlag.Load, func() {
		if restore != nil {
			restore()
		}
		if line := signalLine.Load(); line != nil {
			_, _ = os.Stderr.Write(*line)
		}
	})
	var stdinStopped atomic.Bool // the daemon's StopStdin
	if from == stdinPumping {
		go pumpStdin(send, &stdinStopped)
	}
	// ssh ignores SIGPIPE: a closed stdout is an error it handles. (A
	// handler, unlike SIG_IGN, is not passed on to a program exec'd.)
	stdoutFailed := false
	if prog == "ssh" {
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	}
	for {
		f, err := wire.Read(conn)
		if err != nil && accepted {
			// The daemon, ssh's master here, is gone under the
			// session: as mux.c's mux_client_request_session, the
			// terminal back, "Shared connection to HOST closed." for
			// a session on a terminal (the daemon's OnSignal line),
			// nothing otherwise, and 255.
			if restore != nil {
				restore()
				restore = nil
			}
			if line := signalLine.Load(); line != nil {
				_, _ = os.Stderr.Write(*line)
			}
			return ExitSSHError, nil, nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("connection to the bridge daemon lost")
			}
			return 0, nil, err
		}
		switch f.Type {
		case wire.Replay:
			replay = f.Payload
		case wire.ViaBridge:
			via = true
		case wire.Fallback:
			return 0, &declined{reason: string(f.Payload), input: replay, viaBridge: via}, nil
		case wire.Accept:
			accepted = true
			acceptedFlag.Store(true)
			if inputComplete(0) {
				// Reads cannot block: the input goes at once, in line
				// (a pipelined module waits for it).
				pumpStdin(send, &stdinStopped)
				break
			}
			if string(f.Payload) == "raw" && stdinTTY {
				if st, err := term.MakeRaw(int(os.Stdin.Fd())); err == nil {
					restore = func() { _ = term.Restore(int(os.Stdin.Fd()), st) }
				}
			}
			go pumpStdin(send, &stdinStopped)
		case wire.StopStdin:
			// ssh's chan_rcvd_eow: stdin is read no more, and stays
			// open (a writer blocks, and gets EPIPE once ssh exits).
			stdinStopped.Store(true)
		case wire.Stdout:
			if stdoutFailed {
				break
			}
			if _, err := os.Stdout.Write(f.Payload); err != nil {
				if prog != "ssh" {
					return 0, nil, fmt.Errorf("write stdout: %w", err)
				}
				// ssh's chan_write_failed: silent; the rest is dropped,
				// and the daemon tells the server.
				stdoutFailed = true
				_ = send(wire.OutputClosed, nil)
			}
		case wire.Stderr:
			_, _ = os.Stderr.Write(f.Payload)
		case wire.OnSignal:
			signalLine.Store(&f.Payload)
		case wire.Prompt:
			answerPrompt(f.Payload, send)
		case wire.ProxyCommand:
			if err := startProxy(conn, &wmu, f.Payload); err != nil {
				return 0, nil, err
			}
		case wire.Exit:
			code, err := wire.ExitCode(f.Payload)
			return code, nil, err
		default:
			return 0, nil, fmt.Errorf("unexpected frame %q from daemon", f.Type)
		}
	}
}

// stdinPipeSize is what a piped stdin is grown to: more than a pipelined
// module (an AnsiballZ wrapper is ~150 KB), and the default limit for
// unprivileged users (/proc/sys/fs/pipe-max-size).
const stdinPipeSize = 1 << 20

// growStdinPipe enlarges a piped stdin, first thing: Ansible writes a
// pipelined module in one write and, with the default 64 KiB pipe, waits
// for the shim to drain each 64 KiB before it writes on, a wakeup of each
// side per chunk. Grown, the write completes while the shim talks to the
// daemon. A pipe that cannot grow (the user's pipe quota) stays as it is.
func growStdinPipe() {
	if isPipe(0) {
		_, _ = unix.FcntlInt(0, unix.F_SETPIPE_SZ, stdinPipeSize)
	}
}

// replayStdin makes input the process's stdin, for the real binary the
// shim execs next: the daemon read it to the end and handed it back. It
// is written whole into a pipe grown to hold it, so no writer has to
// outlive the exec.
func replayStdin(input []byte) error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("replay stdin: %w", err)
	}
	defer w.Close()
	defer r.Close()
	if size, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, len(input)); err != nil || size < len(input) {
		if len(input) > 64<<10 {
			return fmt.Errorf("replay stdin: a pipe cannot hold %d bytes", len(input))
		}
	}
	if _, err := w.Write(input); err != nil {
		return fmt.Errorf("replay stdin: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("replay stdin: %w", err)
	}
	if err := unix.Dup2(int(r.Fd()), 0); err != nil {
		return fmt.Errorf("replay stdin: %w", err)
	}
	return nil
}

func isPipe(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO
}

// inputComplete reports whether fd is a pipe whose writers have all
// closed it (Ansible writes a pipelined module, or an sftp batch, and
// closes), holding at most stdinPipeSize bytes: reading it to the end
// cannot block and is soon done. A regular file is not taken: it may be
// large, and the shim reads no frame from the daemon while it pumps.
func inputComplete(fd int) bool {
	return isPipe(fd) && pipeDone(fd, 0, stdinPipeSize)
}

// pipeDone waits up to wait for every writer of the pipe fd to close it,
// without reading from it, and reports whether they did, leaving at most
// limit bytes to read.
func pipeDone(fd int, wait time.Duration, limit int) bool {
	deadline := time.Now().Add(wait)
	for {
		fds := []unix.PollFd{{Fd: int32(fd)}} // no events: only a hangup or an error wakes it
		n, err := unix.Poll(fds, int(max(time.Until(deadline), 0)/time.Millisecond))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil, n == 0, fds[0].Revents&unix.POLLHUP == 0:
			return false
		}
		queued, err := unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD
		return err == nil && queued <= limit
	}
}

// pumpStdin sends stdin to the daemon up to its end, or until stopped
// (what a read still pending brings is dropped).
func pumpStdin(send func(wire.Type, []byte) error, stopped *atomic.Bool) {
	buf := make([]byte, 256<<10)
	for !stopped.Load() {
		n, err := os.Stdin.Read(buf)
		if stopped.Load() {
			return
		}
		if n > 0 {
			if send(wire.Stdin, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = send(wire.StdinEOF, nil)
			return
		}
	}
}

// forwardSignals passes window changes on, and tells the daemon of a
// terminating signal. ssh then calls atExit (the terminal back, and what
// ssh prints then) and exits 255 at once: sshpass, for one, stops a
// wrong-password login with SIGHUP and expects ssh to be gone. scp and
// sftp wait for the daemon to stop the copy and send the exit status,
// stopWait at most (sftp's SIGINT may only abandon a command).
func forwardSignals(prog string, sigs <-chan os.Signal, send func(wire.Type, []byte) error, accepted func() bool, atExit func()) {
	var deadline *time.Timer
	for s := range sigs {
		if s == syscall.SIGWINCH {
			if cols, rows, err := term.GetSize(int(os.Stdin.Fd())); err == nil {
				_ = send(wire.WindowSize, wire.SizePayload(rows, cols))
			}
			continue
		}
		if prog == "ssh" && !accepted() {
			// ssh logging in has no handlers yet: a signal its caller
			// ignores does nothing, another kills it (its prompt's
			// terminal put back first), and the daemon, seeing the shim
			// go, abandons the login.
			if ignoredByCaller(s) {
				continue
			}
			if restore := promptRestore.Load(); restore != nil {
				(*restore)()
			}
			atExit()
			dieOf(s.(syscall.Signal))
		}
		if prog == "ssh" && s == syscall.SIGQUIT {
			dieOf(syscall.SIGQUIT) // the daemon sees the shim go
		}
		_ = send(wire.Signal, []byte(unixSignalName(s)))
		switch {
		case prog == "ssh":
			atExit()
			os.Exit(ExitSSHError)
		case s == syscall.SIGQUIT:
			atExit()
			dieOf(syscall.SIGQUIT) // as scp and sftp do
		case deadline == nil && !(prog == "sftp" && s == syscall.SIGINT):
			deadline = time.AfterFunc(stopWait, func() { atExit(); os.Exit(1) })
		}
	}
}

// callerIgnoresQuit: the caller left SIGQUIT ignored (IgnoredSignalsEnv).
var callerIgnoresQuit bool

// ignoredAtStart: the signals the caller left ignored.
var ignoredAtStart []os.Signal

func ignoredByCaller(sig os.Signal) bool {
	for _, s := range ignoredAtStart {
		if s == sig {
			return true
		}
	}
	return false
}

// promptRestore, while a prompt has the terminal's echo off, puts it
// back (readpassphrase does on a signal, before it dies of it).
var promptRestore atomic.Pointer[func()]

// stopWait bounds how long scp and sftp wait for the daemon's exit
// status after a signal they die of (STOP_WAIT_MS in the C front).
const stopWait = 2 * time.Second

func unixSignalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGQUIT:
		return "QUIT"
	}
	return s.String()
}

// answerPrompt asks as ssh does: an askpass program where OpenSSH's
// read_passphrase would run one (ansible-core 2.19+ passes passwords
// that way), otherwise the controlling terminal, where sshpass and
// humans answer.
func answerPrompt(payload []byte, send func(wire.Type, []byte) error) {
	var p wire.PromptMsg
	if err := json.Unmarshal(payload, &p); err != nil {
		_ = send(wire.PromptFail, []byte(err.Error()))
		return
	}
	var answer string
	var err error
	if use, program := askpassProgram(os.Getenv, haveTTY()); !use {
		answer, err = promptTTY(p)
	} else if program != "" {
		answer, err = runAskpass(program, p.Text)
	} else {
		err = errors.New("no terminal, and askpass not allowed (no DISPLAY)")
	}
	if err != nil {
		_ = send(wire.PromptFail, []byte(err.Error()))
		return
	}
	_ = send(wire.PromptReply, []byte(answer))
}

// promptTTY asks on the controlling terminal byte for byte as OpenSSH's
// read_passphrase and readpassphrase(3) do: "\r", echo off (TCSAFLUSH,
// which drops type-ahead) before the prompt so that a fast answer
// (sshpass, expect) is not echoed back, the answer up to "\n" or "\r",
// then "\n" whenever echo was off while reading (also for an echoed
// prompt on a terminal whose echo was off already), and the settings
// back only if they were changed.
func promptTTY(p wire.PromptMsg) (string, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("open /dev/tty: %w", err)
	}
	defer tty.Close()
	fd := int(tty.Fd())
	_, _ = tty.WriteString("\r")
	oterm, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", fmt.Errorf("tcgetattr /dev/tty: %w", err)
	}
	t := *oterm
	if !p.Echo {
		t.Lflag &^= unix.ECHO | unix.ECHONL
	}
	_ = unix.IoctlSetTermios(fd, unix.TCSETSF, &t)
	if t != *oterm {
		restore := func() { _ = unix.IoctlSetTermios(fd, unix.TCSETSF, oterm) }
		promptRestore.Store(&restore)
		defer promptRestore.Store(nil)
	}
	if _, err := tty.WriteString(p.Text); err != nil {
		return "", err
	}
	var line []byte
	buf := make([]byte, 1)
	for {
		n, rerr := tty.Read(buf)
		if n == 1 && buf[0] != '\n' && buf[0] != '\r' {
			line = append(line, buf[0])
			continue
		}
		if n == 0 && rerr == nil {
			continue
		}
		err = rerr
		break
	}
	if t.Lflag&unix.ECHO == 0 {
		_, _ = tty.WriteString("\n")
	}
	if t != *oterm {
		_ = unix.IoctlSetTermios(fd, unix.TCSETSF, oterm)
	}
	if err == io.EOF && len(line) > 0 {
		err = nil
	}
	return string(line), err
}

// daemonStartTimeout bounds how long a shim waits for a daemon to come up
// before it falls back to the real binary.
const daemonStartTimeout = 10 * time.Second
