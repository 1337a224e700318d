package sshclient

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/ssh"
)

// testServer is an in-process SSH server on 127.0.0.1:0.
type testServer struct {
	t        *testing.T
	addr     *net.TCPAddr
	hostKey  ssh.Signer
	mu       sync.Mutex
	authKeys []ssh.PublicKey
	password string
	// kbd, when set, is the keyboard-interactive question list and the
	// expected answers.
	kbdQuestions []string
	kbdAnswers   []string
	banner       string
	// methods the server accepts, in the order it lists them.
	maxTries int
	// tcpipOpened counts direct-tcpip channels (ProxyJump).
	tcpipOpened int
	// ciphers, when set, are all the server offers.
	ciphers []string
	// extraKeys, when set, are host keys the server announces (with
	// its own) in hostkeys-00@openssh.com and proves; badProof signs
	// the wrong data.
	extraKeys []ssh.Signer
	badProof  bool
}

type serverOpt func(*testServer)

func withPassword(pw string) serverOpt { return func(s *testServer) { s.password = pw } }
func withAuthKey(k ssh.PublicKey) serverOpt {
	return func(s *testServer) { s.authKeys = append(s.authKeys, k) }
}
func withKbd(questions, answers []string) serverOpt {
	return func(s *testServer) { s.kbdQuestions, s.kbdAnswers = questions, answers }
}
func withBanner(b string) serverOpt     { return func(s *testServer) { s.banner = b } }
func withCiphers(c ...string) serverOpt { return func(s *testServer) { s.ciphers = c } }
func withExtraHostKeys(bad bool, k ...ssh.Signer) serverOpt {
	return func(s *testServer) { s.extraKeys, s.badProof = k, bad }
}

func newTestSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startServer runs a server until the test ends.
func startServer(t *testing.T, opts ...serverOpt) *testServer {
	t.Helper()
	srv := &testServer{t: t, hostKey: newTestSigner(t), maxTries: 6}
	for _, o := range opts {
		o(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	srv.addr = ln.Addr().(*net.TCPAddr)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go srv.serve(c)
		}
	}()
	return srv
}

func (srv *testServer) port() int { return srv.addr.Port }

func (srv *testServer) config() *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{MaxAuthTries: srv.maxTries}
	cfg.Ciphers = srv.ciphers
	cfg.AddHostKey(srv.hostKey)
	if srv.banner != "" {
		cfg.BannerCallback = func(ssh.ConnMetadata) string { return srv.banner }
	}
	srv.mu.Lock()
	keys := srv.authKeys
	srv.mu.Unlock()
	if len(keys) > 0 {
		cfg.PublicKeyCallback = func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			for _, a := range keys {
				if bytes.Equal(a.Marshal(), k.Marshal()) {
					return nil, nil
				}
			}
			return nil, fmt.Errorf("unknown key")
		}
	}
	if srv.password != "" {
		cfg.PasswordCallback = func(_ ssh.ConnMetadata, pw []byte) (*ssh.Permissions, error) {
			if string(pw) == srv.password {
				return nil, nil
			}
			return nil, fmt.Errorf("bad password")
		}
	}
	if srv.kbdQuestions != nil {
		cfg.KeyboardInteractiveCallback = func(_ ssh.ConnMetadata, ch ssh.KeyboardInteractiveChallenge) (*ssh.Permissions, error) {
			echos := make([]bool, len(srv.kbdQuestions))
			echos[0] = true
			ans, err := ch("", "", srv.kbdQuestions, echos)
			if err != nil {
				return nil, err
			}
			for i := range ans {
				if ans[i] != srv.kbdAnswers[i] {
					return nil, fmt.Errorf("wrong answer")
				}
			}
			return nil, nil
		}
	}
	return cfg
}

func (srv *testServer) serve(c net.Conn) {
	defer c.Close()
	sc, chans, reqs, err := ssh.NewServerConn(c, srv.config())
	if err != nil {
		return
	}
	if srv.extraKeys != nil {
		// As sshd's notify_hostkeys: right after authentication.
		var all []byte
		for _, k := range append([]ssh.Signer{srv.hostKey}, srv.extraKeys...) {
			all = append(all, ssh.Marshal(struct{ K []byte }{k.PublicKey().Marshal()})...)
		}
		_, _, _ = sc.SendRequest("hostkeys-00@openssh.com", false, all)
	}
	go func() {
		for r := range reqs {
			if r.Type == "hostkeys-prove-00@openssh.com" && srv.extraKeys != nil {
				_ = r.Reply(true, srv.prove(sc.SessionID(), r.Payload))
				continue
			}
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
	}()
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			go srv.session(nc)
		case "direct-tcpip":
			go srv.directTCPIP(nc)
		default:
			_ = nc.Reject(ssh.UnknownChannelType, "no")
		}
	}
}

// session answers "exec" with the command echoed back and status 0.
func (srv *testServer) session(nc ssh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	for r := range reqs {
		if r.Type != "exec" {
			_ = r.Reply(false, nil)
			continue
		}
		_ = r.Reply(true, nil)
		var cmd struct{ Command string }
		_ = ssh.Unmarshal(r.Payload, &cmd)
		fmt.Fprintf(ch, "ran %s\n", cmd.Command)
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
		return
	}
}

// directTCPIP implements ProxyJump's forwarding.
func (srv *testServer) directTCPIP(nc ssh.NewChannel) {
	var d struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &d); err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, "bad request")
		return
	}
	target, err := net.Dial("tcp", net.JoinHostPort(d.Host, strconv.Itoa(int(d.Port))))
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, "Connection refused")
		return
	}
	srv.mu.Lock()
	srv.tcpipOpened++
	srv.mu.Unlock()
	ch, reqs, err := nc.Accept()
	if err != nil {
		target.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	go func() {
		_, _ = io.Copy(ch, target)
		_ = ch.CloseWrite()
	}()
	_, _ = io.Copy(target, ch)
	target.Close()
	ch.Close()
}

// hostLine is the known_hosts line for the server under name.
func (srv *testServer) hostLine(name string) string {
	return name + " " + string(ssh.MarshalAuthorizedKey(srv.hostKey.PublicKey()))
}

// knownName is how known_hosts names this server.
func (srv *testServer) knownName() string {
	return fmt.Sprintf("[127.0.0.1]:%d", srv.port())
}

// fakePrompter answers prompts from a script and records everything.
type fakePrompter struct {
	mu      sync.Mutex
	answers []string
	prompts []string
	echos   []bool
	notes   strings.Builder
	// transcript interleaves prompts and notifications as a terminal
	// would show them.
	transcript strings.Builder
}

func (p *fakePrompter) Prompt(_ context.Context, prompt string, echo bool) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prompts = append(p.prompts, prompt)
	p.echos = append(p.echos, echo)
	p.transcript.WriteString(prompt)
	if len(p.answers) == 0 {
		return "", io.EOF
	}
	a := p.answers[0]
	p.answers = p.answers[1:]
	p.transcript.WriteString("\n")
	return a, nil
}

func (p *fakePrompter) Notify(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes.WriteString(text)
	p.transcript.WriteString(text)
}

func (p *fakePrompter) notified() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.notes.String()
}

// testLogger sends logs to t.Log until the test ends (a ProxyCommand
// may be reaped after that).
func testLogger(t *testing.T) logrus.FieldLogger {
	t.Helper()
	w := &tWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	l := logrus.New()
	l.SetOutput(w)
	l.SetLevel(logrus.DebugLevel)
	return l
}

type tWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(b), "\n"))
	}
	return len(b), nil
}

// writeKey writes signer's private key in OpenSSH format (optionally
// encrypted) and its .pub, returning the path.
func writeKey(t *testing.T, dir, name string, priv ed25519.PrivateKey, passphrase string) string {
	t.Helper()
	var (
		b   *pem.Block
		err error
	)
	if passphrase == "" {
		b, err = ssh.MarshalPrivateKey(priv, "test")
	} else {
		b, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	blockBytes := pem.EncodeToMemory(b)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, blockBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".pub", ssh.MarshalAuthorizedKey(pub), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func newEd25519(t *testing.T) (ed25519.PrivateKey, ssh.PublicKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// prove is sshd's server_input_hostkeys_prove.
func (srv *testServer) prove(sid, payload []byte) []byte {
	var resp []byte
	for len(payload) > 0 {
		var k struct {
			Blob []byte
			Rest []byte `ssh:"rest"`
		}
		if ssh.Unmarshal(payload, &k) != nil {
			return nil
		}
		payload = k.Rest
		for _, signer := range append([]ssh.Signer{srv.hostKey}, srv.extraKeys...) {
			if !bytes.Equal(signer.PublicKey().Marshal(), k.Blob) {
				continue
			}
			data := ssh.Marshal(struct{ Name, SID, Key string }{"hostkeys-prove-00@openssh.com", string(sid), string(k.Blob)})
			if srv.badProof {
				data = append(data, 0)
			}
			sig, err := signer.Sign(rand.Reader, data)
			if err != nil {
				return nil
			}
			resp = append(resp, ssh.Marshal(struct{ S []byte }{ssh.Marshal(sig)})...)
		}
	}
	return resp
}
