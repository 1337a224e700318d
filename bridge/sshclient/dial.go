package sshclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// proxyRemote is how OpenSSH names the peer of a ProxyCommand (and so of
// a ProxyJump) connection in its messages.
const proxyRemote = "UNKNOWN port 65535"

// Dial connects to s, verifies the host key and authenticates, like
// OpenSSH 9.2's ssh would. Prompts go to p (which may be nil: then every
// prompt gets an empty answer); if p also implements Notifier it receives
// the non-fatal stderr messages as they happen. Errors are *ConnError
// whose Msg is what ssh prints; a canceled ctx aborts with an empty Msg.
func Dial(ctx context.Context, s *Settings, p Prompter, log logrus.FieldLogger) (*Client, error) {
	return dial(ctx, s, p, log)
}

// Client is an authenticated connection and the host key it was accepted
// with.
type Client struct {
	*ssh.Client
	HostKey ssh.PublicKey
	hostIP  string

	hostKeys *hostKeyUpdater // nil: UpdateHostKeys does not run
}

// HostKeysSettled is closed unless UpdateHostKeys is at work on
// known_hosts: the daemon waits for it as a session ends, since ssh has
// written the file by then (sshd sends its keys, and answers their proof,
// before the session's exit status).
func (c *Client) HostKeysSettled() <-chan struct{} {
	if c.hostKeys == nil || !c.hostKeys.started.Load() {
		return closedChan
	}
	return c.hostKeys.done
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func dial(ctx context.Context, s *Settings, p Prompter, log logrus.FieldLogger) (*Client, error) {
	log = log.WithField("target", s.String())
	for _, u := range s.Unsupported {
		log.WithField("setting", u).Warn("ssh_config setting ignored")
	}
	rep := newReporter(p, s.LogLevel, log)
	defer rep.detach()

	tr, err := openTransport(ctx, s, p, rep, log)
	if err != nil {
		return nil, err
	}
	conn := tr.conn
	if s.Wire != nil {
		conn = s.Wire.Wrap(conn)
	}
	bc := newBannerConn(conn, s.ConnectTimeout)
	if pc, ok := tr.conn.(*proxyConn); ok {
		bc.readerGone = pc.readerGone
	}
	stop := context.AfterFunc(ctx, func() { bc.Close() })

	hk := newHostKeyChecker(ctx, s, p, rep)
	hk.hostIP = tr.hostIP
	auth := newAuthState(ctx, s, p, rep, log, hk)
	defer auth.close()

	cfg := &ssh.ClientConfig{
		Config: ssh.Config{
			Ciphers:      s.Ciphers,
			MACs:         s.MACs,
			KeyExchanges: s.KexAlgorithms,
		},
		User:              s.User,
		HostKeyCallback:   hk.callback,
		HostKeyAlgorithms: s.HostKeyAlgorithms,
		BannerCallback: func(msg string) error {
			if rep.level >= lvlInfo {
				rep.raw(msg)
			}
			return nil
		},
		AuthCallback:  auth.callback,
		ClientVersion: clientVersion(),
	}
	if !s.HostKeyAlgorithmsExplicit {
		cfg.HostKeyAlgorithms = hostKeyAlgorithms(hk.entries, lookupName(s), s.HostKeyAlgorithms)
	}
	addr := net.JoinHostPort(s.HostName, strconv.Itoa(s.Port))
	c, chans, reqs, err := ssh.NewClientConn(bc, addr, cfg)
	stop()
	bc.stopTimer()
	if err != nil {
		bc.Close()
		tr.waitStderr()
		if tr.extra != nil {
			tr.extra()
		}
		ce := mapHandshakeError(ctx, err, s, bc, tr.remote, hk, auth)
		log.WithError(err).Debug("ssh handshake failed")
		return nil, ce
	}
	upd := newHostKeyUpdater(s, hk, log)
	var client *ssh.Client
	if upd != nil {
		// The first hostkeys-00@openssh.com is ours, and its proof
		// needs the client; filter refuses the others, as NewClient
		// would with a goroutine of its own.
		none := make(chan *ssh.Request)
		close(none)
		client = ssh.NewClient(c, chans, none)
		go upd.filter(reqs, client)
	} else {
		client = ssh.NewClient(c, chans, reqs)
	}
	if tr.extra != nil {
		go func() {
			_ = client.Wait()
			tr.extra()
		}()
	}
	log.Debug("ssh connection established")
	return &Client{Client: client, HostKey: hk.accepted, hostIP: tr.hostIP, hostKeys: upd}, nil
}

// transport is the byte stream under an SSH connection.
type transport struct {
	conn   net.Conn
	remote string // "127.0.0.1 port 22" or proxyRemote, for messages
	hostIP string // for the host key prompt
	extra  func() // closes what the stream depends on (a jump host)
	stderr <-chan struct{}
}

// waitStderr lets a ProxyCommand's last stderr output arrive before the
// final error message, as it would on a terminal.
func (t *transport) waitStderr() {
	if t.stderr == nil {
		return
	}
	select {
	case <-t.stderr:
	case <-time.After(500 * time.Millisecond):
	}
}

func openTransport(ctx context.Context, s *Settings, p Prompter, rep *reporter, log logrus.FieldLogger) (*transport, error) {
	switch {
	case s.Jump != nil:
		return dialJump(ctx, s, p, log)
	case s.ProxyCommand != "":
		return startProxyCommand(ctx, s, p, rep, log)
	}
	return dialTCP(ctx, s)
}

// kexClosed are the lines OpenSSH prints when the peer goes away before
// its banner.
func kexClosed(remote string) []msgLine {
	return []msgLine{
		errorLine("kex_exchange_identification: Connection closed by remote host"),
		fatalPacketLine("Connection closed by " + remote),
	}
}

// dialJump connects through the ProxyJump hop s.Jump (itself possibly
// jumping), using a direct-tcpip channel like "ssh -W".
func dialJump(ctx context.Context, s *Settings, p Prompter, log logrus.FieldLogger) (*transport, error) {
	hop := s.silentHop()
	jc, err := dial(ctx, hop, p, log.WithField("jump", hop.String()))
	if err != nil {
		var ce *ConnError
		if !errors.As(err, &ce) {
			ce = &ConnError{Err: err}
		}
		if ctx.Err() != nil {
			return nil, ce
		}
		if hop.stderrNull {
			ce = &ConnError{Err: ce.Err} // the hop's messages went to /dev/null
		}
		return nil, prefixed(ce, s.LogLevel, err, kexClosed(proxyRemote)...)
	}
	conn, err := jc.DialContext(ctx, "tcp", net.JoinHostPort(s.HostName, strconv.Itoa(s.Port)))
	if err != nil {
		jc.Close()
		if ctx.Err() != nil {
			return nil, &ConnError{Err: ctx.Err()}
		}
		var lines []msgLine
		var oce *ssh.OpenChannelError
		if errors.As(err, &oce) {
			sep := ""
			if oce.Message != "" {
				sep = ": "
			}
			lines = append(lines, errorLine(fmt.Sprintf("channel 0: open failed: %s%s%s", oce.Reason, sep, oce.Message)))
		}
		lines = append(lines, fatalLine("stdio forwarding failed"))
		inner := failure(hop.LogLevel, err, lines...)
		return nil, prefixed(inner, s.LogLevel, err, kexClosed(proxyRemote)...)
	}
	return &transport{
		conn:   conn,
		remote: proxyRemote,
		hostIP: "<no hostip for proxy command>",
		extra:  func() { jc.Close() },
	}, nil
}

// numericHost is host as an address, as getaddrinfo reads one before any
// lookup: IPv6, or IPv4 in inet_aton's forms ("127.1", "0x7f.1",
// "2130706433", octal "0177.0.0.1"); nil for a name.
func numericHost(host string) net.IP {
	if ip := net.ParseIP(host); ip != nil {
		return ip
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return nil
	}
	var nums []uint64
	for _, p := range parts {
		// C's strtoul base 0: 0x hex, 0 octal; not Go's 0b, 0o or _.
		n, err := strconv.ParseUint(p, 0, 32)
		lower := strings.ToLower(p)
		if err != nil || strings.HasPrefix(lower, "0b") || strings.HasPrefix(lower, "0o") || strings.ContainsRune(p, '_') {
			return nil
		}
		nums = append(nums, n)
	}
	// The last part fills the bytes the others leave (a.b: 8.24 bits).
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return nil
	}
	v := uint32(last)
	for i, n := range nums[:len(nums)-1] {
		if n > 0xff {
			return nil
		}
		v |= uint32(n) << (24 - 8*i)
	}
	return net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// lookupIP resolves host names; tests replace it to stay off the network.
var lookupIP = net.DefaultResolver.LookupIP

// dialTCP resolves and connects like ssh_connect_direct: every address in
// turn, ConnectionAttempts times, reporting the last error.
func dialTCP(ctx context.Context, s *Settings) (*transport, error) {
	network := "ip"
	switch s.AddressFamily {
	case "inet":
		network = "ip4"
	case "inet6":
		network = "ip6"
	}
	var ips []net.IP
	if ip := numericHost(s.HostName); ip != nil {
		// getaddrinfo reads a host with ':' as IPv6 only (::ffff:a.b.c.d
		// too), one without as IPv4 only.
		v6 := strings.Contains(s.HostName, ":")
		if network == "ip4" && v6 || network == "ip6" && !v6 {
			// getaddrinfo's EAI_ADDRFAMILY for an address of the other family.
			err := &net.AddrError{Err: "address family mismatch", Addr: s.HostName}
			return nil, failure(s.LogLevel, err,
				errorLine(fmt.Sprintf("ssh: Could not resolve hostname %.100s: Address family for hostname not supported", s.HostName)))
		}
		ips = []net.IP{ip}
	} else {
		var err error
		ips, err = lookupIP(ctx, network, s.HostName)
		if err != nil || len(ips) == 0 {
			if ctx.Err() != nil {
				return nil, &ConnError{Err: ctx.Err()}
			}
			if err == nil {
				err = &net.DNSError{Err: "no such host", Name: s.HostName, IsNotFound: true}
			}
			return nil, failure(s.LogLevel, err,
				errorLine(fmt.Sprintf("ssh: Could not resolve hostname %.100s: %s", s.HostName, gaiText(err))))
		}
	}
	port := strconv.Itoa(s.Port)
	attempts := s.ConnectionAttempts
	if attempts < 1 {
		attempts = 1
	}
	var lastErr error
	for a := 0; a < attempts; a++ {
		if a > 0 {
			select {
			case <-ctx.Done():
				return nil, &ConnError{Err: ctx.Err()}
			case <-time.After(time.Second):
			}
		}
		for _, ip := range ips {
			// The kernel's keepalive timers, not Go's 15 seconds: ssh
			// leaves them as they are, and a link silent for minutes
			// must not end a connection ssh would keep.
			keep := net.KeepAliveConfig{Enable: s.TCPKeepAlive, Idle: -1, Interval: -1, Count: -1}
			d := net.Dialer{Timeout: s.ConnectTimeout, KeepAlive: -1, KeepAliveConfig: keep}
			conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip.String(), port))
			if err == nil {
				hostIP := ip.String()
				if s.Port != 22 {
					hostIP = "[" + hostIP + "]:" + port
				}
				return &transport{conn: withQuickAck(conn), remote: fmt.Sprintf("%s port %d", ip, s.Port), hostIP: hostIP}, nil
			}
			if ctx.Err() != nil {
				return nil, &ConnError{Err: ctx.Err()}
			}
			lastErr = err
		}
	}
	return nil, failure(s.LogLevel, lastErr,
		errorLine(fmt.Sprintf("ssh: connect to host %s port %d: %s", s.HostName, s.Port, connectErrText(lastErr))))
}

// gaiText is getaddrinfo's gai_strerror text for a Go resolver error.
func gaiText(err error) string {
	var ae *net.AddrError
	if errors.As(err, &ae) {
		// Go's "no suitable address": a name with addresses of the
		// other family only, which getaddrinfo does not find.
		return "Name or service not known"
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		switch {
		case de.IsNotFound:
			return "Name or service not known"
		case de.IsTimeout || de.IsTemporary:
			return "Temporary failure in name resolution"
		}
		return de.Err
	}
	return err.Error()
}

func connectErrText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errnoText(errno)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "Connection timed out"
	}
	return err.Error()
}

// proxyConn is a net.Conn over a ProxyCommand's stdin and stdout.
type proxyConn struct {
	r, w      *os.File
	hangup    func() // sends the command SIGHUP
	closeOnce sync.Once
}

type proxyAddr struct{}

func (proxyAddr) Network() string { return "proxy" }
func (proxyAddr) String() string  { return "UNKNOWN:65535" }

func (c *proxyConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *proxyConn) Write(b []byte) (int, error) { return c.w.Write(b) }
func (c *proxyConn) LocalAddr() net.Addr         { return proxyAddr{} }
func (c *proxyConn) RemoteAddr() net.Addr        { return proxyAddr{} }
func (c *proxyConn) SetDeadline(t time.Time) error {
	_ = c.r.SetReadDeadline(t)
	return c.w.SetWriteDeadline(t)
}
func (c *proxyConn) SetReadDeadline(t time.Time) error  { return c.r.SetReadDeadline(t) }
func (c *proxyConn) SetWriteDeadline(t time.Time) error { return c.w.SetWriteDeadline(t) }

// readerGone reports whether the command's end of its stdin is closed,
// so that a write would fail with EPIPE. Nothing is written. It waits a
// little for it: a command whose stdout ended is exiting, and the
// kernel may release its stdin after its stdout.
func (c *proxyConn) readerGone() bool {
	rc, err := c.w.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd)}} // no events: only POLLERR (no reader) wakes it
		if n, err := unix.Poll(p, 100); err == nil && n == 1 {
			gone = p[0].Revents&unix.POLLERR != 0
		}
	})
	return gone
}

// Close closes the pipes and sends the command SIGHUP, as ssh does.
func (c *proxyConn) Close() error {
	c.closeOnce.Do(func() {
		c.w.Close()
		c.r.Close()
		c.hangup()
	})
	return nil
}

// startProxyCommand runs ProxyCommand as "$SHELL -c 'exec CMD'": through
// the shim (p) where there is one, as ssh runs it as its own child, else
// here, in the shim's directory and environment.
func startProxyCommand(ctx context.Context, s *Settings, p Prompter, rep *reporter, log logrus.FieldLogger) (*transport, error) {
	shell, ok := s.Env.lookup("SHELL")
	if !ok || shell == "" {
		shell = "/bin/sh"
	}
	if ps, ok := p.(ProxyStarter); ok {
		r, w, hangup, err := ps.StartProxy(ctx, shell, "exec "+s.ProxyCommand, s.proxyStderrNull())
		if err == nil {
			return &transport{
				conn:   &proxyConn{r: r, w: w, hangup: hangup},
				remote: proxyRemote,
				hostIP: "<no hostip for proxy command>",
			}, nil
		}
		if !errors.Is(err, ErrProxyHere) {
			return nil, &ConnError{Err: fmt.Errorf("proxy command: %w", err)}
		}
	}
	return startLocalProxy(s, shell, rep, log)
}

// startLocalProxy runs the ProxyCommand from the daemon, for a connection
// no shim asked for. Its stderr is passed on as ssh's would be: to the
// Notifier while dialing, to the log afterwards.
func startLocalProxy(s *Settings, shell string, rep *reporter, log logrus.FieldLogger) (*transport, error) {
	cmd := exec.Command(shell, "-c", "exec "+s.ProxyCommand)
	cmd.Dir = s.Env.Cwd
	if s.Env.Environ != nil {
		cmd.Env = s.Env.Environ
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, proxyPipeError(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, proxyPipeError(err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	var errR, errW *os.File
	if !s.proxyStderrNull() { // else exec gives it /dev/null
		if errR, errW, err = os.Pipe(); err != nil {
			closeAll(inR, inW, outR, outW)
			return nil, proxyPipeError(err)
		}
		cmd.Stderr = errW
	}
	err = cmd.Start()
	closeAll(inR, outW, errW)
	if err != nil {
		closeAll(inW, outR, errR)
		// ssh's child prints perror(shell) on its stderr and exits 1:
		// ssh then reads the end of the stream.
		if !s.proxyStderrNull() {
			rep.raw(fmt.Sprintf("%s: %s\n", shell, strerror(err)))
		}
		return nil, failure(s.LogLevel, err, kexClosed(proxyRemote)...)
	}
	log.WithField("pid", cmd.Process.Pid).Debug("proxy command started")
	go func() {
		err := cmd.Wait()
		log.WithError(err).Debug("proxy command exited")
	}()
	tr := &transport{
		conn: &proxyConn{r: outR, w: inW, hangup: func() {
			_ = cmd.Process.Signal(syscall.SIGHUP)
		}},
		remote: proxyRemote,
		hostIP: "<no hostip for proxy command>",
	}
	if errR != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer errR.Close()
			buf := make([]byte, 4096)
			for {
				n, err := errR.Read(buf)
				if n > 0 {
					rep.raw(string(buf[:n]))
				}
				if err != nil {
					return
				}
			}
		}()
		tr.stderr = done
	}
	return tr, nil
}

func proxyPipeError(err error) *ConnError {
	return &ConnError{Msg: fmt.Sprintf("Could not create pipes to communicate with the proxy: %v", err), Err: err}
}

// closeAll closes the files that are not nil.
func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// bannerConn watches the server's version line: until it has arrived,
// ConnectTimeout applies ("Connection timed out during banner exchange")
// and a close is reported as kex_exchange_identification does. It also
// keeps the first I/O error, which x/crypto may wrap or replace.
type bannerConn struct {
	net.Conn
	mu       sync.Mutex
	line     []byte
	seen     bool
	timedOut bool
	ioErr    error
	// brokenPipe: a write after the banner failed with EPIPE. ssh
	// writes its key exchange's first packet before it reads on, so
	// that failure is the one it reports, whatever x/crypto's reader
	// saw first.
	brokenPipe bool
	// readerGone, for a ProxyCommand, reports whether its stdin is
	// closed (a write would fail with EPIPE).
	readerGone func() bool
	timer      *time.Timer
}

func newBannerConn(c net.Conn, timeout time.Duration) *bannerConn {
	bc := &bannerConn{Conn: c}
	if timeout > 0 {
		bc.timer = time.AfterFunc(timeout, func() {
			bc.mu.Lock()
			fire := !bc.seen
			if fire {
				bc.timedOut = true
			}
			bc.mu.Unlock()
			if fire {
				c.Close()
			}
		})
	}
	return bc
}

func (c *bannerConn) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
	}
}

func (c *bannerConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	if !c.seen {
		for _, ch := range b[:n] {
			if ch != '\n' {
				if len(c.line) < 8 {
					c.line = append(c.line, ch)
				}
				continue
			}
			if bytes.HasPrefix(c.line, []byte("SSH-")) {
				c.seen = true
				if c.timer != nil {
					c.timer.Stop()
				}
				break
			}
			c.line = c.line[:0]
		}
	}
	if err != nil && c.ioErr == nil {
		c.ioErr = err
	}
	if errors.Is(err, io.EOF) && c.seen && !c.brokenPipe && c.readerGone != nil {
		// ssh would have written its key exchange's first packet before
		// this read: through a ProxyCommand whose stdin is closed, that
		// write fails first. (Not on the daemon's own close: ErrClosed.)
		c.brokenPipe = c.readerGone()
	}
	c.mu.Unlock()
	return n, err
}

func (c *bannerConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		c.mu.Lock()
		if c.ioErr == nil {
			c.ioErr = err
		}
		c.brokenPipe = c.brokenPipe || c.seen && errors.Is(err, syscall.EPIPE)
		c.mu.Unlock()
	}
	return n, err
}

var disconnectRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`ssh: disconnect, reason (\d+): (".*")$`) })

// negotiationNames maps x/crypto's algorithm kinds to OpenSSH's words.
func negotiationName(what string) string {
	switch {
	case strings.Contains(what, "key exchange"):
		return "key exchange method"
	case strings.Contains(what, "host key"):
		return "host key type"
	case strings.Contains(what, "cipher"):
		return "cipher"
	case strings.Contains(what, "MAC"):
		return "MAC"
	case strings.Contains(what, "compression"):
		return "compression method"
	}
	return what
}

// mapHandshakeError turns a failed x/crypto handshake into OpenSSH's
// message for the same failure.
func mapHandshakeError(ctx context.Context, err error, s *Settings, bc *bannerConn, remote string, hk *hostKeyChecker, auth *authState) *ConnError {
	if hk.fail != nil {
		return hk.fail
	}
	if auth.denied != nil {
		return auth.denied
	}
	if ctx.Err() != nil {
		return &ConnError{Err: fmt.Errorf("ssh: %w", ctx.Err())}
	}
	if auth.abort != nil {
		return &ConnError{Err: auth.abort}
	}
	var ane *ssh.AlgorithmNegotiationError
	if errors.As(err, &ane) {
		return failure(s.LogLevel, err, fatalPacketLine(fmt.Sprintf("Unable to negotiate with %s: no matching %s found. Their offer: %s",
			remote, negotiationName(ane.What), strings.Join(ane.RequestedAlgorithms, ","))))
	}
	if m := disconnectRE().FindStringSubmatch(err.Error()); m != nil {
		msg, uerr := strconv.Unquote(m[2])
		if uerr != nil {
			msg = m[2]
		}
		return failure(s.LogLevel, err,
			errorLine(fmt.Sprintf("Received disconnect from %s:%s: %.400s", remote, m[1], msg)),
			fatalPacketLine("Disconnected from "+remote))
	}
	bc.mu.Lock()
	seen, timedOut, ioErr, brokenPipe := bc.seen, bc.timedOut, bc.ioErr, bc.brokenPipe
	bc.mu.Unlock()
	if timedOut {
		return failure(s.LogLevel, err,
			errorLine("Connection timed out during banner exchange"),
			fatalPacketLine(fmt.Sprintf("Connection to %s timed out", remote)))
	}
	cause := ioErr
	if cause == nil {
		cause = err
	}
	switch {
	case errors.Is(cause, syscall.ECONNRESET):
		if !seen {
			return failure(s.LogLevel, err,
				errorLine("kex_exchange_identification: read: Connection reset by peer"),
				fatalPacketLine("Connection reset by "+remote))
		}
		return failure(s.LogLevel, err, fatalPacketLine("Connection reset by "+remote))
	case brokenPipe || seen && errors.Is(cause, syscall.EPIPE):
		// Its key exchange's first write failed (a ProxyCommand that
		// exited after its banner): ssh says what the write said.
		return failure(s.LogLevel, err, fatalPacketLine(fmt.Sprintf("ssh_dispatch_run_fatal: Connection to %s: %s", remote, errnoText(syscall.EPIPE))))
	case errors.Is(cause, io.EOF), errors.Is(cause, io.ErrUnexpectedEOF), errors.Is(cause, syscall.EPIPE),
		errors.Is(cause, os.ErrClosed), errors.Is(cause, net.ErrClosed):
		if !seen {
			return failure(s.LogLevel, err, kexClosed(remote)...)
		}
		return failure(s.LogLevel, err, fatalPacketLine("Connection closed by "+remote))
	}
	var errno syscall.Errno
	if errors.As(cause, &errno) {
		return failure(s.LogLevel, err, fatalPacketLine(fmt.Sprintf("ssh_dispatch_run_fatal: Connection to %s: %s", remote, errnoText(errno))))
	}
	if !seen {
		return failure(s.LogLevel, err, errorLine("kex_exchange_identification: "+strings.TrimPrefix(err.Error(), "ssh: handshake failed: ")))
	}
	return failure(s.LogLevel, err, fatalPacketLine(fmt.Sprintf("ssh_dispatch_run_fatal: Connection to %s: %s", remote,
		strings.TrimPrefix(err.Error(), "ssh: handshake failed: "))))
}

// clientVersion is the real ssh's identification string ("SSH-2.0-" and
// the release ssh -V prints): sshd tells only OpenSSH clients when a
// command has closed its stdin (eow@openssh.com, on which ssh stops
// reading its own), and servers log it. x/crypto's where no ssh answers.
var clientVersion = sync.OnceValue(realClientVersion)

func realClientVersion() string {
	real, err := fakessh.FindReal("ssh")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, real, "-V")
	cmd.Stderr = &out
	if cmd.Run() != nil {
		return ""
	}
	release, _, _ := strings.Cut(strings.TrimSpace(out.String()), ",")
	if !strings.HasPrefix(release, "OpenSSH_") || strings.ContainsAny(release, "\r\n") {
		return ""
	}
	return "SSH-2.0-" + release
}
