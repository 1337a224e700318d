package sshclient

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// TestMain lets the test binary act as a ProxyCommand (a tiny netcat).
func TestMain(m *testing.M) {
	if os.Getenv("SSHCLIENT_TEST_NC") == "1" {
		os.Exit(netcat(os.Args[len(os.Args)-2], os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

func netcat(host, port string) int {
	c, err := net.Dial("tcp", net.JoinHostPort(host, port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "nc:", err)
		return 1
	}
	go func() {
		_, _ = io.Copy(c, os.Stdin)
		c.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(os.Stdout, c)
	return 0
}

// testEnv is a shim environment with an empty home.
func testEnv(t *testing.T) Env {
	t.Helper()
	home := t.TempDir()
	return Env{Home: home, User: "tester", Cwd: home}
}

// settingsFor resolves "ssh -F none -o k=v ... 127.0.0.1" for srv.
func settingsFor(t *testing.T, env Env, port int, opts ...string) *Settings {
	t.Helper()
	inv := &fakessh.SSHInvocation{Host: "127.0.0.1", ConfigFile: "none"}
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		inv.Options = append(inv.Options, fakessh.Option{Key: strings.ToLower(k), Value: v})
	}
	inv.Options = append(inv.Options, fakessh.Option{Key: "port", Value: strconv.Itoa(port)})
	s, err := Resolve(inv, env)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return s
}

// run dials and runs one command, returning its output.
func run(t *testing.T, s *Settings, p Prompter) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, s, p, testLogger(t))
	if err != nil {
		return "", err
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	out, err := sess.Output("hello")
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	return string(out), nil
}

// connMsg returns the OpenSSH message of a Dial error.
func connMsg(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		t.Fatal("Dial succeeded, want an error")
	}
	var ce *ConnError
	if !errors.As(err, &ce) {
		t.Fatalf("error %T %v is not a *ConnError", err, err)
	}
	return ce.Msg
}

func TestDialAuth(t *testing.T) {
	priv, pub := newEd25519(t)
	encPriv, encPub := newEd25519(t)
	otherPriv, _ := newEd25519(t)
	cert := userCert(t, pub)
	noHK := []string{"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null"}
	tests := []struct {
		name        string
		server      []serverOpt
		opts        func(dir string) []string
		answers     []string
		wantPrompts []string
		wantEchos   []bool
		wantErr     string // exact ConnError.Msg; "" = success
		wantNotes   string // substring of the notifications
	}{
		{
			name:   "publickey",
			server: []serverOpt{withAuthKey(pub)},
			opts: func(dir string) []string {
				return []string{"IdentityFile=" + writeKey(t, dir, "id", priv, "")}
			},
		},
		{
			name:        "password",
			server:      []serverOpt{withPassword("pw")},
			answers:     []string{"pw"},
			wantPrompts: []string{"tester@127.0.0.1's password: "},
			wantEchos:   []bool{false},
		},
		{
			name:        "password retry",
			server:      []serverOpt{withPassword("pw")},
			answers:     []string{"bad", "pw"},
			wantPrompts: []string{"tester@127.0.0.1's password: ", "tester@127.0.0.1's password: "},
			wantNotes:   "Permission denied, please try again.\r\n",
		},
		{
			name:        "password exhausted",
			server:      []serverOpt{withPassword("pw")},
			answers:     []string{"a", "b", "c", "d"},
			wantPrompts: []string{"tester@127.0.0.1's password: ", "tester@127.0.0.1's password: ", "tester@127.0.0.1's password: "},
			wantErr:     "tester@127.0.0.1: Permission denied (password).",
		},
		{
			name:        "NumberOfPasswordPrompts",
			server:      []serverOpt{withPassword("pw")},
			opts:        func(string) []string { return []string{"NumberOfPasswordPrompts=1"} },
			answers:     []string{"a", "pw"},
			wantPrompts: []string{"tester@127.0.0.1's password: "},
			wantErr:     "tester@127.0.0.1: Permission denied (password).",
		},
		{
			name:    "BatchMode never prompts",
			server:  []serverOpt{withPassword("pw")},
			opts:    func(string) []string { return []string{"BatchMode=yes"} },
			answers: []string{"pw"},
			wantErr: "tester@127.0.0.1: Permission denied (password).",
		},
		{
			name:        "keyboard-interactive",
			server:      []serverOpt{withKbd([]string{"Name: ", "Password: "}, []string{"bob", "pw"})},
			answers:     []string{"bob", "pw"},
			wantPrompts: []string{"(tester@127.0.0.1) Name: ", "(tester@127.0.0.1) Password: "},
			wantEchos:   []bool{true, false},
		},
		{
			name:        "keyboard-interactive before password",
			server:      []serverOpt{withPassword("pw"), withKbd([]string{"Password: "}, []string{"pw"})},
			answers:     []string{"x", "x", "x", "pw"},
			wantPrompts: []string{"(tester@127.0.0.1) Password: ", "(tester@127.0.0.1) Password: ", "(tester@127.0.0.1) Password: ", "tester@127.0.0.1's password: "},
		},
		{
			name:        "PreferredAuthentications",
			server:      []serverOpt{withPassword("pw"), withKbd([]string{"Password: "}, []string{"pw"})},
			opts:        func(string) []string { return []string{"PreferredAuthentications=password"} },
			answers:     []string{"pw"},
			wantPrompts: []string{"tester@127.0.0.1's password: "},
		},
		{
			name:        "PasswordAuthentication=no",
			server:      []serverOpt{withPassword("pw"), withKbd([]string{"Password: "}, []string{"pw"})},
			opts:        func(string) []string { return []string{"PasswordAuthentication=no", "KbdInteractiveAuthentication=no"} },
			answers:     []string{"pw"},
			wantErr:     "tester@127.0.0.1: Permission denied (password,keyboard-interactive).",
			wantPrompts: nil,
		},
		{
			name:   "encrypted key asks after the server accepts it",
			server: []serverOpt{withAuthKey(encPub)},
			opts: func(dir string) []string {
				return []string{"IdentityFile=" + writeKey(t, dir, "other", otherPriv, "x"), "IdentityFile=" + writeKey(t, dir, "enc", encPriv, "secret")}
			},
			answers:     []string{"wrong", "secret"},
			wantPrompts: []string{"Enter passphrase for key 'DIR/enc': ", "Enter passphrase for key 'DIR/enc': "},
			wantEchos:   []bool{false, false},
		},
		{
			name:   "encrypted key in BatchMode",
			server: []serverOpt{withAuthKey(encPub)},
			opts: func(dir string) []string {
				return []string{"BatchMode=yes", "IdentityFile=" + writeKey(t, dir, "enc", encPriv, "secret")}
			},
			answers: []string{"secret"},
			wantErr: "tester@127.0.0.1: Permission denied (publickey).",
		},
		{
			name:   "unprotected key file",
			server: []serverOpt{withAuthKey(pub)},
			opts: func(dir string) []string {
				p := writeKey(t, dir, "open", priv, "")
				if err := os.Chmod(p, 0o644); err != nil {
					t.Fatal(err)
				}
				return []string{"IdentityFile=" + p}
			},
			wantErr:   "tester@127.0.0.1: Permission denied (publickey).",
			wantNotes: "@         WARNING: UNPROTECTED PRIVATE KEY FILE!          @\r\n@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\nPermissions 0644 for 'DIR/open' are too open.\r\nIt is required that your private key files are NOT accessible by others.\r\nThis private key will be ignored.\r\nLoad key \"DIR/open\": bad permissions\r\n",
		},
		{
			// load_identity_file says why it cannot read the file.
			name:   "identity file is a directory",
			server: []serverOpt{withAuthKey(pub)},
			opts: func(dir string) []string {
				if err := os.Mkdir(filepath.Join(dir, "keydir"), 0o700); err != nil {
					t.Fatal(err)
				}
				return []string{"IdentityFile=" + filepath.Join(dir, "keydir"), "IdentityFile=" + writeKey(t, dir, "id", priv, "")}
			},
			wantNotes: "Load key \"DIR/keydir\": Is a directory\r\n",
		},
		{
			// Nothing holds the certified key: ssh loads a private key
			// from the certificate's own file.
			name:   "certificate without its private key",
			server: []serverOpt{withAuthKey(cert)},
			opts: func(dir string) []string {
				p := filepath.Join(dir, "k-cert.pub")
				if err := os.WriteFile(p, ssh.MarshalAuthorizedKey(cert), 0o644); err != nil {
					t.Fatal(err)
				}
				return []string{"IdentitiesOnly=yes", "IdentityFile=" + writeKey(t, dir, "other", otherPriv, ""), "CertificateFile=" + p}
			},
			wantErr:   "tester@127.0.0.1: Permission denied (publickey).",
			wantNotes: "@         WARNING: UNPROTECTED PRIVATE KEY FILE!          @\r\n@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\nPermissions 0644 for 'DIR/k-cert.pub' are too open.\r\nIt is required that your private key files are NOT accessible by others.\r\nThis private key will be ignored.\r\nLoad key \"DIR/k-cert.pub\": bad permissions\r\n",
		},
		{
			// A CertificateFile is offered first and signed by the file
			// that holds its key, wherever it is.
			name:   "certificate signed by an identity file",
			server: []serverOpt{withAuthKey(cert)},
			opts: func(dir string) []string {
				p := filepath.Join(dir, "certs", "c.pub")
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, ssh.MarshalAuthorizedKey(cert), 0o644); err != nil {
					t.Fatal(err)
				}
				return []string{"IdentitiesOnly=yes", "IdentityFile=" + writeKey(t, dir, "id", priv, ""), "CertificateFile=" + p}
			},
		},
		{
			name:   "banner",
			server: []serverOpt{withPassword("pw"), withBanner("Authorized use only\n")},
			opts: func(string) []string {
				return nil
			},
			answers:     []string{"pw"},
			wantPrompts: []string{"tester@127.0.0.1's password: "},
			wantNotes:   "Authorized use only\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, tc.server...)
			env := testEnv(t)
			opts := append([]string(nil), noHK...)
			if tc.opts != nil {
				opts = append(opts, tc.opts(env.Home)...)
			}
			s := settingsFor(t, env, srv.port(), opts...)
			p := &fakePrompter{answers: tc.answers}
			out, err := run(t, s, p)
			if tc.wantErr != "" {
				if got := connMsg(t, err); got != tc.wantErr {
					t.Errorf("error message:\n got %q\nwant %q", got, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Dial: %v", err)
			} else if out != "ran hello\n" {
				t.Errorf("output %q", out)
			}
			var want []string
			for _, w := range tc.wantPrompts {
				want = append(want, strings.ReplaceAll(w, "DIR", env.Home))
			}
			if strings.Join(p.prompts, "|") != strings.Join(want, "|") {
				t.Errorf("prompts:\n got %q\nwant %q", p.prompts, want)
			}
			for i, e := range tc.wantEchos {
				if i < len(p.echos) && p.echos[i] != e {
					t.Errorf("prompt %d echo = %v, want %v", i, p.echos[i], e)
				}
			}
			if w := strings.ReplaceAll(tc.wantNotes, "DIR", env.Home); !strings.Contains(p.notified(), w) {
				t.Errorf("notifications %q do not contain %q", p.notified(), w)
			}
		})
	}
}

// serveAgent serves keyring as an ssh-agent until the test ends,
// returning its socket.
func serveAgent(t *testing.T, keyring agent.Agent) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = agent.ServeAgent(keyring, c); c.Close() }()
		}
	}()
	return sock
}

func TestDialAgent(t *testing.T) {
	priv, pub := newEd25519(t)
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv, Comment: "agentkey"}); err != nil {
		t.Fatal(err)
	}
	sock := serveAgent(t, keyring)
	otherPriv, _ := newEd25519(t)
	tests := []struct {
		name    string
		opts    func(dir string) []string
		wantErr string
	}{
		{name: "agent key"},
		{name: "IdentityAgent none", opts: func(string) []string { return []string{"IdentityAgent=none"} },
			wantErr: "tester@127.0.0.1: Permission denied (publickey)."},
		{name: "IdentitiesOnly drops other agent keys", opts: func(dir string) []string {
			return []string{"IdentitiesOnly=yes", "IdentityFile=" + writeKey(t, dir, "other", otherPriv, "")}
		}, wantErr: "tester@127.0.0.1: Permission denied (publickey)."},
		{name: "IdentitiesOnly keeps the agent's copy of a file key", opts: func(dir string) []string {
			// The file is encrypted; only the agent can sign with it.
			return []string{"IdentitiesOnly=yes", "BatchMode=yes", "IdentityFile=" + writeKey(t, dir, "mine", priv, "secret")}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, withAuthKey(pub))
			env := testEnv(t)
			env.AuthSock = sock
			opts := []string{"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null"}
			if tc.opts != nil {
				opts = append(opts, tc.opts(env.Home)...)
			}
			_, err := run(t, settingsFor(t, env, srv.port(), opts...), nil)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				return
			}
			if got := connMsg(t, err); got != tc.wantErr {
				t.Errorf("got %q, want %q", got, tc.wantErr)
			}
		})
	}
}

func TestDialKnownHosts(t *testing.T) {
	priv, pub := newEd25519(t)
	stranger := newTestSigner(t)
	tests := []struct {
		name      string
		known     func(srv *testServer) string // known_hosts content
		opts      []string
		answers   []string
		wantErr   string // with PORT and FILE substituted
		wantNotes string
		wantFile  func(t *testing.T, srv *testServer, content string)
	}{
		{
			name:    "unknown host, strict",
			opts:    []string{"StrictHostKeyChecking=yes"},
			wantErr: "No ED25519 host key is known for [127.0.0.1]:PORT and you have requested strict checking.\r\nHost key verification failed.",
		},
		{
			name:    "unknown host, ask without an answer",
			opts:    []string{"StrictHostKeyChecking=ask"},
			wantErr: "Host key verification failed.",
		},
		{
			name:      "unknown host, ask and yes",
			opts:      []string{"StrictHostKeyChecking=ask"},
			answers:   []string{"yes"},
			wantNotes: "Warning: Permanently added '[127.0.0.1]:PORT' (ED25519) to the list of known hosts.\r\n",
			wantFile: func(t *testing.T, srv *testServer, content string) {
				if content != srv.hostLine(srv.knownName()) {
					t.Errorf("known_hosts %q", content)
				}
			},
		},
		{
			name:      "unknown host, accept-new",
			opts:      []string{"StrictHostKeyChecking=accept-new"},
			wantNotes: "Warning: Permanently added '[127.0.0.1]:PORT' (ED25519) to the list of known hosts.\r\n",
			wantFile: func(t *testing.T, srv *testServer, content string) {
				if content != srv.hostLine(srv.knownName()) {
					t.Errorf("known_hosts %q", content)
				}
			},
		},
		{
			name: "accept-new hashed",
			opts: []string{"StrictHostKeyChecking=accept-new", "HashKnownHosts=yes"},
			wantFile: func(t *testing.T, srv *testServer, content string) {
				if !strings.HasPrefix(content, "|1|") || !hashedMatch(strings.Fields(content)[0], srv.knownName()) {
					t.Errorf("known_hosts %q is not a hashed entry for %s", content, srv.knownName())
				}
			},
		},
		{
			name:  "known host",
			known: func(srv *testServer) string { return srv.hostLine(srv.knownName()) },
			opts:  []string{"StrictHostKeyChecking=yes"},
		},
		{
			name:  "known under a hashed name",
			known: func(srv *testServer) string { return srv.hostLine(hashName(srv.knownName())) },
			opts:  []string{"StrictHostKeyChecking=yes"},
		},
		{
			name: "right key after a stale one",
			known: func(srv *testServer) string {
				return "# comment\nbroken line\n" + srv.hostLine(srv.knownName()+",other") + srv.hostLine(srv.knownName())
			},
			opts: []string{"StrictHostKeyChecking=yes"},
		},
		{
			name:  "HostKeyAlias",
			known: func(srv *testServer) string { return srv.hostLine("myalias") },
			opts:  []string{"StrictHostKeyChecking=yes", "HostKeyAlias=MyAlias"},
		},
		{
			// OpenSSH: "checking without port identifier" ... "found
			// matching key w/out port".
			name:  "the bare host name's entry holds the key of a non-22 port",
			known: func(srv *testServer) string { return srv.hostLine("127.0.0.1") },
			opts:  []string{"StrictHostKeyChecking=yes"},
		},
		{
			name: "the bare host name's entry holds another key: unknown, not changed",
			known: func(srv *testServer) string {
				return "127.0.0.1 " + string(ssh.MarshalAuthorizedKey(stranger.PublicKey()))
			},
			opts:    []string{"StrictHostKeyChecking=yes"},
			wantErr: "No ED25519 host key is known for [127.0.0.1]:PORT and you have requested strict checking.\r\nHost key verification failed.",
		},
		{
			name:    "HostKeyAlias turns the bare host name fallback off",
			known:   func(srv *testServer) string { return srv.hostLine("127.0.0.1") },
			opts:    []string{"StrictHostKeyChecking=yes", "HostKeyAlias=myalias"},
			wantErr: "No ED25519 host key is known for myalias and you have requested strict checking.\r\nHost key verification failed.",
		},
		{
			name: "changed key, strict",
			known: func(srv *testServer) string {
				return "# first line\n[127.0.0.1]:PORT " + string(ssh.MarshalAuthorizedKey(stranger.PublicKey()))
			},
			opts: []string{"StrictHostKeyChecking=accept-new"},
			wantErr: "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n" +
				"@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n" +
				"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n" +
				"IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\r\n" +
				"Someone could be eavesdropping on you right now (man-in-the-middle attack)!\r\n" +
				"It is also possible that a host key has just been changed.\r\n" +
				"The fingerprint for the ED25519 key sent by the remote host is\nFPR.\r\n" +
				"Please contact your system administrator.\r\n" +
				"Add correct host key in FILE to get rid of this message.\r\n" +
				"Offending ED25519 key in FILE:2\r\n" +
				"  remove with:\r\n" +
				"  ssh-keygen -f \"FILE\" -R \"[127.0.0.1]:PORT\"\r\n" +
				"Host key for [127.0.0.1]:PORT has changed and you have requested strict checking.\r\n" +
				"Host key verification failed.",
		},
		{
			name: "changed key, StrictHostKeyChecking=no goes on without passwords",
			known: func(srv *testServer) string {
				return "[127.0.0.1]:PORT " + string(ssh.MarshalAuthorizedKey(stranger.PublicKey()))
			},
			opts:      []string{"StrictHostKeyChecking=no"},
			wantNotes: "Password authentication is disabled to avoid man-in-the-middle attacks.\r\nKeyboard-interactive authentication is disabled to avoid man-in-the-middle attacks.\r\n",
		},
		// ssh cannot record a key without a user known_hosts file: it
		// refuses an unknown host whatever StrictHostKeyChecking says,
		// without the strict checking line.
		{
			name:    "unknown host, no known_hosts files, accept-new",
			opts:    []string{"UserKnownHostsFile=none", "GlobalKnownHostsFile=none", "StrictHostKeyChecking=accept-new"},
			wantErr: "Host key verification failed.",
		},
		{
			name:    "unknown host, no known_hosts files, no",
			opts:    []string{"UserKnownHostsFile=none", "GlobalKnownHostsFile=/dev/null", "StrictHostKeyChecking=no"},
			wantErr: "Host key verification failed.",
		},
		{
			name:    "unknown host, no known_hosts files, strict",
			opts:    []string{"UserKnownHostsFile=none", "GlobalKnownHostsFile=none", "StrictHostKeyChecking=yes"},
			wantErr: "Host key verification failed.",
		},
		{
			name:  "known in the global file only, no user file",
			known: func(srv *testServer) string { return srv.hostLine(srv.knownName()) },
			opts:  []string{"UserKnownHostsFile=none", "GlobalKnownHostsFile=FILE", "StrictHostKeyChecking=accept-new"},
		},
		{
			name: "changed in the global file, no user file: ssh names the global file",
			known: func(srv *testServer) string {
				return "[127.0.0.1]:PORT " + string(ssh.MarshalAuthorizedKey(stranger.PublicKey()))
			},
			opts: []string{"UserKnownHostsFile=none", "GlobalKnownHostsFile=FILE", "StrictHostKeyChecking=yes"},
			wantErr: "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n" +
				"@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n" +
				"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n" +
				"IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\r\n" +
				"Someone could be eavesdropping on you right now (man-in-the-middle attack)!\r\n" +
				"It is also possible that a host key has just been changed.\r\n" +
				"The fingerprint for the ED25519 key sent by the remote host is\nFPR.\r\n" +
				"Please contact your system administrator.\r\n" +
				"Add correct host key in FILE to get rid of this message.\r\n" +
				"Offending ED25519 key in FILE:1\r\n" +
				"  remove with:\r\n" +
				"  ssh-keygen -f \"FILE\" -R \"[127.0.0.1]:PORT\"\r\n" +
				"Host key for [127.0.0.1]:PORT has changed and you have requested strict checking.\r\n" +
				"Host key verification failed.",
		},
		{
			name: "revoked key",
			known: func(srv *testServer) string {
				return "@revoked * " + string(ssh.MarshalAuthorizedKey(srv.hostKey.PublicKey())) + srv.hostLine(srv.knownName())
			},
			opts: []string{"StrictHostKeyChecking=yes"},
			wantErr: "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n" +
				"@       WARNING: REVOKED HOST KEY DETECTED!               @\r\n" +
				"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n" +
				"The ED25519 host key for [127.0.0.1]:PORT is marked as revoked.\r\n" +
				"This could mean that a stolen key is being used to\r\n" +
				"impersonate this host.\r\n" +
				"ED25519 host key for [127.0.0.1]:PORT was revoked and you have requested strict checking.\r\n" +
				"Host key verification failed.",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, withAuthKey(pub))
			env := testEnv(t)
			kh := filepath.Join(env.Home, "kh")
			port := strconv.Itoa(srv.port())
			if tc.known != nil {
				if err := os.WriteFile(kh, []byte(strings.ReplaceAll(tc.known(srv), "PORT", port)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var opts []string
			for _, o := range tc.opts {
				opts = append(opts, strings.ReplaceAll(o, "FILE", kh))
			}
			opts = append(opts, "UserKnownHostsFile="+kh, "IdentityFile="+writeKey(t, env.Home, "id", priv, ""))
			p := &fakePrompter{answers: tc.answers}
			_, err := run(t, settingsFor(t, env, srv.port(), opts...), p)
			sub := strings.NewReplacer("PORT", port, "FILE", kh, "FPR", ssh.FingerprintSHA256(srv.hostKey.PublicKey()))
			if tc.wantErr != "" {
				if got, want := connMsg(t, err), sub.Replace(tc.wantErr); got != want {
					t.Errorf("error message:\n got %q\nwant %q", got, want)
				}
			} else if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			if w := sub.Replace(tc.wantNotes); !strings.Contains(p.notified(), w) {
				t.Errorf("notifications %q do not contain %q", p.notified(), w)
			}
			if tc.wantFile != nil {
				data, _ := os.ReadFile(kh)
				tc.wantFile(t, srv, string(data))
			}
		})
	}
}

func TestAskPrompt(t *testing.T) {
	priv, pub := newEd25519(t)
	srv := startServer(t, withAuthKey(pub))
	env := testEnv(t)
	other := filepath.Join(env.Home, "other")
	if err := os.WriteFile(other, []byte(srv.hostLine("elsewhere")), 0o644); err != nil {
		t.Fatal(err)
	}
	s := settingsFor(t, env, srv.port(), "IdentityFile="+writeKey(t, env.Home, "id", priv, ""),
		"GlobalKnownHostsFile="+other)
	p := &fakePrompter{answers: []string{"maybe", "no"}}
	_, err := run(t, s, p)
	if got := connMsg(t, err); got != "Host key verification failed." {
		t.Errorf("got %q", got)
	}
	want := fmt.Sprintf("The authenticity of host '[127.0.0.1]:%d ([127.0.0.1]:%d)' can't be established.\n"+
		"ED25519 key fingerprint is %s.\n"+
		"This host key is known by the following other names/addresses:\n"+
		"    %s:1: elsewhere\n"+
		"Are you sure you want to continue connecting (yes/no/[fingerprint])? ",
		srv.port(), srv.port(), ssh.FingerprintSHA256(srv.hostKey.PublicKey()), other)
	if len(p.prompts) != 2 || p.prompts[0] != want || p.prompts[1] != "Please type 'yes', 'no' or the fingerprint: " {
		t.Errorf("prompts %q\nwant first %q", p.prompts, want)
	}
	if _, err := os.Stat(filepath.Join(env.Home, ".ssh")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("~/.ssh created although nothing was added: %v", err)
	}

	// Confirming with the fingerprint adds the key to ~/.ssh/known_hosts,
	// creating ~/.ssh.
	p = &fakePrompter{answers: []string{ssh.FingerprintSHA256(srv.hostKey.PublicKey())}}
	if _, err := run(t, s, p); err != nil {
		t.Fatalf("Dial: %v", err)
	}
	st, err := os.Stat(filepath.Join(env.Home, ".ssh"))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("~/.ssh: %v %v", st, err)
	}
	data, _ := os.ReadFile(filepath.Join(env.Home, ".ssh", "known_hosts"))
	if string(data) != srv.hostLine(srv.knownName()) {
		t.Errorf("known_hosts %q", data)
	}
}

func TestDialProxyJump(t *testing.T) {
	priv, pub := newEd25519(t)
	jump := startServer(t, withAuthKey(pub))
	jump2 := startServer(t, withAuthKey(pub))
	target := startServer(t, withAuthKey(pub))
	env := testEnv(t)
	key := writeKey(t, env.Home, "id", priv, "")
	cfg := filepath.Join(env.Home, "config")
	if err := os.WriteFile(cfg, []byte("Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  IdentityFile "+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	// As a would-be ControlPersist master, ssh runs the hop's "ssh -W"
	// with its stderr on /dev/null: only its own lines are left.
	persist := []fakessh.Option{{Key: "controlpath", Value: filepath.Join(env.Home, "cm-%C")}, {Key: "controlpersist", Value: "60s"}}
	tests := []struct {
		name    string
		jump    string
		port    int
		opts    []fakessh.Option
		wantErr string
	}{
		{name: "one hop", jump: fmt.Sprintf("127.0.0.1:%d", jump.port()), port: target.port()},
		{name: "one hop, ControlPersist", jump: fmt.Sprintf("127.0.0.1:%d", jump.port()), port: target.port(), opts: persist},
		{name: "two hops", jump: fmt.Sprintf("tester@127.0.0.1:%d,ssh://127.0.0.1:%d", jump2.port(), jump.port()), port: target.port()},
		{name: "hop refused", jump: fmt.Sprintf("127.0.0.1:%d", deadPort), port: target.port(),
			wantErr: fmt.Sprintf("ssh: connect to host 127.0.0.1 port %d: Connection refused\r\n"+
				"kex_exchange_identification: Connection closed by remote host\r\n"+
				"Connection closed by UNKNOWN port 65535", deadPort)},
		{name: "target refused", jump: fmt.Sprintf("127.0.0.1:%d", jump.port()), port: deadPort,
			wantErr: "channel 0: open failed: connect failed: Connection refused\r\n" +
				"stdio forwarding failed\r\n" +
				"kex_exchange_identification: Connection closed by remote host\r\n" +
				"Connection closed by UNKNOWN port 65535"},
		{name: "hop refused, ControlPersist", jump: fmt.Sprintf("127.0.0.1:%d", deadPort), port: target.port(), opts: persist,
			wantErr: "kex_exchange_identification: Connection closed by remote host\r\n" +
				"Connection closed by UNKNOWN port 65535"},
		{name: "target refused, ControlPersist", jump: fmt.Sprintf("127.0.0.1:%d", jump.port()), port: deadPort, opts: persist,
			wantErr: "kex_exchange_identification: Connection closed by remote host\r\n" +
				"Connection closed by UNKNOWN port 65535"},
		{name: "target refused, LogLevel ERROR", jump: fmt.Sprintf("127.0.0.1:%d", jump.port()), port: deadPort,
			opts: []fakessh.Option{{Key: "loglevel", Value: "ERROR"}},
			wantErr: "channel 0: open failed: connect failed: Connection refused\r\n" +
				"stdio forwarding failed\r\n" +
				"kex_exchange_identification: Connection closed by remote host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := &fakessh.SSHInvocation{Host: "127.0.0.1", ConfigFile: cfg, Options: append([]fakessh.Option{
				{Key: "port", Value: strconv.Itoa(tc.port)}, {Key: "proxyjump", Value: tc.jump}}, tc.opts...)}
			s, err := Resolve(inv, env)
			if err != nil {
				t.Fatal(err)
			}
			if s.Jump == nil || s.Jump.Port != jump.port() && tc.wantErr == "" {
				t.Fatalf("jump settings %+v", s.Jump)
			}
			p := &fakePrompter{}
			out, err := run(t, s, p)
			hop := fmt.Sprintf("[127.0.0.1]:%d", jump.port())
			silenced := len(tc.opts) > 0 && tc.opts[0].Key == "controlpath"
			hopUp := !strings.Contains(tc.jump, strconv.Itoa(deadPort))
			if got := p.notified(); strings.Contains(got, hop) != (hopUp && !silenced) {
				t.Errorf("the hop's notices (its known_hosts warning) %q", got)
			}
			if tc.wantErr != "" {
				if got := connMsg(t, err); got != tc.wantErr {
					t.Errorf("got %q\nwant %q", got, tc.wantErr)
				}
				return
			}
			if err != nil || out != "ran hello\n" {
				t.Fatalf("out %q, err %v", out, err)
			}
		})
	}
	for _, c := range []struct {
		srv  *testServer
		want int
	}{{jump, 3}, {jump2, 1}} {
		c.srv.mu.Lock()
		n := c.srv.tcpipOpened
		c.srv.mu.Unlock()
		if n != c.want {
			t.Errorf("jump host on port %d forwarded %d connections, want %d", c.srv.port(), n, c.want)
		}
	}

	// Jumping to the destination itself is refused like OpenSSH.
	inv := &fakessh.SSHInvocation{Host: "127.0.0.1", ConfigFile: "none", Options: []fakessh.Option{
		{Key: "port", Value: "2222"}, {Key: "proxyjump", Value: "127.0.0.1:2222"}}}
	if _, err := Resolve(inv, env); err == nil || err.Error() != "jumphost loop via 127.0.0.1" {
		t.Errorf("loop: %v", err)
	}
}

func TestDialProxyCommand(t *testing.T) {
	priv, pub := newEd25519(t)
	srv := startServer(t, withAuthKey(pub))
	env := testEnv(t)
	env.Environ = append(os.Environ(), "SSHCLIENT_TEST_NC=1", "SHELL=/bin/sh")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	key := writeKey(t, env.Home, "id", priv, "")
	tests := []struct {
		name      string
		cmd       string
		opts      []string
		persist   bool // ControlPath and ControlPersist: stderr goes to /dev/null
		wantErr   string
		wantNotes string
	}{
		{name: "netcat", cmd: "'" + self + "' %h %p"},
		{name: "bash /dev/tcp", cmd: "bash -c 'exec 3<>/dev/tcp/%h/%p; cat <&3 & cat >&3'"},
		{name: "exits", cmd: "false", wantErr: "kex_exchange_identification: Connection closed by remote host\r\nConnection closed by UNKNOWN port 65535"},
		{name: "stderr", cmd: "sh -c 'echo proxy says hi >&2; exit 1'",
			wantErr: "kex_exchange_identification: Connection closed by remote host\r\nConnection closed by UNKNOWN port 65535", wantNotes: "proxy says hi\n"},
		{name: "stderr, ControlPersist", cmd: "sh -c 'echo proxy says hi >&2; exit 1'", persist: true,
			wantErr: "kex_exchange_identification: Connection closed by remote host\r\nConnection closed by UNKNOWN port 65535"},
		{name: "stderr, LogLevel ERROR", cmd: "sh -c 'echo proxy says hi >&2; exit 1'", opts: []string{"LogLevel=ERROR"},
			wantErr: "kex_exchange_identification: Connection closed by remote host", wantNotes: "proxy says hi\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.cmd, "bash") {
				if _, err := os.Stat("/bin/bash"); err != nil {
					t.Skip("no bash")
				}
			}
			opts := append([]string{"ProxyCommand=" + tc.cmd, "StrictHostKeyChecking=no",
				"UserKnownHostsFile=/dev/null", "IdentityFile=" + key}, tc.opts...)
			if tc.persist {
				opts = append(opts, "ControlPath="+filepath.Join(env.Home, "cm-%C"), "ControlPersist=60s")
			}
			s := settingsFor(t, env, srv.port(), opts...)
			p := &fakePrompter{}
			out, err := run(t, s, p)
			if tc.wantErr != "" {
				if got := connMsg(t, err); got != tc.wantErr {
					t.Errorf("got %q, want %q", got, tc.wantErr)
				}
			} else if err != nil || out != "ran hello\n" {
				t.Fatalf("out %q, err %v", out, err)
			}
			if !strings.Contains(p.notified(), tc.wantNotes) {
				t.Errorf("notifications %q lack %q", p.notified(), tc.wantNotes)
			}
			if tc.persist && p.notified() != "" {
				t.Errorf("the proxy's stderr reached the shim: %q", p.notified())
			}
		})
	}
}

// TestDialProxyCommandExecFails: a $SHELL that cannot be run prints what
// ssh's child prints (perror), then ssh's lines for a closed stream.
func TestDialProxyCommandExecFails(t *testing.T) {
	env := testEnv(t)
	env.Environ = append(os.Environ(), "SHELL=/nonexistent/sh")
	s := settingsFor(t, env, 22, "ProxyCommand=true")
	p := &fakePrompter{}
	_, err := run(t, s, p)
	if got, want := connMsg(t, err), "kex_exchange_identification: Connection closed by remote host\r\nConnection closed by UNKNOWN port 65535"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := p.notified(); got != "/nonexistent/sh: No such file or directory\n" {
		t.Errorf("notifications %q", got)
	}
}

// proxyStarter starts the ProxyCommand as the shim would, and records
// what it was asked.
type proxyStarter struct {
	fakePrompter
	shell, command string
	stderrNull     bool
	hangups        atomic.Int32
}

func (p *proxyStarter) StartProxy(_ context.Context, shell, command string, stderrNull bool) (*os.File, *os.File, func(), error) {
	p.shell, p.command, p.stderrNull = shell, command, stderrNull
	cmd := exec.Command(shell, "-c", command)
	cmd.Env = append(os.Environ(), "SSHCLIENT_TEST_NC=1") // the shim's, in the test
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	go func() { _ = cmd.Wait() }()
	return r.(*os.File), w.(*os.File), func() {
		p.hangups.Add(1)
		_ = cmd.Process.Signal(syscall.SIGHUP)
	}, nil
}

// TestDialProxyStarter: a Prompter that can start the ProxyCommand (the
// shim, as ssh runs it as its own child) is given it whole, and its
// proxy is hung up once when the connection ends.
func TestDialProxyStarter(t *testing.T) {
	priv, pub := newEd25519(t)
	srv := startServer(t, withAuthKey(pub))
	env := testEnv(t)
	env.Environ = append(os.Environ(), "SSHCLIENT_TEST_NC=1", "SHELL=/bin/sh")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	key := writeKey(t, env.Home, "id", priv, "")
	for _, persist := range []bool{false, true} {
		opts := []string{"ProxyCommand='" + self + "' %h %p", "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "IdentityFile=" + key}
		if persist {
			opts = append(opts, "ControlPath="+filepath.Join(env.Home, "cm-%C"), "ControlPersist=60s")
		}
		s := settingsFor(t, env, srv.port(), opts...)
		p := &proxyStarter{}
		if out, err := run(t, s, p); err != nil || out != "ran hello\n" {
			t.Fatalf("out %q, err %v", out, err)
		}
		want := fmt.Sprintf("exec '%s' 127.0.0.1 %d", self, srv.port())
		if p.shell != "/bin/sh" || p.command != want || p.stderrNull != persist {
			t.Errorf("asked to start %q %q (stderr null %v), want /bin/sh %q (%v)", p.shell, p.command, p.stderrNull, want, persist)
		}
		if n := p.hangups.Load(); n != 1 {
			t.Errorf("proxy hung up %d times, want once", n)
		}
	}
}

// rawServer accepts connections and hands them to fn.
func rawServer(t *testing.T, fn func(net.Conn)) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go fn(c)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestDialNetworkErrors(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	readClose := rawServer(t, func(c net.Conn) {
		buf := make([]byte, 256)
		_, _ = c.Read(buf)
		time.Sleep(50 * time.Millisecond)
		c.Close()
	})
	bannerClose := rawServer(t, func(c net.Conn) {
		_, _ = c.Write([]byte("SSH-2.0-Fake\r\n"))
		// Read everything the client sends, so that closing sends a FIN,
		// not a reset.
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, _ = io.Copy(io.Discard, c)
		c.Close()
	})
	silent := rawServer(t, func(c net.Conn) {
		time.Sleep(5 * time.Second)
		c.Close()
	})
	tests := []struct {
		name string
		port int
		opts []string
		want string
	}{
		{"refused", deadPort, nil, fmt.Sprintf("ssh: connect to host 127.0.0.1 port %d: Connection refused", deadPort)},
		{"refused quietly", deadPort, []string{"LogLevel=quiet"}, ""},
		{"closed before banner", readClose, nil, fmt.Sprintf("kex_exchange_identification: Connection closed by remote host\r\nConnection closed by 127.0.0.1 port %d", readClose)},
		// sshpkt_fatal's lines are logdie's, which logs at INFO.
		{"closed before banner, LogLevel ERROR", readClose, []string{"LogLevel=ERROR"}, "kex_exchange_identification: Connection closed by remote host"},
		{"closed after banner, LogLevel ERROR", bannerClose, []string{"LogLevel=ERROR"}, ""},
		{"closed after banner", bannerClose, nil, fmt.Sprintf("Connection closed by 127.0.0.1 port %d", bannerClose)},
		{"banner timeout", silent, []string{"ConnectTimeout=1"}, fmt.Sprintf("Connection timed out during banner exchange\r\nConnection to 127.0.0.1 port %d timed out", silent)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := settingsFor(t, testEnv(t), tc.port, append(tc.opts, "BatchMode=yes")...)
			_, err := run(t, s, nil)
			if got := connMsg(t, err); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("unresolvable", func(t *testing.T) {
		old := lookupIP
		lookupIP = func(ctx context.Context, network, host string) ([]net.IP, error) {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		t.Cleanup(func() { lookupIP = old })
		inv := &fakessh.SSHInvocation{Host: "NoSuch.invalid", ConfigFile: "none"}
		s, err := Resolve(inv, testEnv(t))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Dial(context.Background(), s, nil, testLogger(t))
		if got, want := connMsg(t, err), "ssh: Could not resolve hostname nosuch.invalid: Name or service not known"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		s := settingsFor(t, testEnv(t), silent, "BatchMode=yes")
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := Dial(ctx, s, nil, testLogger(t))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want deadline exceeded", err)
		}
		var ce *ConnError
		if errors.As(err, &ce) && ce.Stderr() != "" {
			t.Errorf("a canceled dial prints %q", ce.Stderr())
		}
	})
}

func TestKeepAlive(t *testing.T) {
	priv, pub := newEd25519(t)
	srv := startServer(t, withAuthKey(pub))
	env := testEnv(t)
	s := settingsFor(t, env, srv.port(), "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null",
		"IdentityFile="+writeKey(t, env.Home, "id", priv, ""))
	c, err := Dial(context.Background(), s, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// A server that answers keeps the connection alive: past the first
	// probe (at 1 s) and 60 intervals, no verdict.
	dead := make(chan struct{})
	rtt := make(chan time.Duration, 100)
	stop := KeepAlive(c.Client, 20*time.Millisecond, 2, func() { close(dead) }, func(d time.Duration) { rtt <- d })
	for range 60 {
		select {
		case <-dead:
			t.Fatal("onDead called for a live server")
		case <-rtt:
		}
	}
	stop()

	// A server that stops answering is declared dead.
	hung := rawServer(t, func(nc net.Conn) {
		conf := &ssh.ServerConfig{NoClientAuth: true}
		conf.AddHostKey(newTestSigner(t))
		_, chans, reqs, err := ssh.NewServerConn(nc, conf)
		if err != nil {
			return
		}
		go func() {
			for range chans {
			}
		}()
		for r := range reqs {
			_ = r // never answered
		}
	})
	s2 := settingsFor(t, testEnv(t), hung, "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null")
	c2, err := Dial(context.Background(), s2, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	start := time.Now()
	dead2 := make(chan struct{})
	defer KeepAlive(c2.Client, 20*time.Millisecond, 2, func() { close(dead2) }, nil)()
	select {
	case <-dead2:
	case <-time.After(10 * time.Second):
		t.Fatal("onDead not called")
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Errorf("declared dead after %v", d)
	}
	if got := s2.TimeoutMessage(); got != "Timeout, server 127.0.0.1 not responding." {
		t.Errorf("TimeoutMessage %q", got)
	}

	// With ServerAliveInterval 0 nothing gives up on it, as nothing in
	// ssh does: one probe, for the round trip, and no verdict.
	c3, err := Dial(context.Background(), s2, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	stop3 := KeepAlive(c3.Client, 0, 1, func() { t.Error("onDead called with ServerAliveInterval 0") }, nil)
	// A verdict not given has no event to wait for: watch past the probe.
	time.Sleep(1500 * time.Millisecond)
	stop3()
}

// TestAnsibleInvocation resolves and dials with the exact options
// ansible-core 2.14 passes (reference/ansible-2.14-traces).
func TestAnsibleInvocation(t *testing.T) {
	noSystemConfig(t)
	priv, pub := newEd25519(t)
	srv := startServer(t, withAuthKey(pub))
	env := testEnv(t)
	key := writeKey(t, env.Home, "id_ed25519", priv, "")
	argv := []string{"-C", "-o", "ControlMaster=auto", "-o", "ControlPersist=60s", "-o", "StrictHostKeyChecking=no",
		"-o", "Port=" + strconv.Itoa(srv.port()), "-o", `IdentityFile="` + key + `"`, "-o", "KbdInteractiveAuthentication=no",
		"-o", "PreferredAuthentications=gssapi-with-mic,gssapi-keyex,hostbased,publickey", "-o", "PasswordAuthentication=no",
		"-o", `User="deploy"`, "-o", "ConnectTimeout=10", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", `ControlPath="/home/ci/.ansible/cp/e13ada4ec6"`, "127.0.0.1", "/bin/sh -c 'echo ~deploy && sleep 0'"}
	inv, err := fakessh.ParseSSH(argv)
	if err != nil {
		t.Fatalf("ParseSSH: %v", err)
	}
	s, err := Resolve(inv, env)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if s.User != "deploy" || s.Port != srv.port() || len(s.IdentityFiles) != 1 || s.IdentityFiles[0] != key ||
		s.StrictHostKeyChecking != "no" || len(s.UserKnownHostsFiles) != 1 || s.UserKnownHostsFiles[0] != "/dev/null" ||
		s.PasswordAuthentication || s.KbdInteractiveAuthentication || s.ConnectTimeout != 10*time.Second ||
		strings.Join(s.PreferredAuthentications, ",") != "gssapi-with-mic,gssapi-keyex,hostbased,publickey" {
		t.Fatalf("settings %+v", s)
	}
	p := &fakePrompter{}
	if _, err := run(t, s, p); err != nil {
		t.Fatalf("Dial: %v", err)
	}
	want := fmt.Sprintf("Warning: Permanently added '[127.0.0.1]:%d' (ED25519) to the list of known hosts.\r\n", srv.port())
	if p.notified() != want {
		t.Errorf("stderr %q, want %q", p.notified(), want)
	}
	if len(p.prompts) != 0 {
		t.Errorf("prompted %q", p.prompts)
	}

	// With -q nothing is printed.
	inv, err = fakessh.ParseSSH(append([]string{"-q"}, argv...))
	if err != nil {
		t.Fatal(err)
	}
	if s, err = Resolve(inv, env); err != nil {
		t.Fatal(err)
	}
	p = &fakePrompter{}
	if _, err := run(t, s, p); err != nil || p.notified() != "" {
		t.Errorf("-q: err %v, stderr %q", err, p.notified())
	}
}

// TestChangedKeyDefaultKnownHosts covers OpenSSH's UpdateHostKeys notice,
// shown only with the default known_hosts files.
func TestChangedKeyDefaultKnownHosts(t *testing.T) {
	priv, pub := newEd25519(t)
	srv := startServer(t, withAuthKey(pub))
	env := testEnv(t)
	writeFile(t, env.Home, ".ssh/known_hosts", srv.knownName()+" "+string(ssh.MarshalAuthorizedKey(newTestSigner(t).PublicKey())), 0o600)
	s := settingsFor(t, env, srv.port(), "StrictHostKeyChecking=no", "IdentityFile="+writeKey(t, env.Home, "id", priv, ""))
	p := &fakePrompter{}
	if _, err := run(t, s, p); err != nil {
		t.Fatal(err)
	}
	want := "Password authentication is disabled to avoid man-in-the-middle attacks.\r\n" +
		"Keyboard-interactive authentication is disabled to avoid man-in-the-middle attacks.\r\n" +
		"UpdateHostkeys is disabled because the host key is not trusted.\r\n"
	if !strings.HasSuffix(p.notified(), want) {
		t.Errorf("stderr %q", p.notified())
	}
}

// TestNumericHost: the IPv4 forms glibc's inet_aton reads (getaddrinfo
// takes them before any lookup), and names that are none.
func TestNumericHost(t *testing.T) {
	for host, want := range map[string]string{
		"127.1": "127.0.0.1", "127.0.1": "127.0.0.1", "2130706433": "127.0.0.1", "0x7f.1": "127.0.0.1",
		"0177.0.0.1": "127.0.0.1", "10.1.2.3": "10.1.2.3", "::1": "::1", "1.2.65535": "1.2.255.255",
		"256.1": "", "1.2.3.256": "", "1.2.65536": "", "host": "", "1.2.3.4.5": "", "1..2": "", "": "", "08.1": "", "-1.2": "", "+1.2": "", "1_0.1": "", "0b1.2": "", "0o1.2": "",
	} {
		got := ""
		if ip := numericHost(host); ip != nil {
			got = ip.String()
		}
		if got != want {
			t.Errorf("numericHost(%q) = %q, want %q", host, got, want)
		}
	}
}

// TestDialHomeWithoutSSHDir: a new host key goes to ~/.ssh/known_hosts;
// where ~/.ssh cannot be made (a home that is not there, or read-only),
// ssh says why at error level before "Failed to add the host".
func TestDialHomeWithoutSSHDir(t *testing.T) {
	_, pub := newEd25519(t)
	srv := startServer(t, withAuthKey(pub))
	env := testEnv(t)
	env.Home = filepath.Join(env.Home, "gone")
	s := settingsFor(t, env, srv.port(), "StrictHostKeyChecking=no", "PubkeyAuthentication=no", "PasswordAuthentication=no", "KbdInteractiveAuthentication=no")
	p := &fakePrompter{}
	_, _ = run(t, s, p)
	dot := filepath.Join(env.Home, ".ssh")
	want := "Could not create directory '" + dot + "' (No such file or directory).\r\n" +
		"Failed to add the host to the list of known hosts (" + filepath.Join(dot, "known_hosts") + ").\r\n"
	if got := p.notified(); !strings.HasPrefix(got, want) {
		t.Errorf("stderr %q, want it to start with %q", got, want)
	}
}

// TestDialKnownHostsMode: a known_hosts file ssh creates gets the
// caller's umask with 022 added, whatever the daemon's own umask.
func TestDialKnownHostsMode(t *testing.T) {
	_, pub := newEd25519(t)
	srv := startServer(t, withAuthKey(pub))
	for umask, want := range map[int]os.FileMode{0o077: 0o600, 0o027: 0o640, 0o002: 0o644} {
		env := testEnv(t)
		env.Umask = umask
		kh := filepath.Join(env.Home, "kh")
		s := settingsFor(t, env, srv.port(), "StrictHostKeyChecking=accept-new", "UserKnownHostsFile="+kh,
			"PubkeyAuthentication=no", "PasswordAuthentication=no", "KbdInteractiveAuthentication=no")
		_, _ = run(t, s, &fakePrompter{})
		st, err := os.Stat(kh)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("umask %03o: known_hosts %v, want %v", umask, st.Mode().Perm(), want)
		}
	}
}

// userCert is a user certificate for pub from a CA of its own (the test
// server accepts it as a key, by its bytes).
func userCert(t *testing.T, pub ssh.PublicKey) *ssh.Certificate {
	t.Helper()
	caPriv, _ := newEd25519(t)
	ca, err := ssh.NewSignerFromKey(caPriv)
	if err != nil {
		t.Fatal(err)
	}
	c := &ssh.Certificate{Key: pub, CertType: ssh.UserCert, KeyId: "u", ValidPrincipals: []string{"tester"}, ValidBefore: ssh.CertTimeInfinity}
	if err := c.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return c
}
