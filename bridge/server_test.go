package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// harness runs a Server against an in-process SSH server.
type harness struct {
	t    *testing.T
	path string        // the shim's PATH: sftp and scp are shims
	logs *logtest.Hook // what the daemon logged
	srv  *Server
	ts   *testServer
	sock string
	port string
	// cwd and home are the shims' working directory and HOME: one per
	// harness, as for one Ansible run (transferKey).
	cwd, home string
	cp        string // sshArgs' ControlPath, in a directory of the harness's
}

func newHarness(t *testing.T, maxSessions int) *harness {
	t.Helper()
	return newHarnessConfig(t, maxSessions, Config{})
}

// newHarnessConfig is newHarness with the daemon configured by cfg (its
// Dial is the harness's).
func newHarnessConfig(t *testing.T, maxSessions int, cfg Config) *harness {
	t.Helper()
	return newHarnessListener(t, maxSessions, cfg, nil)
}

// newHarnessListener is newHarnessConfig with the daemon's listener
// wrapped by wrap (nil: as it is).
func newHarnessListener(t *testing.T, maxSessions int, cfg Config, wrap func(net.Listener) net.Listener) *harness {
	t.Helper()
	ts := newTestServer(t, maxSessions)
	log := logrus.New()
	log.SetOutput(testWriter{t})
	log.SetLevel(logrus.DebugLevel)
	hook := logtest.NewLocal(log)
	dial := func(ctx context.Context, s *sshclient.Settings, _ sshclient.Prompter, _ logrus.FieldLogger) (*sshclient.Client, error) {
		cfg := &ssh.ClientConfig{
			User:            s.User,
			Auth:            []ssh.AuthMethod{ssh.PublicKeys(ts.clientKey)},
			HostKeyCallback: ssh.FixedHostKey(ts.hostKey.PublicKey()),
		}
		addr := net.JoinHostPort(s.HostName, strconv.Itoa(s.Port))
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		if s.Wire != nil { // as sshclient.Dial counts
			nc = s.Wire.Wrap(nc)
		}
		c, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
		if err != nil {
			nc.Close()
			return nil, err
		}
		return &sshclient.Client{Client: ssh.NewClient(c, chans, reqs)}, nil
	}
	cfg.Dial = dial
	srv := New(cfg, log)
	sock := filepath.Join(t.TempDir(), "s", "bridge.sock")
	var ln net.Listener
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Run(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	_, port, _ := net.SplitHostPort(ts.addr)
	return &harness{t: t, path: shimPath(t), logs: hook, srv: srv, ts: ts, sock: sock, port: port, cwd: t.TempDir(), home: t.TempDir(),
		cp: filepath.Join(t.TempDir(), "x")}
}

// shimPath returns a PATH whose sftp and scp are shims, as after
// `ansible-bridge shims DIR`.
func shimPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "ansible-bridge")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ssh", "scp", "sftp"} {
		if err := os.Symlink(bin, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir + ":/usr/bin:/bin"
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type result struct {
	stdout, stderr string
	code           int
	fallback       string
	replay         string // the input handed back with the fallback
	via            bool   // the real binary is to reach the target through the bridge
}

// logged counts the daemon's log entries whose message starts with prefix.
func (h *harness) logged(prefix string) int {
	n := 0
	for _, e := range h.logs.AllEntries() {
		if strings.HasPrefix(e.Message, prefix) {
			n++
		}
	}
	return n
}

// run plays the shim's side of one invocation.
func (h *harness) run(prog string, argv []string, stdin string) result {
	h.t.Helper()
	return h.runEnv(prog, argv, stdin)
}

// runEnv is run with extra shim environment variables.
func (h *harness) runEnv(prog string, argv []string, stdin string, env ...string) result {
	h.t.Helper()
	return h.runStdinAfter(prog, argv, "", stdin, env...)
}

// shimHello is the hello frame's payload a shim sends for prog and argv,
// parsed as the shim parses it, from directory cwd with environment env.
// accepted talks to the daemon as a shim running prog with argv would,
// until the daemon accepts the invocation, and returns the connection
// (closed when the test ends).
func (h *harness) accepted(prog string, argv []string) net.Conn {
	h.t.Helper()
	c, err := net.Dial("unix", h.sock)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	if err := wire.Write(c, wire.Hello, shimHello(prog, argv, h.cwd, []string{"HOME=" + h.home, "PATH=" + h.path})); err != nil {
		h.t.Fatal(err)
	}
	for {
		f, err := wire.Read(c)
		if err != nil {
			h.t.Fatalf("read: %v", err)
		}
		if f.Type == wire.Accept {
			return c
		}
	}
}

func shimHello(prog string, argv []string, cwd string, env []string) []byte {
	h, _ := fakessh.NewHello(prog, argv)
	h.Cwd, h.Env, h.Umask = cwd, env, 0o22
	b, _ := json.Marshal(h)
	return b
}

// runStdinAfter plays the shim's side of one invocation; stdin goes to
// the daemon once marker is in the output ("": at once), as Ansible's ssh
// plugin sends a become step's pipelined module after BECOME-SUCCESS.
func (h *harness) runStdinAfter(prog string, argv []string, marker, stdin string, env ...string) result {
	h.t.Helper()
	c, err := net.Dial("unix", h.sock)
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	hello := shimHello(prog, argv, h.cwd, append([]string{"HOME=" + h.home, "USER=tester", "TERM=xterm", "LANG=C.UTF-8", "PATH=" + h.path}, env...))
	if err := wire.Write(c, wire.Hello, hello); err != nil {
		h.t.Fatal(err)
	}
	var out, errb bytes.Buffer
	var replay string
	via := false
	accepted, sent := false, false
	send := func() {
		sent = true
		go func() {
			if stdin != "" {
				_ = wire.Write(c, wire.Stdin, []byte(stdin))
			}
			_ = wire.Write(c, wire.StdinEOF, nil)
		}()
	}
	for {
		f, err := wire.Read(c)
		if err != nil {
			h.t.Fatalf("read: %v (stderr so far %q)", err, errb.String())
		}
		switch f.Type {
		case wire.Accept:
			accepted = true
		case wire.Stdout:
			out.Write(f.Payload)
		case wire.Stderr:
			errb.Write(f.Payload)
		case wire.Replay:
			replay = string(f.Payload)
		case wire.ViaBridge:
			via = true
		case wire.Fallback:
			return result{fallback: string(f.Payload), replay: replay, via: via}
		case wire.Exit:
			code, _ := wire.ExitCode(f.Payload)
			return result{stdout: out.String(), stderr: errb.String(), code: code}
		}
		if accepted && !sent && (marker == "" || bytes.Contains(out.Bytes(), []byte(marker))) {
			send()
		}
	}
}

// learnTransfers runs what teaches the daemon that this harness's
// uploads come through the bridge (transfers.go), as the first module
// step of a run without pipelining does: a temp dir made on the target,
// an upload into it through the sftp shim, its removal. Temp dirs of
// later steps are held.
func (h *harness) learnTransfers() {
	h.t.Helper()
	base := filepath.Join(h.t.TempDir(), "learn")
	dir := base + "/ansible-tmp-0"
	mkdir := `/bin/sh -c '( umask 77 && mkdir -p "` + "` echo " + base + " `" + `"&& mkdir "` + "` echo " + dir + " `" + `" && echo ansible-tmp-0="` + "` echo " + dir + " `" + `" ) && sleep 0'`
	if r := h.run("ssh", h.sshArgs("127.0.0.1", mkdir), ""); r.code != 0 {
		h.t.Fatalf("learn: mkdir: %+v", r)
	}
	local := filepath.Join(h.t.TempDir(), "f")
	if err := os.WriteFile(local, nil, 0o600); err != nil {
		h.t.Fatal(err)
	}
	if r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "put "+local+" "+dir+"/f\n"); r.code != 0 {
		h.t.Fatalf("learn: put: %+v", r)
	}
	if r := h.run("ssh", h.sshArgs("127.0.0.1", `/bin/sh -c 'rm -f -r `+dir+`/ > /dev/null 2>&1 && sleep 0'`), ""); r.code != 0 {
		h.t.Fatalf("learn: rm: %+v", r)
	}
}

// sshArgs builds Ansible-style arguments for the test server.
func (h *harness) sshArgs(extra ...string) []string {
	args := []string{"-C", "-o", "ControlMaster=auto", "-o", "ControlPersist=60s", "-F", "none",
		"-o", "Port=" + h.port, "-o", `User="tester"`, "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "ControlPath=" + h.cp}
	return append(args, extra...)
}

// sshArgsAt is sshArgs with another ControlPath: another connection.
func (h *harness) sshArgsAt(controlPath string, extra ...string) []string {
	return withOption(h.sshArgs(extra...), "ControlPath", controlPath)
}

func TestExec(t *testing.T) {
	h := newHarness(t, 0)
	tests := []struct {
		name    string
		args    []string
		stdin   string
		stdout  string
		stderr  string
		code    int
		fallbck bool
	}{
		{name: "echo", args: []string{"127.0.0.1", "/bin/sh -c 'echo hi && sleep 0'"}, stdout: "hi\n"},
		{name: "stderr and status", args: []string{"127.0.0.1", "echo err >&2; exit 3"}, stderr: "err\n", code: 3},
		{name: "stdin", args: []string{"127.0.0.1", "cat"}, stdin: "payload", stdout: "payload"},
		// Over a master without SendEnv: ssh's master passes a mux
		// client's variables only where its own SendEnv does too.
		{name: "SendEnv over a master without", args: []string{"-o", "SendEnv=LC_* LANG", "127.0.0.1", "echo $LANG"}, stdout: "\n"},
		{name: "no SendEnv", args: []string{"127.0.0.1", "echo $LANG"}, stdout: "\n"},
		{name: "words joined", args: []string{"127.0.0.1", "echo", "a", "b"}, stdout: "a b\n"},
		{name: "tty notice", args: []string{"-tt", "127.0.0.1", "true"}, stderr: "Shared connection to 127.0.0.1 closed.\r\n"},
		{name: "tty quiet", args: []string{"-tt", "-q", "127.0.0.1", "true"}},
		{name: "signal kill is 255", args: []string{"127.0.0.1", "kill -9 $$"}, code: 255},
		{name: "forwarding falls back", args: []string{"-L", "1:localhost:2", "127.0.0.1", "true"}, fallbck: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run("ssh", h.sshArgs(tt.args...), tt.stdin)
			if tt.fallbck {
				if r.fallback == "" {
					t.Fatalf("want fallback, got %+v", r)
				}
				return
			}
			if r.stdout != tt.stdout || r.stderr != tt.stderr || r.code != tt.code {
				t.Fatalf("got stdout %q stderr %q code %d; want %q %q %d", r.stdout, r.stderr, r.code, tt.stdout, tt.stderr, tt.code)
			}
		})
	}
	if n := h.ts.conns.Load(); n != 1 {
		t.Errorf("%d TCP connections, want 1", n)
	}
	// A master of its own, with SendEnv: it passes LANG to its sessions,
	// and to a mux client's that asks for it too, not to one that does not.
	cp := filepath.Join(t.TempDir(), "cp")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "SendEnv=LANG", "127.0.0.1", "echo $LANG"}, "C.UTF-8\n"},
		{[]string{"-o", "SendEnv=LC_* LANG", "127.0.0.1", "echo $LANG"}, "C.UTF-8\n"},
		{[]string{"127.0.0.1", "echo $LANG"}, "\n"},
	} {
		if r := h.run("ssh", h.sshArgsAt(cp, tt.args...), ""); r.stdout != tt.want || r.code != 0 {
			t.Errorf("%v: %+v, want stdout %q", tt.args, r, tt.want)
		}
	}
	if n := h.ts.envReplies.Load(); n != 0 {
		t.Errorf("%d env requests wanted a reply; ssh sends them without (a round trip each)", n)
	}
}

// TestShimSignalledClosesChannel: a shim that exits on a signal makes the
// daemon close the channel, as an ssh master does for a client that
// dies, and send no signal: ssh sends none, and sshd leaves a command
// without a PTY running (README, "When a client dies").
func TestShimSignalledClosesChannel(t *testing.T) {
	h := newHarness(t, 0)
	c := h.accepted("ssh", h.sshArgs("127.0.0.1", "sleep 30"))
	deadline := time.Now().Add(10 * time.Second)
	for h.ts.execs.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	// What the shim does on SIGINT: say so, then exit.
	if err := wire.Write(c, wire.Signal, []byte("INT")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for h.ts.closed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the channel was not closed after the shim went")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	if n := h.ts.signals.Load(); n != 0 {
		t.Errorf("%d signal requests sent to the remote; ssh sends none", n)
	}
}

func TestControlStopRedials(t *testing.T) {
	h := newHarness(t, 0)
	check := h.run("ssh", h.sshArgs("-O", "check", "127.0.0.1"), "")
	if check.code != 255 || !strings.Contains(check.stderr, "Control socket connect("+h.cp+"): No such file or directory") {
		t.Fatalf("check before connecting: %+v", check)
	}
	h.run("ssh", h.sshArgs("127.0.0.1", "true"), "")
	check = h.run("ssh", h.sshArgs("-O", "check", "127.0.0.1"), "")
	if check.code != 0 || !strings.HasPrefix(check.stderr, "Master running (pid=") {
		t.Fatalf("check: %+v", check)
	}
	stop := h.run("ssh", h.sshArgs("-O", "stop", "127.0.0.1"), "")
	if stop.code != 0 || stop.stderr != "Stop listening request sent.\r\n" {
		t.Fatalf("stop: %+v", stop)
	}
	h.run("ssh", h.sshArgs("127.0.0.1", "true"), "")
	if n := h.ts.conns.Load(); n != 2 {
		t.Fatalf("%d TCP connections after reset, want 2", n)
	}
}

func TestDeadConnectionIsRedialled(t *testing.T) {
	h := newHarness(t, 0)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo one"), ""); r.stdout != "one\n" {
		t.Fatalf("first: %+v", r)
	}
	h.ts.dropAll()
	r := h.run("ssh", h.sshArgs("127.0.0.1", "echo two"), "")
	if r.stdout != "two\n" || r.code != 0 {
		t.Fatalf("after the connection died: %+v", r)
	}
	if n := h.ts.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// TestConnectionLostAtExec: sshd closes the connection at the exec
// request, unanswered (its session's monitor was killed). ssh's mux
// client then only sees its master go: nothing said without a terminal,
// 255; a master running its own session says the connection closed.
// Neither says "exec request failed", which is sshd's refusal.
func TestConnectionLostAtExec(t *testing.T) {
	h := newHarness(t, 0)
	cp := filepath.Join(t.TempDir(), "cp")
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"mux client", h.sshArgs("127.0.0.1", "echo x"), ""},
		{"mux client -tt", h.sshArgs("-tt", "127.0.0.1", "echo x"), "Shared connection to 127.0.0.1 closed.\r\n"},
		{"own session", withOption(h.sshArgsAt(cp, "127.0.0.1", "echo x"), "ControlPersist", "no"), "Connection to 127.0.0.1 closed by remote host.\r\n"},
		{"own session -tt", withOption(h.sshArgsAt(cp, "-tt", "127.0.0.1", "echo x"), "ControlPersist", "no"),
			"Connection to 127.0.0.1 closed by remote host.\r\nConnection to 127.0.0.1 closed.\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.ts.dropOnExec.Store(false)
			if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
				t.Fatalf("master: %+v", r)
			}
			h.ts.dropOnExec.Store(true)
			r := h.run("ssh", tt.args, "")
			if r.stdout != "" || r.stderr != tt.stderr || r.code != 255 {
				t.Fatalf("got stdout %q stderr %q code %d; want stderr %q, 255", r.stdout, r.stderr, r.code, tt.stderr)
			}
		})
	}
	// The next invocation logs in anew.
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo x"), ""); r.code != 255 {
		t.Fatalf("dropped: %+v", r)
	}
	h.ts.dropOnExec.Store(false)
	before := h.ts.conns.Load()
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo again"), ""); r.stdout != "again\n" || r.code != 0 {
		t.Fatalf("after: %+v", r)
	}
	if n := h.ts.conns.Load(); n != before+1 {
		t.Errorf("%d connections, want %d", n, before+1)
	}
}

// pendOnHungServer makes a master, then hangs the server and starts a
// rider (ssh with args, `echo rider` if none) whose session open the
// server holds unanswered; it returns once the server holds it, with the
// rider's result to come.
func pendOnHungServer(t *testing.T, h *harness, args ...string) chan result {
	t.Helper()
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo one"), ""); r.stdout != "one\n" {
		t.Fatalf("first: %+v", r)
	}
	if args == nil {
		args = h.sshArgs("127.0.0.1", "echo rider")
	}
	h.ts.hang.Store(true)
	rider := make(chan result, 1)
	go func() { rider <- h.run("ssh", args, "") }()
	deadline := time.Now().Add(10 * time.Second)
	for h.ts.held.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling the server
	}
	return rider
}

// TestHungServerPendingOpen: with a session open pending on a hung server,
// -O check answers at once, and -O exit ends the connection at once; the
// pending client then says what ssh's mux client says when its master
// dies, and logs in itself.
func TestHungServerPendingOpen(t *testing.T) {
	h := newHarness(t, 0)
	rider := pendOnHungServer(t, h)
	h.ts.hang.Store(false) // a new login is served
	within := func(what string, args []string) result {
		t.Helper()
		done := make(chan result, 1)
		go func() { done <- h.run("ssh", args, "") }()
		select {
		case r := <-done:
			return r
		case <-time.After(10 * time.Second):
			h.ts.dropAll() // so that the daemon can stop
			t.Fatalf("%s hangs behind the pending session", what)
			return result{}
		}
	}
	if r := within("-O check", h.sshArgs("-O", "check", "127.0.0.1")); r.code != 0 || !strings.HasPrefix(r.stderr, "Master running (pid=") {
		t.Fatalf("check: %+v", r)
	}
	if r := within("-O exit", h.sshArgs("-O", "exit", "127.0.0.1")); r.code != 0 || r.stderr != "Exit request sent.\r\n" {
		t.Fatalf("exit: %+v", r)
	}
	select {
	case r := <-rider:
		if r.code != 0 || r.stdout != "rider\n" || r.stderr != "mux_client_request_session: read from master failed: Broken pipe\r\n" {
			t.Fatalf("rider: %+v", r)
		}
	case <-time.After(10 * time.Second):
		h.ts.dropAll()
		t.Fatal("the rider hangs on the closed connection")
	}
	if n := h.ts.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// TestServerGoneUnderPendingOpen: the server drops the connection while
// a client's session open (a command's, a subsystem's) is pending on it.
// ssh's master exits with the open unanswered: its mux client says
// "read from master failed" and logs in itself, the session running
// there. The bridge once redialled in silence unless it had closed the
// connection itself.
func TestServerGoneUnderPendingOpen(t *testing.T) {
	// The test server's sftp sends no exit status: 255.
	for _, tc := range []struct {
		name, subsystem string
		code            int
	}{{"command", "", 0}, {"subsystem", "sftp", 255}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 0)
			var args []string
			if tc.subsystem != "" {
				args = h.sshArgs("-s", "127.0.0.1", tc.subsystem)
			}
			rider := pendOnHungServer(t, h, args...)
			h.ts.hang.Store(false) // a new login is served
			h.ts.dropAll()
			select {
			case r := <-rider:
				if r.stderr != "mux_client_request_session: read from master failed: Broken pipe\r\n" || r.code != tc.code ||
					tc.subsystem == "" && r.stdout != "rider\n" {
					t.Fatalf("rider: %+v", r)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the rider hangs on the dropped connection")
			}
			if n := h.ts.conns.Load(); n != 2 {
				t.Fatalf("%d connections, want 2", n)
			}
			if tc.subsystem != "" && h.ts.sftpAsked.Load() != 1 {
				t.Fatalf("sftp asked for %d times, want once", h.ts.sftpAsked.Load())
			}
		})
	}
}

// TestConnectionLostAtSubsystem: the connection goes while the subsystem
// request is pending, its channel open. ssh's master had given its mux
// client the session at the open (mux_session_confirm): the client only
// sees its master go, 255 and nothing said, and logs in no more.
func TestConnectionLostAtSubsystem(t *testing.T) {
	h := newHarness(t, 0)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("master: %+v", r)
	}
	h.ts.holdSubsystem.Store(true)
	rider := make(chan result, 1)
	go func() { rider <- h.run("ssh", h.sshArgs("-s", "127.0.0.1", "sftp"), "") }()
	deadline := time.Now().Add(10 * time.Second)
	for h.ts.held.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling the server
	}
	h.ts.holdSubsystem.Store(false)
	h.ts.dropAll()
	select {
	case r := <-rider:
		if r.code != 255 || r.stdout != "" || r.stderr != "" {
			t.Fatalf("rider: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the rider hangs on the dropped connection")
	}
	if n := h.ts.conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// TestSFTPStartHoldsNothing: while the server holds the bridge's SFTP
// subsystem request (sshd slow to start sftp-server, or hung), status,
// -O check and another invocation's session are answered: the target's
// and the connection's locks are not held across the server's answer.
func TestSFTPStartHoldsNothing(t *testing.T) {
	h := newHarness(t, 0)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("master: %+v", r)
	}
	h.ts.holdSubsystem.Store(true)
	local := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(local, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	put := make(chan result, 1)
	go func() {
		put <- h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "put "+local+" "+local+".up\n")
	}()
	deadline := time.Now().Add(10 * time.Second)
	for h.ts.held.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling the server
	}
	within := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s hangs behind the held sftp subsystem", what)
		}
	}
	within("status", func() { h.srv.Status() })
	within("-O check", func() {
		if r := h.run("ssh", h.sshArgs("-O", "check", "127.0.0.1"), ""); r.code != 0 {
			t.Errorf("-O check: %+v", r)
		}
	})
	within("a command", func() {
		if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo hi"), ""); r.stdout != "hi\n" {
			t.Errorf("a command: %+v", r)
		}
	})
	h.ts.holdSubsystem.Store(false)
	h.ts.dropAll() // the held request ends with its connection
	within("the held put", func() { <-put })
}

// TestStoppedMasterDropped: -O stop while a session open is pending on a
// hung server, then the server drops the connection. The failed open
// closes the connection -O stop detached without holding up the daemon
// (it once did so under the target's lock, which markDead then waited
// for: status, -O requests and the idle exit hung for good).
func TestStoppedMasterDropped(t *testing.T) {
	h := newHarness(t, 0)
	rider := pendOnHungServer(t, h)
	h.ts.hang.Store(false)
	if r := h.run("ssh", h.sshArgs("-O", "stop", "127.0.0.1"), ""); r.code != 0 {
		t.Fatalf("stop: %+v", r)
	}
	h.ts.dropAll()
	select {
	case <-rider:
	case <-time.After(10 * time.Second):
		t.Fatal("the rider hangs on the dropped connection")
	}
	status := make(chan struct{})
	go func() { h.srv.Status(); close(status) }()
	select {
	case <-status:
	case <-time.After(10 * time.Second):
		t.Fatal("status hangs: the target's lock is held for good")
	}
}

func TestMaxSessionsOpensSecondConnection(t *testing.T) {
	h := newHarness(t, 1)
	started := make(chan struct{})
	fifo := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(started)
		// Holds the only channel of the first connection until the gate opens.
		h.run("ssh", h.sshArgs("127.0.0.1", "cat "+fifo), "")
	}()
	// Wait (by polling the server, not sleeping blindly) for the first session.
	deadline := time.Now().Add(10 * time.Second)
	for h.ts.execs.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	r := h.run("ssh", h.sshArgs("127.0.0.1", "echo second"), "")
	if r.stdout != "second\n" || r.code != 0 {
		t.Fatalf("second session: %+v", r)
	}
	if n := h.ts.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	_ = os.WriteFile(fifo, []byte("x"), 0o600)
	<-started
}

// TestMaxSessionsTakenByBridge: the bridge's own session (its SFTP
// client here) and one of ssh's fill MaxSessions 2. ssh's master would
// hold one session only, so the next mux client gets its session there
// and says nothing: through the bridge it rides a connection of its own,
// as quietly ("ControlSocket ... already exists" is for an ssh that was
// to be the master). A third would find ssh's master full: refused, it
// says so and logs in itself, as ssh does.
func TestMaxSessionsTakenByBridge(t *testing.T) {
	h := newHarness(t, 2)
	h.learnTransfers() // the bridge's SFTP client stays open on the connection
	var gates []string
	var held []chan struct{}
	for i := range 2 {
		gate := filepath.Join(t.TempDir(), "gate")
		if err := syscall.Mkfifo(gate, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if r := h.run("ssh", h.sshArgs("127.0.0.1", "cat "+gate), ""); r.code != 0 || r.stderr != "" {
				t.Errorf("session %d: %+v", i+1, r)
			}
		}()
		gates, held = append(gates, gate), append(held, done)
		// Polling the server: the learning took two execs.
		deadline := time.Now().Add(10 * time.Second)
		for h.ts.execs.Load() < int32(3+i) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if n := h.ts.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the second session's own", n)
	}
	r := h.run("ssh", h.sshArgs("127.0.0.1", "echo third"), "")
	want := "mux_client_request_session: session request failed: Session open refused by peer\r\n" +
		"ControlSocket " + h.cp + " already exists, disabling multiplexing\r\n"
	if r.stdout != "third\n" || r.stderr != want || r.code != 0 {
		t.Errorf("a session ssh's master would have refused: %+v", r)
	}
	for i, gate := range gates {
		_ = os.WriteFile(gate, []byte("x"), 0o600)
		<-held[i]
	}
	if n := h.srv.targets.lookup(h.cp).besides.Load(); n != 0 {
		t.Errorf("%d connections beside the master counted after they ended", n)
	}
}

func TestTransfers(t *testing.T) {
	h := newHarness(t, 0)
	dir := t.TempDir()
	local := filepath.Join(dir, "src file")
	content := bytes.Repeat([]byte("0123456789"), 100_000)
	if err := os.WriteFile(local, content, 0o600); err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(dir, "remote", "AnsiballZ_x.py")
	os.Mkdir(filepath.Dir(remote), 0o700)

	t.Run("sftp put/get", func(t *testing.T) {
		r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("[127.0.0.1]")...), "put '"+local+"' "+remote+"\n")
		if r.code != 0 || r.fallback != "" {
			t.Fatalf("sftp put: %+v", r)
		}
		assertFile(t, remote, content, 0o600)
		r = h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("[127.0.0.1]")...), "get "+remote+" "+remote+".back\n")
		if r.code != 0 || r.fallback != "" {
			t.Fatalf("sftp get: %+v", r)
		}
		assertFile(t, remote+".back", content, 0o600)
		assertNoTemp(t, filepath.Dir(remote))
	})
	t.Run("sftp error aborts, dash continues", func(t *testing.T) {
		batch := "-get\nput\nput '" + local + "' " + remote + ".never\n"
		r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), batch)
		want := "You must specify at least one path after a get command.\r\nYou must specify at least one path after a put command.\r\n"
		if r.code != 1 || r.stderr != want {
			t.Fatalf("sftp: %+v", r)
		}
		if _, err := os.Stat(remote + ".never"); err == nil {
			t.Fatal("batch went on after an error")
		}
	})
	t.Run("scp", func(t *testing.T) {
		r := h.run("scp", h.sshArgs(local, "[127.0.0.1]:"+remote+".scp"), "")
		if r.code != 0 {
			t.Fatalf("scp up: %+v", r)
		}
		assertFile(t, remote+".scp", content, 0o600)
		r = h.run("scp", h.sshArgs("[127.0.0.1]:"+remote+".scp", filepath.Join(dir, "fetched")), "")
		if r.code != 0 {
			t.Fatalf("scp down: %+v", r)
		}
		assertFile(t, filepath.Join(dir, "fetched"), content, 0o600)
		r = h.run("scp", h.sshArgs("[127.0.0.1]:/nonexistent", filepath.Join(dir, "x")), "")
		if r.code != 1 || r.stderr != "scp: /nonexistent: No such file or directory\r\n" {
			t.Fatalf("scp missing: %+v", r)
		}
	})
	t.Run("piped dd", func(t *testing.T) {
		r := h.run("ssh", h.sshArgs("127.0.0.1", "dd of="+remote+".dd bs=65536"), string(content))
		if r.code != 0 || !strings.Contains(r.stderr, "records out") {
			t.Fatalf("dd: %+v", r)
		}
		assertFile(t, remote+".dd", content, 0o644)
	})
	if n := h.ts.conns.Load(); n != 1 {
		t.Errorf("%d TCP connections, want 1", n)
	}
}

func assertFile(t *testing.T, path string, want []byte, mode os.FileMode) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes differ from the %d sent", path, len(got), len(want))
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != mode {
		t.Fatalf("%s: mode %o, want %o", path, fi.Mode().Perm(), mode)
	}
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("temp file left behind: %s", e.Name())
		}
	}
}

// shortListener fails its first accepts with err, as a daemon out of
// file descriptors sees EMFILE, then accepts.
type shortListener struct {
	net.Listener
	fails int
	err   error
}

func (l *shortListener) Accept() (net.Conn, error) {
	if l.fails > 0 { // Run's accept loop is the only caller
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", l.err)}
	}
	return l.Listener.Accept()
}

// TestAcceptWaitsOutFDShortage: a daemon out of file descriptors (ulimit
// -n) waits and serves the queued shim once one is free; it must not exit
// and close every target's connection. Another accept error still ends it.
func TestAcceptWaitsOutFDShortage(t *testing.T) {
	h := newHarnessListener(t, 0, Config{}, func(ln net.Listener) net.Listener {
		return &shortListener{Listener: ln, fails: 3, err: syscall.EMFILE}
	})
	r := h.run("ssh", h.sshArgs("127.0.0.1", "echo hi"), "")
	if r.stdout != "hi\n" || r.code != 0 {
		t.Fatalf("got %+v, want hi and exit 0", r)
	}
	if n := h.srv.Status().AcceptWaits; n != 3 {
		t.Errorf("status accept_waits %d, want 3", n)
	}
	if warned := h.logged("accept failed"); warned != 1 {
		t.Errorf("%d warnings for one shortage, want 1", warned)
	}

	ln, err := Listen(filepath.Join(t.TempDir(), "s", "bridge.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{}, logrus.New())
	err = srv.Run(context.Background(), &shortListener{Listener: ln, fails: 1, err: syscall.EINVAL})
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Run after EINVAL from accept: %v, want that error", err)
	}
}

// TestUnparsedHelloFallsBack: the daemon never parses argv itself; a
// hello without the shim's parse of it goes to the real binary.
func TestUnparsedHelloFallsBack(t *testing.T) {
	h := newHarness(t, 0)
	for _, prog := range []string{"ssh", "scp", "sftp"} {
		c, err := net.Dial("unix", h.sock)
		if err != nil {
			t.Fatal(err)
		}
		hello, _ := json.Marshal(wire.HelloMsg{Prog: prog, Argv: []string{"127.0.0.1", "true"}, Cwd: h.cwd, Env: []string{"HOME=" + h.home}})
		if err := wire.Write(c, wire.Hello, hello); err != nil {
			t.Fatal(err)
		}
		f, err := wire.Read(c)
		c.Close()
		if err != nil || f.Type != wire.Fallback {
			t.Fatalf("%s: got %v %v, want a fallback", prog, f.Type, err)
		}
	}
}

// TestIdleKeepsMasters: the daemon is not idle while a connection is
// open, whatever its ControlPersist (ssh's master would be up); it is once
// -O exit closed it.
func TestIdleKeepsMasters(t *testing.T) {
	h := newHarness(t, 0)
	if r := h.run("ssh", h.sshArgs("-o", "ControlPersist=yes", "127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("ssh: %+v", r)
	}
	waitIdle(t, h)
	if h.srv.idle() {
		t.Fatal("idle with a master's connection open")
	}
	if r := h.run("ssh", h.sshArgs("-O", "exit", "127.0.0.1"), ""); r.code != 0 {
		t.Fatalf("ssh -O exit: %+v", r)
	}
	waitIdle(t, h)
	for deadline := time.Now().Add(5 * time.Second); !h.srv.idle(); {
		if time.Now().After(deadline) {
			t.Fatal("not idle after -O exit")
		}
		time.Sleep(time.Millisecond) // polling a condition, not a delay
	}
}

// TestPersistDeadline: ssh's master exits once CLOCK_BOOTTIME's whole
// seconds reach the idle moment's plus ControlPersist: less than
// ControlPersist after it, by the idle moment's fraction of a second.
func TestPersistDeadline(t *testing.T) {
	idle := time.Now()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Skip(err)
	}
	frac := ((time.Duration(ts.Nano())-time.Since(idle))%time.Second + time.Second) % time.Second
	got := persistDeadline(idle, 3*time.Second).Sub(idle)
	if want := 3*time.Second - frac; got < want-time.Millisecond || got > want+time.Millisecond || got > 3*time.Second {
		t.Errorf("persistDeadline: %v after idle, want %v", got, want)
	}
}

// TestOrphanedDaemonExits: a daemon whose socket was removed (with a
// job's data dir) exits once nothing keeps it up, rather than after its
// idle timeout: no shim can reach it.
func TestOrphanedDaemonExits(t *testing.T) {
	defer func(d time.Duration) { orphanCheckEvery = d }(orphanCheckEvery)
	orphanCheckEvery = 10 * time.Millisecond
	log := logrus.New()
	log.SetOutput(testWriter{t})
	srv := New(Config{Idle: time.Hour}, log)
	sock := filepath.Join(t.TempDir(), "s", "bridge.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	// Served once Run has started (and looked at its socket).
	waitFor(t, "the daemon to serve", func() bool {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil && srv.active.Load() > 0
	})
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon still runs 10 s after its socket was removed")
	}
}
