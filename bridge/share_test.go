package bridge

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"github.com/sirupsen/logrus"
)

// dialsTo is the number of logins the daemon made through controlPath.
func (h *harness) dialsTo(controlPath string) int {
	tg := h.srv.targets.lookup(controlPath)
	if tg == nil {
		return 0
	}
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.dials
}

// TestShareLikeOpenSSH: an invocation joins a connection only where ssh
// would multiplex it (same expanded ControlPath, ControlMaster auto or
// no beside a live master) and logs in where ssh would become the master;
// everything else goes to the real ssh, which connects on its own.
func TestShareLikeOpenSSH(t *testing.T) {
	h := newHarness(t, 0)
	// Without any Control* option: ssh's own connection, so the real ssh.
	noCP := []string{"-F", "none", "-o", "Port=" + h.port, "-o", "User=tester", "127.0.0.1", "true"}
	if r := h.run("ssh", noCP, ""); r.fallback != reasonNoControlPath {
		t.Fatalf("no ControlPath: %+v, want fallback %q", r, reasonNoControlPath)
	}
	if n := len(h.srv.targets.all()); n != 0 {
		t.Fatalf("%d targets after a fallback, want none", n)
	}
	cp := filepath.Join(t.TempDir(), "cp")
	at := func(master string) []string {
		return withOption(h.sshArgsAt(cp, "127.0.0.1", "true"), "ControlMaster", master)
	}
	steps := []struct {
		name     string
		args     []string
		fallback string // "" = served
		dials    int    // logins through cp afterwards
	}{
		{"ControlMaster=no, no master", at("no"), "ControlMaster=no without a master: " + reasonOwnConnection, 0},
		{"autoask", at("autoask"), "ControlMaster=autoask: " + reasonOwnConnection, 0},
		{"auto: the master logs in", at("auto"), "", 1},
		{"auto: a mux client", at("auto"), "", 1},
		{"ControlMaster=no: a mux client", at("no"), "", 1},
		{"ControlMaster=yes beside the master", at("yes"), "ControlMaster=yes beside a master: " + reasonOwnConnection, 1},
	}
	for _, s := range steps {
		r := h.run("ssh", s.args, "")
		if r.fallback != s.fallback || s.fallback == "" && r.code != 0 {
			t.Fatalf("%s: %+v, want fallback %q", s.name, r, s.fallback)
		}
		if got := h.dialsTo(cp); got != s.dials {
			t.Fatalf("%s: %d logins through the ControlPath, want %d", s.name, got, s.dials)
		}
	}
	// Another ControlPath is another connection: a login of its own.
	other := filepath.Join(t.TempDir(), "other")
	if r := h.run("ssh", h.sshArgsAt(other, "127.0.0.1", "true"), ""); r.code != 0 || h.dialsTo(other) != 1 || h.dialsTo(cp) != 1 {
		t.Fatalf("another ControlPath: %+v, logins %d and %d, want 1 each", r, h.dialsTo(other), h.dialsTo(cp))
	}
}

// withOption sets the value of -o key=... in args.
func withOption(args []string, key, value string) []string {
	for i, a := range args {
		if strings.HasPrefix(a, key+"=") {
			args[i] = key + "=" + value
		}
	}
	return args
}

// TestControlPersistNo: a master without ControlPersist ends with its
// last session, so the next invocation logs in again; it runs its
// session itself, not as a mux client, and says so as ssh does.
func TestControlPersistNo(t *testing.T) {
	h := newHarness(t, 0)
	cp := filepath.Join(t.TempDir(), "cp")
	args := withOption(h.sshArgsAt(cp, "-tt", "127.0.0.1", "true"), "ControlPersist", "no")
	for i := 1; i <= 2; i++ {
		if r := h.run("ssh", args, ""); r.code != 0 || r.stderr != "Connection to 127.0.0.1 closed.\r\n" {
			t.Fatalf("run %d: %+v", i, r)
		}
		// The daemon closes the connection once the invocation is done,
		// just after the shim has its exit status.
		waitFor(t, "the connection to close", func() bool { return !h.srv.targets.connected() })
		if got := h.dialsTo(cp); got != i {
			t.Fatalf("after run %d: %d logins, want %d", i, got, i)
		}
	}
}

// TestControlCommands: -O follows ControlPath semantics: none given is
// ssh's error, tokens are expanded, a master the bridge does not hold is
// not running, and a real ssh master's socket goes to the real ssh.
func TestControlCommands(t *testing.T) {
	h := newHarness(t, 0)
	r := h.run("ssh", []string{"-F", "none", "-O", "check", "127.0.0.1"}, "")
	if r.code != 255 || r.stderr != "No ControlPath specified for \"-O\" command\r\n" {
		t.Fatalf("no ControlPath: %+v", r)
	}
	dir := t.TempDir()
	long, _ := os.Hostname()
	sum := sha1.Sum([]byte(long + "127.0.0.1" + "22" + "bob"))
	r = h.run("ssh", []string{"-F", "none", "-o", "ControlPath=" + dir + "/%C", "-O", "check", "bob@127.0.0.1"}, "")
	want := "Control socket connect(" + dir + "/" + hex.EncodeToString(sum[:]) + "): No such file or directory\r\n"
	if r.code != 255 || r.stderr != want {
		t.Fatalf("%%C: %+v, want %q", r, want)
	}
	cp := filepath.Join(dir, "cp")
	if r := h.run("ssh", h.sshArgsAt(cp, "127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("master: %+v", r)
	}
	if r := h.run("ssh", h.sshArgsAt(cp, "-O", "check", "127.0.0.1"), ""); r.code != 0 || !strings.HasPrefix(r.stderr, "Master running (pid=") {
		t.Fatalf("-O check: %+v", r)
	}
	// A socket some ssh master listens on is that master's.
	real := filepath.Join(dir, "real")
	ln, err := net.Listen("unix", real)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, args := range [][]string{h.sshArgsAt(real, "-O", "exit", "127.0.0.1"), h.sshArgsAt(real, "127.0.0.1", "true")} {
		if r := h.run("ssh", args, ""); r.fallback != reasonRealMaster {
			t.Fatalf("%q: %+v, want fallback %q", args, r, reasonRealMaster)
		}
	}
}

// TestVerboseGoesToRealSSH: ssh's verbose and debug output (-v, LogLevel
// VERBOSE or DEBUG) is the real ssh's to print.
func TestVerboseGoesToRealSSH(t *testing.T) {
	h := newHarness(t, 0)
	for _, args := range [][]string{
		h.sshArgs("-v", "127.0.0.1", "true"),
		h.sshArgs("-o", "LogLevel=DEBUG2", "127.0.0.1", "true"),
		h.sshArgs("-o", "LogLevel=verbose", "127.0.0.1", "true"),
	} {
		if r := h.run("ssh", args, ""); r.fallback != fakessh.ReasonVerbose {
			t.Errorf("%q: %+v, want fallback %q", args, r, fakessh.ReasonVerbose)
		}
	}
	if r := h.run("scp", h.sshArgs("-v", "127.0.0.1:/etc/hostname", t.TempDir()), ""); r.fallback != fakessh.ReasonVerbose {
		t.Errorf("scp -v: %+v", r)
	}
}

// TestNoMasterMeansOwnLogin: an invocation that arrives while no master
// is up logs in itself, as ssh would, even when another invocation's
// login completes meanwhile: Ansible hosts that share an address (one
// with a wrong key) must not borrow each other's login.
func TestNoMasterMeansOwnLogin(t *testing.T) {
	h := newHarness(t, 0)
	cp := filepath.Join(t.TempDir(), "cp")
	dial := h.srv.targets.dial
	gate := make(chan struct{})
	var opened sync.Once
	open := func() { opened.Do(func() { close(gate) }) }
	t.Cleanup(open) // a failed test's daemon can stop
	var dials atomic.Int32
	h.srv.targets.dial = func(ctx context.Context, s *sshclient.Settings, p sshclient.Prompter, log logrus.FieldLogger) (*sshclient.Client, error) {
		if dials.Add(1) == 1 {
			<-gate // the first login is slow
		}
		return dial(ctx, s, p, log)
	}
	results := make(chan result, 2)
	run := func() { results <- h.run("ssh", h.sshArgsAt(cp, "127.0.0.1", "true"), "") }
	go run()
	waitFor(t, "the first login to start", func() bool { return dials.Load() == 1 })
	// The second ends while the first's login is still held: it logged
	// in itself, waiting for no one.
	go run()
	select {
	case r := <-results:
		if r.code != 0 {
			t.Fatalf("the second ssh: %+v", r)
		}
	case <-time.After(30 * time.Second): // only a failing run's bound
		t.Fatal("the second invocation waited for the first's login")
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("%d logins, want 2: the second invocation found no master", n)
	}
	open()
	if r := <-results; r.code != 0 {
		t.Fatalf("the first ssh: %+v", r)
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("%d logins, want 2", n)
	}
	// Now a master is up: the next one multiplexes over it.
	run()
	if r := <-results; r.code != 0 || dials.Load() != 2 {
		t.Fatalf("over the master: %+v, %d logins", r, dials.Load())
	}
}

// TestLoginHeldAtPrompt: a login waiting at a password prompt holds up
// nothing else on its ControlPath, as an ssh authenticating holds up no
// other ssh. Meanwhile -O check finds no socket (ssh's master listens
// only once logged in), status answers, and a second invocation logs in
// itself and becomes the master; the held login, once through, finds
// the socket taken and runs without multiplexing, its connection ending
// with it.
func TestLoginHeldAtPrompt(t *testing.T) {
	h := newHarness(t, 0)
	dial := h.srv.targets.dial
	prompting, answer := make(chan struct{}), make(chan struct{})
	var dials atomic.Int32
	var answered sync.Once
	t.Cleanup(func() { answered.Do(func() { close(answer) }) }) // so that the daemon can stop
	h.srv.targets.dial = func(ctx context.Context, s *sshclient.Settings, p sshclient.Prompter, log logrus.FieldLogger) (*sshclient.Client, error) {
		if dials.Add(1) == 1 {
			close(prompting)
			select { // a person yet to type the password
			case <-answer:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return dial(ctx, s, p, log)
	}
	within := func(what string, f func() result) result {
		t.Helper()
		done := make(chan result, 1)
		go func() { done <- f() }()
		select {
		case r := <-done:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("%s waits behind the login at its prompt", what)
			return result{}
		}
	}
	held := make(chan result, 1)
	go func() { held <- h.run("ssh", h.sshArgs("127.0.0.1", "echo held"), "") }()
	select {
	case <-prompting:
	case <-time.After(10 * time.Second):
		t.Fatal("the first login did not start")
	}

	noSocket := "Control socket connect(" + h.cp + "): No such file or directory\r\n"
	for _, op := range []string{"check", "stop", "exit"} {
		r := within("-O "+op, func() result { return h.run("ssh", h.sshArgs("-O", op, "127.0.0.1"), "") })
		if r.code != 255 || r.stdout != "" || r.stderr != noSocket {
			t.Errorf("-O %s during the login: %+v, want %q and 255", op, r, noSocket)
		}
	}
	st := within("status", func() result {
		for _, ts := range h.srv.Status().Targets {
			if ts.ControlPath == h.cp {
				return result{code: ts.Connections}
			}
		}
		return result{code: -1}
	})
	if st.code != 0 {
		t.Errorf("status during the login: %d connections, want 0", st.code)
	}
	if r := within("a second login", func() result { return h.run("ssh", h.sshArgs("127.0.0.1", "echo second"), "") }); r.code != 0 || r.stdout != "second\n" || r.stderr != "" {
		t.Fatalf("second login during the first: %+v", r)
	}
	if r := h.run("ssh", h.sshArgs("-O", "check", "127.0.0.1"), ""); r.code != 0 || !strings.HasPrefix(r.stderr, "Master running (pid=") {
		t.Fatalf("-O check once the second is master: %+v", r)
	}

	answered.Do(func() { close(answer) })
	r := <-held
	if want := "ControlSocket " + h.cp + " already exists, disabling multiplexing\r\n"; r.code != 0 || r.stdout != "held\n" || r.stderr != want {
		t.Fatalf("the held login: %+v, want stderr %q", r, want)
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("%d logins, want 2", n)
	}
	// Its connection was its own: it ended with it. The master rides on.
	tg := h.srv.targets.lookup(h.cp)
	waitFor(t, "the held login's connection to close", func() bool {
		tg.mu.Lock()
		defer tg.mu.Unlock()
		return len(tg.conns) == 1
	})
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo rider"), ""); r.code != 0 || r.stdout != "rider\n" || dials.Load() != 2 {
		t.Fatalf("over the master: %+v, %d logins", r, dials.Load())
	}
}

// TestMasterGoneMeansOwnLogin: an invocation found a master, which went
// (-O exit) before the invocation asked it for a session, and meanwhile
// another logged in and became the master. ssh's mux client, its master
// gone, logs in itself: so does the invocation, rather than ride the
// connection another's login made, and finding the new master's socket
// there it goes on without multiplexing.
func TestMasterGoneMeansOwnLogin(t *testing.T) {
	h := newHarness(t, 0)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo one"), ""); r.stdout != "one\n" {
		t.Fatalf("master: %+v", r)
	}
	conn, shim := net.Pipe()
	said := make(chan string, 1)
	go func() {
		var stderr strings.Builder
		for {
			f, err := wire.Read(shim)
			if err != nil {
				said <- stderr.String()
				return
			}
			if f.Type == wire.Stderr {
				stderr.Write(f.Payload)
			}
		}
	}()
	iv := &invocation{id: 1 << 40, conn: conn, log: logrus.New()}
	tg, fallback, err := h.srv.share(iv, &sshclient.Settings{ControlPath: h.cp, ControlMaster: "auto"})
	if err != nil || fallback != "" || iv.mustLogin.Load() {
		t.Fatalf("share: %v %q, mustLogin %v: want the master found", err, fallback, iv.mustLogin.Load())
	}
	if r := h.run("ssh", h.sshArgs("-O", "exit", "127.0.0.1"), ""); r.code != 0 {
		t.Fatalf("-O exit: %+v", r)
	}
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "echo two"), ""); r.stdout != "two\n" || h.dialsTo(h.cp) != 2 {
		t.Fatalf("the next master: %+v, %d logins", r, h.dialsTo(h.cp))
	}
	c, err := tg.use(context.Background(), iv, func(*sshConn) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if n := h.dialsTo(h.cp); n != 3 || c.owner != iv.id {
		t.Errorf("%d logins, connection's owner %d: want the invocation's own login (3, %d)", n, c.owner, iv.id)
	}
	c.release()
	tg.invocationDone(iv)
	conn.Close()
	if got, want := <-said, "ControlSocket "+h.cp+" already exists, disabling multiplexing\r\n"; got != want {
		t.Errorf("said %q, want %q", got, want)
	}
}

// TestControlPathAsSSH: what ssh does with the ControlPath itself. Too
// long for a socket is fatal before anything else; a new master that
// cannot listen beside it fails once logged in; a stale socket (or a
// file) there is removed, and a live one served.
func TestControlPathAsSSH(t *testing.T) {
	h := newHarness(t, 0)
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("l", 108))
	r := h.run("ssh", h.sshArgsAt(long, "127.0.0.1", "echo ran"), "")
	if r.code != 255 || r.stdout != "" || r.stderr != "ControlPath too long ('"+long+"' >= 108 bytes)\r\n" {
		t.Errorf("a path too long: %+v", r)
	}
	missing := filepath.Join(dir, "no", "such", "cp")
	r = h.run("ssh", h.sshArgsAt(missing, "127.0.0.1", "echo ran"), "")
	bind := regexp.MustCompile(`^unix_listener: cannot bind to path ` + regexp.QuoteMeta(missing) + `\.[A-Za-z0-9]{16}: No such file or directory\r\n$`)
	if r.code != 255 || r.stdout != "" || !bind.MatchString(r.stderr) {
		t.Errorf("a directory that is not there: %+v", r)
	}
	if h.ts.conns.Load() != 1 {
		t.Errorf("%d logins, want the one that failed to listen", h.ts.conns.Load())
	}
	stale := filepath.Join(dir, "stale")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := h.run("ssh", h.sshArgsAt(stale, "127.0.0.1", "echo ran"), ""); r.code != 0 || r.stdout != "ran\n" {
		t.Errorf("a stale file at the path: %+v", r)
	}
	// Removed; the new master's socket (while it lasts) in its place.
	if st, err := os.Lstat(stale); err == nil && st.Mode()&fs.ModeSocket == 0 {
		t.Errorf("the stale file is still there: %v", st.Mode())
	}
	// A directory there stays, and ssh runs without a master: the real one.
	busy := filepath.Join(dir, "busy")
	if err := os.Mkdir(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	if r := h.run("ssh", h.sshArgsAt(busy, "127.0.0.1", "echo ran"), ""); !strings.HasPrefix(r.fallback, "something at the ControlPath") {
		t.Errorf("a directory at the path: %+v", r)
	}
	if st, err := os.Lstat(busy); err != nil || !st.IsDir() {
		t.Errorf("the directory at the path went: %v", err)
	}
	// -O with no master: connect's own error, the path cut at 100 bytes.
	for _, tc := range []struct{ path, stderr string }{
		{busy, "Control socket connect(" + busy + "): Connection refused\r\n"},
		{missing, "Control socket connect(" + missing + "): No such file or directory\r\n"},
		{long, "ControlPath too long ('" + long + "' >= 108 bytes)\r\n"},
		{long[:105], "Control socket connect(" + long[:100] + "): No such file or directory\r\n"},
	} {
		if r := h.run("ssh", h.sshArgsAt(tc.path, "-O", "check", "127.0.0.1"), ""); r.code != 255 || r.stderr != tc.stderr {
			t.Errorf("-O check at %s: %+v, want %q", tc.path, r, tc.stderr)
		}
	}
}

// TestControlPathLogLevel: ssh's ControlPath messages are fatal() or
// error() lines, which LogLevel hides as it hides ssh's: -q (QUIET)
// shows none, FATAL only the fatal ones.
func TestControlPathLogLevel(t *testing.T) {
	h := newHarness(t, 0)
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("l", 108))
	missing := filepath.Join(dir, "no", "such", "cp")
	tooLong := "ControlPath too long ('" + long + "' >= 108 bytes)\r\n"
	noSocket := "Control socket connect(" + missing + "): No such file or directory\r\n"
	bind := regexp.MustCompile(`^unix_listener: cannot bind to path ` + regexp.QuoteMeta(missing) + `\.[A-Za-z0-9]{16}: No such file or directory\r\n$`)
	for _, tc := range []struct {
		level string // -q, or LogLevel's value
		args  []string
		want  string // "bind": the bind error
	}{
		{"-q", h.sshArgsAt(long, "-q", "127.0.0.1", "true"), ""},
		{"FATAL", h.sshArgsAt(long, "-o", "LogLevel=FATAL", "127.0.0.1", "true"), tooLong},
		{"-q", h.sshArgsAt(missing, "-q", "-O", "check", "127.0.0.1"), ""},
		{"QUIET", h.sshArgsAt(missing, "-o", "LogLevel=QUIET", "-O", "check", "127.0.0.1"), ""},
		{"FATAL", h.sshArgsAt(missing, "-o", "LogLevel=FATAL", "-O", "check", "127.0.0.1"), noSocket},
		{"-q", h.sshArgsAt(missing, "-q", "127.0.0.1", "true"), ""},
		{"FATAL", h.sshArgsAt(missing, "-o", "LogLevel=FATAL", "127.0.0.1", "true"), ""},
		{"ERROR", h.sshArgsAt(missing, "-o", "LogLevel=ERROR", "127.0.0.1", "true"), "bind"},
		{"-q", h.sshArgsAt(dir+"/cp-%Z", "-q", "127.0.0.1", "true"), ""},
		{"FATAL", h.sshArgsAt(dir+"/cp-%Z", "-o", "LogLevel=FATAL", "127.0.0.1", "true"), "percent_dollar_expand: failed\r\n"},
		{"-q", withOption(h.sshArgs("-q", "-O", "check", "127.0.0.1"), "ControlPath", "none"), ""},
	} {
		r := h.run("ssh", tc.args, "")
		ok := r.stderr == tc.want
		if tc.want == "bind" {
			ok = bind.MatchString(r.stderr)
		}
		if r.code != 255 || r.stdout != "" || !ok || r.fallback != "" {
			t.Errorf("%s %v: %+v, want %q", tc.level, tc.args[len(tc.args)-4:], r, tc.want)
		}
	}
}
