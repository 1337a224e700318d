package sshclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

func TestKeyComment(t *testing.T) {
	edPriv, _ := newEd25519(t)
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecPriv, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	openssh := func(k any, comment string) []byte {
		b, err := ssh.MarshalPrivateKey(k, comment)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(b)
	}
	enc, err := ssh.MarshalPrivateKeyWithPassphrase(edPriv, "hidden", []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaPriv)})
	tests := []struct {
		name    string
		data    []byte
		comment string
		ok      bool
		err     bool
	}{
		{name: "ed25519", data: openssh(edPriv, "me@host"), comment: "me@host", ok: true},
		{name: "empty comment", data: openssh(edPriv, ""), comment: "", ok: true},
		{name: "rsa", data: openssh(rsaPriv, "rsa key"), comment: "rsa key", ok: true},
		{name: "ecdsa", data: openssh(ecPriv, "ec"), comment: "ec", ok: true},
		{name: "PEM keeps none", data: pkcs1},
		{name: "encrypted", data: pem.EncodeToMemory(enc), err: true},
		{name: "truncated", data: pem.EncodeToMemory(&pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: []byte(opensshKeyMagic + "\x00\x00")}), err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok, err := keyComment(tc.data)
			if c != tc.comment || ok != tc.ok || (err != nil) != tc.err {
				t.Errorf("keyComment = %q, %v, %v; want %q, %v, error %v", c, ok, err, tc.comment, tc.ok, tc.err)
			}
		})
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "enc")
	if err := os.WriteFile(p, pem.EncodeToMemory(enc), 0o600); err != nil {
		t.Fatal(err)
	}
	if !encryptedOpenSSHKey(p) || encryptedOpenSSHKey(writeKey(t, dir, "plain", edPriv, "")) {
		t.Error("encryptedOpenSSHKey wrong")
	}
}

// recordingAgent is a keyring that keeps what it was asked to add.
type recordingAgent struct {
	agent.Agent
	mu    sync.Mutex
	added []agent.AddedKey
}

func (r *recordingAgent) Add(k agent.AddedKey) error {
	r.mu.Lock()
	r.added = append(r.added, k)
	r.mu.Unlock()
	k.ConfirmBeforeUse = false // the keyring refuses it
	return r.Agent.Add(k)
}

// TestAddKeysToAgent: with AddKeysToAgent, a key loaded from a file the
// agent did not hold is added to it as ssh's maybe_add_key_to_agent adds
// it: the key's comment (else the file's name), the lifespan, confirm.
func TestAddKeysToAgent(t *testing.T) {
	priv, pub := newEd25519(t)
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, err := ssh.NewPublicKey(&rsaPriv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		setting string // AddKeysToAgent's value, "" for none
		pem     bool   // an RSA key in PEM format, which has no comment
		inAgent bool   // the agent holds the key already
		want    *agent.AddedKey
	}{
		{name: "default adds nothing"},
		{name: "no", setting: "no"},
		{name: "yes", setting: "yes", want: &agent.AddedKey{Comment: "test"}},
		{name: "time", setting: "1h", want: &agent.AddedKey{Comment: "test", LifetimeSecs: 3600}},
		{name: "confirm", setting: "confirm", want: &agent.AddedKey{Comment: "test", ConfirmBeforeUse: true}},
		{name: "confirm time", setting: "confirm 5m", want: &agent.AddedKey{Comment: "test", LifetimeSecs: 300, ConfirmBeforeUse: true}},
		{name: "PEM key: the path", setting: "yes", pem: true, want: &agent.AddedKey{Comment: "KEYFILE"}},
		{name: "held by the agent", setting: "yes", inAgent: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ra := &recordingAgent{Agent: agent.NewKeyring()}
			if tc.inAgent {
				if err := ra.Agent.Add(agent.AddedKey{PrivateKey: priv, Comment: "held"}); err != nil {
					t.Fatal(err)
				}
			}
			authKey := pub
			if tc.pem {
				authKey = rsaPub
			}
			srv := startServer(t, withAuthKey(authKey))
			env := testEnv(t)
			env.AuthSock = serveAgent(t, ra)
			key := writeKey(t, env.Home, "id", priv, "")
			if tc.pem {
				key = filepath.Join(env.Home, "id_rsa")
				b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaPriv)})
				if err := os.WriteFile(key, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			opts := []string{"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "IdentityFile=" + key}
			if tc.setting != "" {
				opts = append(opts, "AddKeysToAgent="+tc.setting)
			}
			if _, err := run(t, settingsFor(t, env, srv.port(), opts...), nil); err != nil {
				t.Fatalf("Dial: %v", err)
			}
			ra.mu.Lock()
			defer ra.mu.Unlock()
			if tc.want == nil {
				if len(ra.added) != 0 {
					t.Fatalf("added %d keys, want none", len(ra.added))
				}
				return
			}
			if len(ra.added) != 1 {
				t.Fatalf("added %d keys, want 1", len(ra.added))
			}
			got := ra.added[0]
			want := *tc.want
			want.Comment = strings.ReplaceAll(want.Comment, "KEYFILE", key)
			if got.Comment != want.Comment || got.LifetimeSecs != want.LifetimeSecs || got.ConfirmBeforeUse != want.ConfirmBeforeUse {
				t.Errorf("added %q life %d confirm %v, want %q %d %v", got.Comment, got.LifetimeSecs, got.ConfirmBeforeUse,
					want.Comment, want.LifetimeSecs, want.ConfirmBeforeUse)
			}
			s, err := ssh.NewSignerFromKey(got.PrivateKey)
			if err != nil || !keysEqual(s.PublicKey(), authKey) {
				t.Errorf("added another key (%v)", err)
			}
		})
	}
}

// TestAddKeysToAgentFallback: what the bridge cannot do as ssh does
// makes the invocation fall back: ask (askpass), and an encrypted
// OpenSSH key, whose comment x/crypto does not return.
func TestAddKeysToAgentFallback(t *testing.T) {
	noSystemConfig(t)
	priv, _ := newEd25519(t)
	tests := []struct {
		name     string
		opts     []string
		enc      bool
		fallback bool
	}{
		{name: "ask", opts: []string{"addkeystoagent=ask"}, fallback: true},
		{name: "encrypted key", opts: []string{"addkeystoagent=yes"}, enc: true, fallback: true},
		{name: "encrypted key, BatchMode", opts: []string{"addkeystoagent=yes", "batchmode=yes"}, enc: true},
		{name: "encrypted key, no agent", opts: []string{"addkeystoagent=yes", "identityagent=none"}, enc: true},
		{name: "encrypted key, no AddKeysToAgent", enc: true},
		{name: "plain key", opts: []string{"addkeystoagent=confirm 1m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t)
			env.AuthSock = "/nonexistent/agent"
			pass := ""
			if tc.enc {
				pass = "pw"
			}
			o := append(opts(tc.opts...), fakessh.Option{Key: "identityfile", Value: writeKey(t, env.Home, "id", priv, pass)})
			s, err := Resolve(&fakessh.SSHInvocation{Host: "h", ConfigFile: "none", Options: o}, env)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(s.Unsupported) > 0; got != tc.fallback {
				t.Errorf("fallback %v (%q), want %v", got, s.Unsupported, tc.fallback)
			}
		})
	}
}
