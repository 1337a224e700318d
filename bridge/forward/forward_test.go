package forward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func newSet(t *testing.T, c *ssh.Client, opts Options) *Set {
	t.Helper()
	opts.Log = testLogger(t)
	if opts.StreamLocalBindMask == 0 {
		opts.StreamLocalBindMask = 0o177
	}
	s := NewSet(c, opts)
	t.Cleanup(s.Close)
	return s
}

// listenAddrs is where spec's local listeners are.
func listenAddrs(t *testing.T, s *Set, spec Spec) []net.Addr {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.local {
		if f.spec.same(spec) {
			var a []net.Addr
			for _, ln := range f.lns {
				a = append(a, ln.Addr())
			}
			return a
		}
	}
	t.Fatalf("no listener for %+v", spec)
	return nil
}

func port(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

func dialOK(t *testing.T, a net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial(a.Network(), a.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	if err == nil {
		return ""
	}
	return "not an *Error: " + err.Error()
}

func TestLocalRelaysWithHalfClose(t *testing.T) {
	m := startMock(t)
	s := newSet(t, m.dial(t), Options{})
	tg := target(t, "tcp", "127.0.0.1:0")
	spec := Spec{Kind: Local, ListenHost: "127.0.0.1", ConnectHost: "127.0.0.1", ConnectPort: port(tg)}
	if _, err := s.Open(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	c := dialOK(t, listenAddrs(t, s, spec)[0])
	// The target answers only after our EOF reached it.
	if got := roundTrip(t, c, "hello"); got != "got:hello" {
		t.Fatalf("relayed %q", got)
	}
	m.mu.Lock()
	rec := m.opens[0]
	m.mu.Unlock()
	la := c.LocalAddr().(*net.TCPAddr)
	want := openRecord{"direct-tcpip", "127.0.0.1", uint32(port(tg)), "127.0.0.1", uint32(la.Port)}
	if rec != want {
		t.Errorf("direct-tcpip %+v, want %+v", rec, want)
	}
}

func TestLocalOpenFailureClosesConnection(t *testing.T) {
	m := startMock(t)
	s := newSet(t, m.dial(t), Options{})
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closed.Close()
	spec := Spec{Kind: Local, ListenHost: "127.0.0.1", ConnectHost: "127.0.0.1", ConnectPort: port(closed)}
	if _, err := s.Open(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	c := dialOK(t, listenAddrs(t, s, spec)[0])
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Fatalf("read %q", b)
	}
}

func TestLocalBindAddresses(t *testing.T) {
	m := startMock(t)
	c := m.dial(t)
	tests := []struct {
		host    string
		gateway bool
		want    []string // listener IPs
	}{
		{"", false, []string{"127.0.0.1", "::1"}},
		{"localhost", true, []string{"127.0.0.1", "::1"}},
		{"", true, []string{"0.0.0.0", "::"}},
		{"*", false, []string{"0.0.0.0", "::"}},
		{"127.0.0.1", false, []string{"127.0.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.host+"/"+strconv.FormatBool(tt.gateway), func(t *testing.T) {
			s := newSet(t, c, Options{GatewayPorts: tt.gateway})
			spec := Spec{Kind: Local, ListenHost: tt.host, ConnectHost: "h", ConnectPort: 1}
			if _, err := s.Open(t.Context(), spec); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range listenAddrs(t, s, spec) {
				got = append(got, a.(*net.TCPAddr).IP.String())
			}
			// Hosts without IPv6 bind only the IPv4 address, as OpenSSH does.
			if len(got) == 0 || got[0] != tt.want[0] || (len(got) == 2 && got[1] != tt.want[1]) {
				t.Errorf("listening on %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPortInUse(t *testing.T) {
	m := startMock(t)
	s := newSet(t, m.dial(t), Options{})
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, k := range []Kind{Local, Dynamic} {
		_, err := s.Open(t.Context(), Spec{Kind: k, ListenHost: "127.0.0.1", ListenPort: port(busy), ConnectHost: "socks", ConnectPort: map[Kind]int{Local: 22, Dynamic: 0}[k]})
		if reason(err) != "Port forwarding failed" {
			t.Errorf("kind %d: %v", k, err)
		}
	}
}

func TestDuplicateAndCancel(t *testing.T) {
	m := startMock(t)
	s := newSet(t, m.dial(t), Options{})
	spec := Spec{Kind: Local, ListenHost: "127.0.0.1", ListenPort: 0, ConnectHost: "127.0.0.1", ConnectPort: 9}
	for range 2 {
		if _, err := s.Open(t.Context(), spec); err != nil {
			t.Fatal(err)
		}
	}
	// compare_forward ignores the kind: -D of the same fields is a duplicate.
	dyn := spec
	dyn.Kind = Dynamic
	if _, err := s.Open(t.Context(), dyn); err != nil {
		t.Fatal(err)
	}
	if n := len(s.local); n != 1 {
		t.Fatalf("%d forwards, want 1", n)
	}
	addr := listenAddrs(t, s, spec)[0]
	if err := s.Cancel(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", addr.String()); err == nil {
		c.Close()
		t.Error("listener still open after cancel")
	}
	if err := s.Cancel(t.Context(), spec); reason(err) != "port not forwarded" {
		t.Errorf("second cancel: %v", err)
	}
}

func TestInvalidRequests(t *testing.T) {
	m := startMock(t)
	s := newSet(t, m.dial(t), Options{})
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"kind", Spec{Kind: 4, ConnectHost: "h", ConnectPort: 1}, "Invalid forwarding request"},
		{"local connect port 0", Spec{Kind: Local, ConnectHost: "h"}, "Invalid forwarding request"},
		{"local no host", Spec{Kind: Local, ConnectPort: 22}, "Invalid forwarding request"},
		{"remote no host", Spec{Kind: Remote, ListenPort: 80}, "Invalid forwarding request"},
		{"dynamic path", Spec{Kind: Dynamic, ListenHost: "/tmp/x", ListenPort: PortIsPath, ConnectHost: "socks"}, "Invalid forwarding request"},
		{"dynamic no host", Spec{Kind: Dynamic, ListenHost: "127.0.0.1"}, "Port forwarding failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Open(t.Context(), tt.spec); reason(err) != tt.want {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := s.Open(t.Context(), Spec{Kind: Local, ListenPort: 65536, ConnectHost: "h", ConnectPort: 1}); !errors.Is(err, ErrMalformed) {
		t.Errorf("port 65536: %v", err)
	}
}

func TestDynamic(t *testing.T) {
	m := startMock(t)
	s := newSet(t, m.dial(t), Options{})
	tg := target(t, "tcp", "127.0.0.1:0")
	spec := Spec{Kind: Dynamic, ListenHost: "127.0.0.1", ConnectHost: "socks"}
	if _, err := s.Open(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	addr := listenAddrs(t, s, spec)[0]
	p := byte(port(tg) >> 8)
	q := byte(port(tg))
	s4 := []byte{0, 90, 0, 0, 0, 0, 0, 0}
	s5 := []byte{5, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	tests := []struct {
		name  string
		req   []byte
		reply []byte // then "got:x" when it connects
		ok    bool
	}{
		{"socks4", []byte{4, 1, p, q, 127, 0, 0, 1, 'u', 0, 'x'}, s4, true},
		{"socks4a", append([]byte{4, 1, p, q, 0, 0, 0, 1, 0}, "127.0.0.1\x00x"...), s4, true},
		{"socks5 ipv4", []byte{5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, p, q, 'x'}, s5, true},
		{"socks5 domain", append(append([]byte{5, 2, 2, 0, 5, 1, 0, 3, 9}, "127.0.0.1"...), p, q, 'x'), s5, true},
		{"socks4 bind", []byte{4, 2, p, q, 127, 0, 0, 1, 0}, nil, false},
		{"socks5 no noauth", []byte{5, 1, 2}, nil, false},
		{"socks5 bind", []byte{5, 1, 0, 5, 2, 0, 1, 127, 0, 0, 1, p, q}, []byte{5, 0}, false},
		{"socks5 atyp", []byte{5, 1, 0, 5, 1, 0, 9, 127, 0, 0, 1, p, q}, []byte{5, 0}, false},
		{"version", []byte{6, 1, 0, 0}, nil, false},
		// The channel open fails: no reply, the connection just closes.
		{"refused", []byte{4, 1, 0, 1, 127, 0, 0, 1, 0}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialOK(t, addr)
			want := string(tt.reply)
			if tt.ok {
				want += "got:x"
			}
			if got := roundTrip(t, c, string(tt.req)); got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestSOCKSDecode(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		host string
		port uint32
	}{
		{"socks5 ipv6", []byte{5, 1, 0, 5, 1, 0, 4, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 80}, "2001:db8::1", 80},
		{"socks5 domain with NUL", []byte{5, 1, 0, 5, 1, 0, 3, 3, 'a', 0, 'b', 0, 22}, "a", 22},
		{"socks4a", append([]byte{4, 1, 1, 0, 0, 0, 0, 9, 'u', 's', 'e', 'r', 0}, "example.org\x00"...), "example.org", 256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time: every partial request must wait for more.
			r, w := io.Pipe()
			go func() {
				for _, b := range tt.in {
					w.Write([]byte{b})
				}
				w.Write([]byte("tail"))
				w.Close()
			}()
			req, err := readSOCKS(r, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if req.host != tt.host || req.port != tt.port {
				t.Errorf("got %s:%d", req.host, req.port)
			}
			r.Close()
		})
	}
	if _, err := readSOCKS(bytes.NewReader(append([]byte{4, 1, 0, 80, 0, 0, 0, 1}, bytes.Repeat([]byte("a"), 2000)...)), io.Discard); err == nil {
		t.Error("socks4a without NULs accepted")
	}
}

func TestRemote(t *testing.T) {
	m := startMock(t)
	s := newSet(t, m.dial(t), Options{})
	tg := target(t, "tcp", "127.0.0.1:0")
	spec := Spec{Kind: Remote, ConnectHost: "127.0.0.1", ConnectPort: port(tg)}
	allocated, err := s.Open(t.Context(), spec)
	if err != nil || allocated == 0 {
		t.Fatalf("allocated %d, %v", allocated, err)
	}
	m.mu.Lock()
	r := m.globals[0]
	m.mu.Unlock()
	if r.Type != "tcpip-forward" || !r.WantReply || string(r.Payload) != string(ssh.Marshal(&struct {
		H string
		P uint32
	}{"localhost", 0})) {
		t.Errorf("request %s %v %q", r.Type, r.WantReply, r.Payload)
	}
	c := dialOK(t, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: allocated})
	if got := roundTrip(t, c, "hi"); got != "got:hi" {
		t.Errorf("relayed %q", got)
	}
	// A duplicate gets the same port without a second request.
	if again, err := s.Open(t.Context(), spec); err != nil || again != allocated {
		t.Errorf("duplicate: %d, %v", again, err)
	}
	if err := s.Cancel(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	m.waitFor(t, func() bool { return len(m.globals) == 2 })
	m.mu.Lock()
	r = m.globals[1]
	m.mu.Unlock()
	if r.Type != "cancel-tcpip-forward" || r.WantReply || string(r.Payload) != string(ssh.Marshal(&struct {
		H string
		P uint32
	}{"localhost", uint32(allocated)})) {
		t.Errorf("cancel %s %v %q", r.Type, r.WantReply, r.Payload)
	}
	if err := s.Cancel(t.Context(), spec); reason(err) != "port not forwarded" {
		t.Errorf("second cancel: %v", err)
	}
}

func TestRemoteBindHost(t *testing.T) {
	for host, want := range map[string]string{"": "localhost", "*": "", "127.0.0.1": "127.0.0.1", "localhost": "localhost"} {
		if got := rfwdBindHost(host); got != want {
			t.Errorf("rfwdBindHost(%q) = %q, want %q", host, got, want)
		}
	}
}

func TestRemoteRefused(t *testing.T) {
	m := startMock(t)
	m.denyForward = true
	s := newSet(t, m.dial(t), Options{})
	_, err := s.Open(t.Context(), Spec{Kind: Remote, ListenPort: 8022, ConnectHost: "h", ConnectPort: 22})
	if reason(err) != "remote port forwarding failed for listen port 8022" {
		t.Errorf("port: %v", err)
	}
	_, err = s.Open(t.Context(), Spec{Kind: Remote, ListenHost: "/tmp/s", ListenPort: PortIsPath, ConnectHost: "h", ConnectPort: 22})
	if reason(err) != "remote port forwarding failed for listen path /tmp/s" {
		t.Errorf("path: %v", err)
	}
	if len(s.remote) != 0 {
		t.Errorf("failed forwards kept: %d", len(s.remote))
	}
}

// TestRemoteConnectFailure: a forwarded channel whose target cannot be
// connected is refused and said as ssh's master does (channels.c): a
// connect in progress that then fails, as to a refused loopback port, is
// "connect_to HOST port PORT: failed." and "connect failed" with
// strerror; one failing in connect(2) itself, as to a missing socket
// path, is "connect to HOST port PORT failed: REASON" and
// "administratively prohibited: open failed".
func TestRemoteConnectFailure(t *testing.T) {
	m := startMock(t)
	var mu sync.Mutex
	var said []string
	s := newSet(t, m.dial(t), Options{Say: func(line string) {
		mu.Lock()
		said = append(said, line)
		mu.Unlock()
	}})
	closed := target(t, "tcp", "127.0.0.1:0")
	refused := port(closed)
	closed.Close()
	missing := filepath.Join(t.TempDir(), "missing")
	for i, tt := range []struct {
		spec         Spec
		say, refusal string
	}{
		{Spec{Kind: Remote, ConnectHost: "127.0.0.1", ConnectPort: refused},
			fmt.Sprintf("connect_to 127.0.0.1 port %d: failed.", refused), "connect failed: Connection refused"},
		{Spec{Kind: Remote, ConnectHost: missing, ConnectPort: PortIsPath},
			"connect to " + missing + " port -2 failed: No such file or directory", "administratively prohibited: open failed"},
	} {
		allocated, err := s.Open(t.Context(), tt.spec)
		if err != nil {
			t.Fatal(err)
		}
		c := dialOK(t, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: allocated})
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Errorf("%s: the connection was not closed: %d, %v", tt.say, n, err)
		}
		m.waitFor(t, func() bool { return len(m.refusals) > i })
		m.mu.Lock()
		got := m.refusals[i]
		m.mu.Unlock()
		mu.Lock()
		line := said[i]
		mu.Unlock()
		if got != tt.refusal || line != tt.say {
			t.Errorf("refused %q, said %q; want %q, %q", got, line, tt.refusal, tt.say)
		}
	}
}

func TestRemoteDynamicAndStreamlocal(t *testing.T) {
	m := startMock(t)
	s := newSet(t, m.dial(t), Options{})
	tg := target(t, "tcp", "127.0.0.1:0")
	dir := t.TempDir()

	dyn := Spec{Kind: Remote, ConnectHost: "socks"}
	allocated, err := s.Open(t.Context(), dyn)
	if err != nil {
		t.Fatal(err)
	}
	c := dialOK(t, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: allocated})
	req := []byte{5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, byte(port(tg) >> 8), byte(port(tg)), 'x'}
	if got, want := roundTrip(t, c, string(req)), "\x05\x00\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00got:x"; got != want {
		t.Errorf("remote dynamic: %q, want %q", got, want)
	}

	unixTarget := target(t, "unix", filepath.Join(dir, "target"))
	sl := Spec{Kind: Remote, ListenHost: filepath.Join(dir, "remote"), ListenPort: PortIsPath,
		ConnectHost: unixTarget.Addr().String(), ConnectPort: PortIsPath}
	if _, err := s.Open(t.Context(), sl); err != nil {
		t.Fatal(err)
	}
	c = dialOK(t, &net.UnixAddr{Name: sl.ListenHost, Net: "unix"})
	if got := roundTrip(t, c, "y"); got != "got:y" {
		t.Errorf("streamlocal: %q", got)
	}
}

func TestLocalUnixSocket(t *testing.T) {
	m := startMock(t)
	c := m.dial(t)
	tg := target(t, "tcp", "127.0.0.1:0")
	path := filepath.Join(t.TempDir(), "fwd.sock")
	spec := Spec{Kind: Local, ListenHost: path, ListenPort: PortIsPath, ConnectHost: "127.0.0.1", ConnectPort: port(tg)}

	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := newSet(t, c, Options{})
	if _, err := s.Open(t.Context(), spec); reason(err) != "Port forwarding failed" {
		t.Fatalf("over an existing file: %v", err)
	}
	s = newSet(t, c, Options{StreamLocalBindUnlink: true, StreamLocalBindMask: 0o117})
	if _, err := s.Open(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v, %v", fi.Mode(), err)
	}
	conn := dialOK(t, &net.UnixAddr{Name: path, Net: "unix"})
	if got := roundTrip(t, conn, "z"); got != "got:z" {
		t.Errorf("relayed %q", got)
	}
	m.mu.Lock()
	rec := m.opens[len(m.opens)-1]
	m.mu.Unlock()
	if rec.origHost != "" || rec.origPort != 0 {
		t.Errorf("originator %q %d, want \"\" 0", rec.origHost, rec.origPort)
	}
	s.Close()
	// The socket file stays, as OpenSSH leaves it; nothing else does.
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 || ents[0].Name() != "fwd.sock" {
		t.Errorf("left in the directory: %v", ents)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	m := startMock(t)
	client := m.dial(t)
	tg := target(t, "tcp", "127.0.0.1:0")
	s := newSet(t, client, Options{})
	local := Spec{Kind: Local, ListenHost: "127.0.0.1", ConnectHost: "127.0.0.1", ConnectPort: port(tg)}
	dyn := Spec{Kind: Dynamic, ListenHost: "127.0.0.1", ConnectHost: "socks"}
	remote := Spec{Kind: Remote, ConnectHost: "127.0.0.1", ConnectPort: port(tg)}
	for _, spec := range []Spec{local, dyn, remote} {
		if _, err := s.Open(t.Context(), spec); err != nil {
			t.Fatal(err)
		}
	}
	addr := listenAddrs(t, s, local)[0]
	// A relay in progress: the target waits for EOF that never comes.
	live := dialOK(t, addr)
	live.Write([]byte("pending"))
	m.waitFor(t, func() bool { return len(m.opens) == 1 })

	s.Close()
	if b, _ := io.ReadAll(live); len(b) != 0 {
		t.Errorf("relay read %q after Close", b)
	}
	if c, err := net.Dial("tcp", addr.String()); err == nil {
		c.Close()
		t.Error("listener open after Close")
	}
	m.waitFor(t, func() bool { return len(m.fwds) == 0 }) // remote forward cancelled
	if _, err := s.Open(context.Background(), local); reason(err) != "Port forwarding failed" {
		t.Errorf("Open after Close: %v", err)
	}

	// With the connection gone too, no goroutine may be left.
	client.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+acceptLoops && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond) // polling, not synchronisation
	}
	if n := runtime.NumGoroutine(); n > before+acceptLoops {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// acceptLoops is what the mock server and the target keep running until
// the test's cleanup.
const acceptLoops = 2
