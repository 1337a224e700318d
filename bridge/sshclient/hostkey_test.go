package sshclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// hostCert certifies key as a host key for principals, signed by ca and
// valid from after to before.
func hostCert(t *testing.T, key ssh.PublicKey, ca ssh.Signer, principals []string, after, before time.Time) *ssh.Certificate {
	t.Helper()
	c := &ssh.Certificate{Key: key, CertType: ssh.HostCert, KeyId: "h", ValidPrincipals: principals,
		ValidAfter: uint64(after.Unix()), ValidBefore: uint64(before.Unix())}
	if err := c.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestHostCertificate checks a host certificate as sshconnect.c's
// check_host_key does: by its CA among @cert-authority lines (looked up
// again without the port for a port other than 22), refused when it or
// its CA is @revoked, and otherwise, when no CA vouches for it or it
// fails its checks ("Certificate invalid: ..."), as its plain key.
func TestHostCertificate(t *testing.T) {
	ca, host, stranger := newTestSigner(t), newTestSigner(t), newTestSigner(t)
	line := func(k ssh.PublicKey) string { return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) }
	CA, KEY, WRONG := line(ca.PublicKey()), line(host.PublicKey()), line(stranger.PublicKey())
	now := time.Now()
	valid := hostCert(t, host.PublicKey(), ca, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))
	expired := hostCert(t, host.PublicKey(), ca, []string{"127.0.0.1"}, now.Add(-2*time.Hour), now.Add(-time.Hour))
	forged := hostCert(t, host.PublicKey(), ca, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))
	forged.ValidPrincipals = []string{"127.0.0.1", "elsewhere"} // after signing

	revokedBanner := "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n" +
		"@       WARNING: REVOKED HOST KEY DETECTED!               @\r\n" +
		"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
	const port = 2311
	tests := []struct {
		name      string
		cert      *ssh.Certificate
		known     string // CA, KEY, WRONG, PORT substituted
		opts      []string
		refused   bool   // wanted, also implied by wantErr
		wantErr   string // the ConnError's message
		wantNotes string // all notifications
		wantKnown string // known_hosts afterwards, when not the same
	}{
		{
			name:  "CA for any host",
			known: "@cert-authority * CA\n",
		},
		{
			name:  "CA for [host]:port",
			known: "@cert-authority [127.0.0.1]:PORT CA\n",
		},
		{
			name:  "revoked CA",
			known: "@cert-authority * CA\n@revoked * CA\n",
			wantErr: revokedBanner +
				"The ED25519-CERT host key for [127.0.0.1]:PORT is marked as revoked.\r\n" +
				"This could mean that a stolen key is being used to\r\nimpersonate this host.\r\n" +
				"ED25519-CERT host key for [127.0.0.1]:PORT was revoked and you have requested strict checking.\r\n" +
				"Host key verification failed.",
		},
		{
			name:  "revoked host key",
			known: "@cert-authority * CA\n@revoked * KEY\n",
			wantErr: revokedBanner +
				"The ED25519-CERT host key for [127.0.0.1]:PORT is marked as revoked.\r\n" +
				"This could mean that a stolen key is being used to\r\nimpersonate this host.\r\n" +
				"ED25519-CERT host key for [127.0.0.1]:PORT was revoked and you have requested strict checking.\r\n" +
				"Host key verification failed.",
		},
		{
			// The revocation holds although the plain key is known.
			name:  "revoked CA, plain key known, no CA line",
			known: "@revoked * CA\n[127.0.0.1]:PORT KEY\n",
			wantErr: revokedBanner +
				"The ED25519-CERT host key for [127.0.0.1]:PORT is marked as revoked.\r\n" +
				"This could mean that a stolen key is being used to\r\nimpersonate this host.\r\n" +
				"ED25519-CERT host key for [127.0.0.1]:PORT was revoked and you have requested strict checking.\r\n" +
				"Host key verification failed.",
		},
		{
			name:  "revoked CA, StrictHostKeyChecking=no goes on without passwords",
			known: "@cert-authority * CA\n@revoked * CA\n",
			opts:  []string{"StrictHostKeyChecking=no"},
			wantNotes: revokedBanner +
				"The ED25519-CERT host key for [127.0.0.1]:PORT is marked as revoked.\r\n" +
				"This could mean that a stolen key is being used to\r\nimpersonate this host.\r\n" +
				"Password authentication is disabled to avoid man-in-the-middle attacks.\r\n" +
				"Keyboard-interactive authentication is disabled to avoid man-in-the-middle attacks.\r\n",
		},
		{
			name:    "HostKeyAlias not a principal",
			known:   "@cert-authority * CA\n",
			opts:    []string{"HostKeyAlias=notaprincipal"},
			wantErr: "Certificate invalid: name is not a listed principal\r\nNo ED25519 host key is known for notaprincipal and you have requested strict checking.\r\nHost key verification failed.",
		},
		{
			name:      "expired, plain key known",
			cert:      expired,
			known:     "@cert-authority * CA\n[127.0.0.1]:PORT KEY\n",
			wantNotes: "Certificate invalid: expired\r\n",
		},
		{
			name:      "expired, accept-new adds the plain key",
			cert:      expired,
			known:     "@cert-authority * CA\n",
			opts:      []string{"StrictHostKeyChecking=accept-new", "HashKnownHosts=no"},
			wantNotes: "Certificate invalid: expired\r\nWarning: Permanently added '[127.0.0.1]:PORT' (ED25519) to the list of known hosts.\r\n",
			wantKnown: "@cert-authority * CA\n[127.0.0.1]:PORT KEY\n",
		},
		{
			name:    "expired, LogLevel=QUIET",
			cert:    expired,
			known:   "@cert-authority * CA\n",
			opts:    []string{"LogLevel=QUIET"},
			refused: true,
		},
		// ssh finds no CA for [127.0.0.1]:PORT and looks again for
		// 127.0.0.1 ("found matching key w/out port").
		{
			name:  "CA for a pattern without the port",
			known: "@cert-authority 127.0.0.* CA\n",
		},
		{
			name:  "CA for the bare host name, accept-new adds nothing",
			known: "@cert-authority 127.0.0.1 CA\n",
			opts:  []string{"StrictHostKeyChecking=accept-new", "HashKnownHosts=no"},
		},
		{
			name:  "CA for all but [host]:port",
			known: "@cert-authority *,![127.0.0.1]:PORT CA\n",
		},
		{
			name:  "the bare host name's CA is also revoked there",
			known: "@cert-authority 127.0.0.1 CA\n@revoked 127.0.0.1 CA\n",
			wantErr: revokedBanner +
				"The ED25519-CERT host key for 127.0.0.1 is marked as revoked.\r\n" +
				"This could mean that a stolen key is being used to\r\nimpersonate this host.\r\n" +
				"ED25519-CERT host key for 127.0.0.1 was revoked and you have requested strict checking.\r\n" +
				"No ED25519 host key is known for [127.0.0.1]:PORT and you have requested strict checking.\r\n" +
				"Host key verification failed.",
		},
		{
			name:      "the bare host name's plain key is changed: not a word",
			known:     "127.0.0.1 WRONG\n",
			opts:      []string{"StrictHostKeyChecking=accept-new", "HashKnownHosts=no"},
			wantNotes: "Warning: Permanently added '[127.0.0.1]:PORT' (ED25519) to the list of known hosts.\r\n",
			wantKnown: "127.0.0.1 WRONG\n[127.0.0.1]:PORT KEY\n",
		},
		{
			name:    "HostKeyAlias: no look-up without the port",
			known:   "@cert-authority 127.0.0.1 CA\n",
			opts:    []string{"HostKeyAlias=myalias"},
			wantErr: "No ED25519 host key is known for myalias and you have requested strict checking.\r\nHost key verification failed.",
		},
		{
			name:    "no CA, strict",
			known:   "@cert-authority elsewhere CA\n",
			wantErr: "No ED25519 host key is known for [127.0.0.1]:PORT and you have requested strict checking.\r\nHost key verification failed.",
		},
		{
			name:    "badly signed",
			cert:    forged,
			known:   "@cert-authority * CA\n[127.0.0.1]:PORT KEY\n",
			wantErr: "Host key verification failed.",
		},
		{
			name:  "no user known_hosts file, CA in the global one",
			known: "@cert-authority * CA\n",
			opts:  []string{"UserKnownHostsFile=none", "GlobalKnownHostsFile=FILE"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t)
			kh := filepath.Join(env.Home, "kh")
			keys := strings.NewReplacer("CA", CA, "KEY", KEY, "WRONG", WRONG, "PORT", strconv.Itoa(port))
			sub := strings.NewReplacer("PORT", strconv.Itoa(port))
			if err := os.WriteFile(kh, []byte(keys.Replace(tc.known)), 0o644); err != nil {
				t.Fatal(err)
			}
			opts := []string{"StrictHostKeyChecking=yes", "GlobalKnownHostsFile=none"}
			for _, o := range tc.opts {
				opts = append([]string{strings.ReplaceAll(o, "FILE", kh)}, opts...)
			}
			opts = append(opts, "UserKnownHostsFile="+kh)
			s := settingsFor(t, env, port, opts...)
			p := &fakePrompter{}
			c := newHostKeyChecker(context.Background(), s, p, newReporter(p, s.LogLevel, testLogger(t)))
			cert := tc.cert
			if cert == nil {
				cert = valid
			}
			err := c.callback("", nil, cert)
			switch {
			case tc.wantErr == "" && !tc.refused:
				if err != nil {
					t.Fatalf("refused: %v (%q)", err, c.fail.Msg)
				}
			case err == nil:
				t.Fatalf("accepted, want %q", tc.wantErr)
			case c.fail.Msg != sub.Replace(tc.wantErr):
				t.Errorf("message:\n got %q\nwant %q", c.fail.Msg, sub.Replace(tc.wantErr))
			}
			if got, want := p.notified(), sub.Replace(tc.wantNotes); got != want {
				t.Errorf("notifications:\n got %q\nwant %q", got, want)
			}
			want := tc.known
			if tc.wantKnown != "" {
				want = tc.wantKnown
			}
			if got, _ := os.ReadFile(kh); string(got) != keys.Replace(want) {
				t.Errorf("known_hosts:\n got %q\nwant %q", got, keys.Replace(want))
			}
		})
	}
}

// TestHostKeyAlgorithmsOrder checks order_hostkeyalgs' choices: with a
// known key of the best algorithm's type (ED25519 for the default's
// ssh-ed25519-cert-v01@openssh.com) the default order stands, so that a
// server with a certificate shows it (and a revoked CA is seen).
func TestHostKeyAlgorithmsOrder(t *testing.T) {
	ed := newTestSigner(t).PublicKey()
	line := func(marker, host string, k ssh.PublicKey) khEntry {
		return khEntry{marker: marker, hosts: []string{host}, key: k}
	}
	base := []string{ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoRSASHA512}
	ecdsa, err := ssh.NewPublicKey(mustECDSA(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		entries []khEntry
		want    []string
	}{
		{"nothing known", nil, base},
		{"ED25519 known", []khEntry{line("", "h", ed)}, base},
		{"ECDSA known", []khEntry{line("", "h", ecdsa)},
			[]string{ssh.KeyAlgoECDSA256, ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.KeyAlgoED25519, ssh.KeyAlgoRSASHA512}},
		{"ECDSA known, a CA", []khEntry{line("", "h", ecdsa), line("cert-authority", "*", ed)},
			[]string{ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.KeyAlgoECDSA256, ssh.KeyAlgoED25519, ssh.KeyAlgoRSASHA512}},
		{"ED25519 known for another host", []khEntry{line("", "other", ed), line("", "h", ecdsa)},
			[]string{ssh.KeyAlgoECDSA256, ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.KeyAlgoED25519, ssh.KeyAlgoRSASHA512}},
	}
	for _, tc := range tests {
		if got := hostKeyAlgorithms(tc.entries, "h", base); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func mustECDSA(t *testing.T) *ecdsa.PublicKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &k.PublicKey
}
