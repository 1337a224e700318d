package sshclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"runtime"
	"testing"
	"time"
	"weak"
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
