package sshclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func newECDSASigner(t *testing.T) ssh.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func authorizedLine(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// TestUpdateHostKeys: like OpenSSH 9.2's UpdateHostKeys, a host trusted
// from the user known_hosts gets the server's other (proven) keys added
// to it and the keys the server no longer has removed, through an atomic
// rewrite that keeps the old file as known_hosts.old.
func TestUpdateHostKeys(t *testing.T) {
	priv, pub := newEd25519(t)
	extra := newECDSASigner(t)
	stale := newTestSigner(t).PublicKey()
	other := "otherhost " + authorizedLine(newTestSigner(t).PublicKey())
	tests := []struct {
		name    string
		bad     bool
		opts    []string
		kh      string // "": the default ~/.ssh/known_hosts
		known   func(srv *testServer) string
		changed bool
		hashed  bool
		added   bool // the host key itself is added by accept-new
	}{
		{name: "default known_hosts", changed: true,
			known: func(srv *testServer) string {
				return "# mine\n" + other + "\n" + srv.knownName() + " " + authorizedLine(stale) + "\n" + strings.TrimSpace(srv.hostLine(srv.knownName()))
			}},
		{name: "hashed", opts: []string{"HashKnownHosts=yes"}, changed: true, hashed: true,
			known: func(srv *testServer) string { return srv.hostLine(srv.knownName()) }},
		{name: "UpdateHostKeys=no", opts: []string{"UpdateHostKeys=no"},
			known: func(srv *testServer) string { return srv.hostLine(srv.knownName()) }},
		{name: "other UserKnownHostsFile: off by default", kh: "kh",
			known: func(srv *testServer) string { return srv.hostLine(srv.knownName()) }},
		{name: "other UserKnownHostsFile with UpdateHostKeys=yes", kh: "kh", opts: []string{"UpdateHostKeys=yes"}, changed: true,
			known: func(srv *testServer) string { return srv.hostLine(srv.knownName()) }},
		{name: "a bad proof", bad: true,
			known: func(srv *testServer) string { return srv.hostLine(srv.knownName()) }},
		{name: "a key just accepted is not trusted", opts: []string{"StrictHostKeyChecking=accept-new"}, added: true,
			known: func(*testServer) string { return other + "\n" }},
		{name: "a wildcard line", known: func(srv *testServer) string {
			return "[127.0.0.1]:* " + authorizedLine(stale) + "\n" + srv.hostLine(srv.knownName())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, withAuthKey(pub), withExtraHostKeys(tc.bad, extra))
			env := testEnv(t)
			kh := filepath.Join(env.Home, ".ssh", "known_hosts")
			opts := append(tc.opts, "IdentityFile="+writeKey(t, env.Home, "id", priv, ""))
			if tc.kh != "" {
				kh = filepath.Join(env.Home, tc.kh)
				opts = append(opts, "UserKnownHostsFile="+kh)
			}
			before := tc.known(srv)
			writeFile(t, filepath.Dir(kh), filepath.Base(kh), before, 0o644)
			dialAndSettle(t, settingsFor(t, env, srv.port(), opts...))

			data, err := os.ReadFile(kh)
			if err != nil {
				t.Fatal(err)
			}
			got := string(data)
			if !tc.changed {
				if tc.added {
					before += srv.hostLine(srv.knownName())
				}
				if got != before {
					t.Errorf("known_hosts changed:\n%s\nwas:\n%s", got, before)
				}
				if _, err := os.Stat(kh + ".old"); err == nil {
					t.Error("known_hosts.old written")
				}
				return
			}
			name := srv.knownName()
			lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
			var want []string
			for _, l := range strings.Split(strings.TrimSuffix(before, "\n"), "\n") {
				if !strings.Contains(l, authorizedLine(stale)) {
					want = append(want, l)
				}
			}
			if len(lines) != len(want)+1 || strings.Join(lines[:len(want)], "\n") != strings.Join(want, "\n") {
				t.Fatalf("known_hosts:\n%s\nwant the lines kept:\n%s\nand one added", got, strings.Join(want, "\n"))
			}
			host, key, _ := strings.Cut(lines[len(want)], " ")
			if key != authorizedLine(extra.PublicKey()) {
				t.Errorf("added key %q, want %q", key, authorizedLine(extra.PublicKey()))
			}
			if tc.hashed {
				if !strings.HasPrefix(host, "|1|") || !hashedMatch(host, name) {
					t.Errorf("added host %q, want %s hashed", host, name)
				}
			} else if host != name {
				t.Errorf("added host %q, want %q", host, name)
			}
			if old, err := os.ReadFile(kh + ".old"); err != nil || string(old) != before {
				t.Errorf("known_hosts.old %q (%v), want the file as it was", old, err)
			}
			if fi, err := os.Stat(kh); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("known_hosts mode %v (%v), want mkstemp's 0600", fi.Mode().Perm(), err)
			}
		})
	}
}

// dialAndSettle dials, waits for UpdateHostKeys to finish and runs a
// command.
func dialAndSettle(t *testing.T, s *Settings) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, s, &fakePrompter{}, testLogger(t))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	if c.hostKeys != nil {
		select {
		case <-c.hostKeys.done:
		case <-ctx.Done():
			t.Fatal("UpdateHostKeys did not finish")
		}
	}
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Output("hello"); err != nil {
		t.Fatal(err)
	}
}

// TestUpdateHostKeysAsk: ask prompts on ssh's terminal, so the bridge
// hands it to the real ssh.
func TestUpdateHostKeysAsk(t *testing.T) {
	s := settingsFor(t, testEnv(t), 22, "UpdateHostKeys=ask")
	if !strings.Contains(strings.Join(s.Unsupported, "\n"), "UpdateHostKeys ask is not served") {
		t.Errorf("Unsupported %q", s.Unsupported)
	}
}

// TestUpdateHostKeysDefault is readconf.c's default: on with the
// default user known_hosts (also when named as such), off with another
// one or with VerifyHostKeyDNS.
func TestUpdateHostKeysDefault(t *testing.T) {
	for _, tc := range []struct {
		opts []string
		want bool
	}{
		{nil, true},
		{[]string{"UserKnownHostsFile=~/.ssh/known_hosts"}, true},
		{[]string{"UserKnownHostsFile=~/kh"}, false},
		{[]string{"UserKnownHostsFile=~/kh", "UpdateHostKeys=yes"}, true},
		{[]string{"VerifyHostKeyDNS=yes"}, false},
		{[]string{"VerifyHostKeyDNS=no"}, true},
		{[]string{"UpdateHostKeys=no"}, false},
	} {
		if got := settingsFor(t, testEnv(t), 22, tc.opts...).updateHostKeys; got != tc.want {
			t.Errorf("%q: UpdateHostKeys %t, want %t", tc.opts, got, tc.want)
		}
	}
}
