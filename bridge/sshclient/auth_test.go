package sshclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"golang.org/x/crypto/ssh/agent"
)

// secretPrompter answers passphrase prompts with bytes it keeps, to see
// that they are overwritten.
type secretPrompter struct {
	fakePrompter
	given [][]byte
}

func (p *secretPrompter) PromptSecret(ctx context.Context, prompt string) ([]byte, error) {
	a, err := p.Prompt(ctx, prompt, false)
	if err != nil {
		return nil, err
	}
	b := []byte(a)
	p.given = append(p.given, b)
	return b, nil
}

// TestDialForgetsDecryptedKey: once logged in with a passphrase-protected
// key, the connection (still open) keeps neither the decrypted key nor
// the passphrase, as OpenSSH's master does not.
func TestDialForgetsDecryptedKey(t *testing.T) {
	priv, pub := newEd25519(t)
	srv := startServer(t, withAuthKey(pub))
	env := testEnv(t)
	s := settingsFor(t, env, srv.port(), "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null",
		"IdentityFile="+writeKey(t, env.Home, "enc", priv, "secret"))

	var loaded *ed25519.PrivateKey
	keyLoaded = func(k any) { loaded, _ = k.(*ed25519.PrivateKey) }
	t.Cleanup(func() { keyLoaded = func(any) {} })

	p := &secretPrompter{fakePrompter: fakePrompter{answers: []string{"secret"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, s, p, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	if len(p.given) != 1 {
		t.Errorf("%d passphrase prompts answered with bytes, want 1", len(p.given))
	} else if !isZero(p.given[0]) {
		t.Errorf("passphrase not overwritten after decrypting the key: %q", p.given[0])
	}
	if loaded == nil {
		t.Fatal("no ed25519 key loaded")
	}
	if !isZero(*loaded) {
		t.Errorf("decrypted private key not overwritten once logged in")
	}
	key := weak.Make(&(*loaded)[0])
	loaded = nil
	runtime.GC()
	if key.Value() != nil {
		t.Errorf("the decrypted private key is still reachable from the open connection")
	}
	// The connection works without it.
	sess, err := c.NewSession()
	if err != nil {
		t.Fatalf("session after login: %v", err)
	}
	sess.Close()
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func TestWipeKey(t *testing.T) {
	r, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	d, p := r.D.Bits(), r.Primes[0].Bits()
	wipeKey(r)
	if r.D.Sign() != 0 || r.Primes[0].Sign() != 0 || r.Precomputed.Dp.Sign() != 0 {
		t.Error("rsa: secret numbers left")
	}
	for _, w := range append(d, p...) {
		if w != 0 {
			t.Fatal("rsa: the secret numbers' words are not overwritten")
		}
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 what wipeKey overwrites
	ed := e.D.Bits()
	wipeKey(e)
	for _, w := range ed {
		if w != 0 {
			t.Fatal("ecdsa: the secret's words are not overwritten")
		}
	}
}

// TestPrepareOrder: pubkey_prepare's order, the agent's copies of the
// configured files first (in agent order), then the agent's other keys,
// then the files the agent does not hold.
func TestPrepareOrder(t *testing.T) {
	env := testEnv(t)
	keyring := agent.NewKeyring()
	keys := map[string]ed25519.PrivateKey{}
	for _, n := range []string{"a1", "f2", "a2", "f1", "f3"} {
		keys[n], _ = newEd25519(t)
		if n != "f3" {
			if err := keyring.Add(agent.AddedKey{PrivateKey: keys[n], Comment: "agent-" + n}); err != nil {
				t.Fatal(err)
			}
		}
	}
	env.AuthSock = serveAgent(t, keyring)
	var opts []string
	for _, n := range []string{"f1", "f2", "f3"} {
		opts = append(opts, "IdentityFile="+writeKey(t, env.Home, n, keys[n], ""))
	}
	for _, tc := range []struct {
		only string
		want string
	}{
		{"no", "DIR/f2 agent, DIR/f1 agent, agent-a1 agent, agent-a2 agent, DIR/f3"},
		{"yes", "DIR/f2 agent, DIR/f1 agent, DIR/f3"},
	} {
		a := newAuthState(context.Background(), settingsFor(t, env, 22, append(opts, "IdentitiesOnly="+tc.only)...),
			nil, nil, testLogger(t), nil)
		a.prepare()
		var got []string
		for _, id := range a.ids {
			g := strings.ReplaceAll(id.name, env.Home, "DIR")
			if id.agent != nil {
				g += " agent"
			}
			got = append(got, g)
		}
		a.close()
		if g := strings.Join(got, ", "); g != tc.want {
			t.Errorf("IdentitiesOnly %s:\n got %s\nwant %s", tc.only, g, tc.want)
		}
	}
}

// TestDialAgentFullOfKeys: an IdentityFile's key that the agent holds
// after more keys than the server's MaxAuthTries is offered first, as
// ssh does ("explicit agent"), and logs in.
func TestDialAgentFullOfKeys(t *testing.T) {
	priv, pub := newEd25519(t)
	keyring := agent.NewKeyring()
	for i := range 7 {
		other, _ := newEd25519(t)
		if err := keyring.Add(agent.AddedKey{PrivateKey: other, Comment: fmt.Sprintf("other%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv, Comment: "mine"}); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, withAuthKey(pub))
	env := testEnv(t)
	env.AuthSock = serveAgent(t, keyring)
	s := settingsFor(t, env, srv.port(), "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "BatchMode=yes",
		"IdentityFile="+writeKey(t, env.Home, "mine", priv, "secret"))
	if _, err := run(t, s, nil); err != nil {
		t.Fatalf("Dial: %v", err)
	}
}
