package sshclient

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// TestAssembleAlgorithms: lists are assembled as OpenSSH's
// kex_assemble_names does (checked against ssh -G of OpenSSH 9.2).
func TestAssembleAlgorithms(t *testing.T) {
	tests := []struct {
		kind *algoKind
		spec string
		want string // comma list; "" = refused, as OpenSSH refuses it
	}{
		{&algoCiphers, "aes256-ctr,aes128-ctr", "aes256-ctr,aes128-ctr"},
		{&algoCiphers, "+aes128-cbc", "chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,aes128-gcm@openssh.com,aes256-gcm@openssh.com,aes128-cbc"},
		{&algoCiphers, "-chacha20*,aes1*", "aes256-ctr,aes256-gcm@openssh.com"},
		{&algoCiphers, "^aes256-gcm@openssh.com", "aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,aes128-gcm@openssh.com"},
		{&algoCiphers, "aes128-ctr,nosuch", ""},
		{&algoCiphers, "aes*", ""},
		{&algoMACs, "-umac*", "hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com,hmac-sha1-etm@openssh.com,hmac-sha2-256,hmac-sha2-512,hmac-sha1"},
		{&algoHostKeys, "ssh-ed25519*", "ssh-ed25519,ssh-ed25519-cert-v01@openssh.com"},
		{&algoHostKeys, "+ssh-rsa", strings.Join(opensshHostKeyAlgos, ",") + ",ssh-rsa"},
	}
	for _, tc := range tests {
		got, ok := tc.kind.assemble(tc.spec)
		if ok != (tc.want != "") || strings.Join(got, ",") != tc.want {
			t.Errorf("%s %q:\n got %v %v\nwant %q", tc.kind.keyword, tc.spec, got, ok, tc.want)
		}
	}
}

// TestAlgorithmSettings: configured lists reach Settings less what
// x/crypto lacks; a list of which it implements nothing, or a name
// OpenSSH refuses, is noted as unsupported (the real ssh then serves).
func TestAlgorithmSettings(t *testing.T) {
	env := testEnv(t)
	s := settingsFor(t, env, 22, "Ciphers=aes256-ctr", "MACs=umac-64@openssh.com,hmac-sha2-256", "KexAlgorithms=-sntrup*")
	if !reflect.DeepEqual(s.Ciphers, []string{"aes256-ctr"}) || !reflect.DeepEqual(s.MACs, []string{"hmac-sha2-256"}) {
		t.Errorf("ciphers %v, macs %v", s.Ciphers, s.MACs)
	}
	if len(s.KexAlgorithms) == 0 || strings.HasPrefix(s.KexAlgorithms[0], "sntrup") || s.KexAlgorithms[0] != "curve25519-sha256" {
		t.Errorf("kex %v", s.KexAlgorithms)
	}
	if len(s.Unsupported) != 0 || s.HostKeyAlgorithms != nil {
		t.Errorf("unsupported %v, host key algorithms %v", s.Unsupported, s.HostKeyAlgorithms)
	}
	for _, opt := range []string{"MACs=umac-64@openssh.com", "Ciphers=nosuch-cipher"} {
		if s := settingsFor(t, env, 22, opt); len(s.Unsupported) != 1 {
			t.Errorf("%s: unsupported %v, want one note", opt, s.Unsupported)
		}
	}
	if s := settingsFor(t, env, 22, "HostKeyAlgorithms=ssh-ed25519"); !s.HostKeyAlgorithmsExplicit {
		t.Error("a plain HostKeyAlgorithms list is not marked explicit")
	}
}

// TestDialAlgorithms: the connection uses only what the configuration
// allows, and a mismatch fails as ssh reports it.
func TestDialAlgorithms(t *testing.T) {
	srv := startServer(t, withPassword("pw"), withCiphers("aes128-ctr"))
	noHK := []string{"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null"}
	for _, tc := range []struct {
		opt, wantErr string
	}{
		{"Ciphers=+aes128-cbc", ""},
		{"Ciphers=aes256-ctr,aes128-ctr", ""},
		{"Ciphers=aes256-ctr", "no matching cipher found"},
		{"Ciphers=-aes128*", "no matching cipher found"},
		{"HostKeyAlgorithms=ecdsa-sha2-nistp256", "no matching host key type found"},
	} {
		t.Run(tc.opt, func(t *testing.T) {
			s := settingsFor(t, testEnv(t), srv.port(), append(noHK, tc.opt)...)
			_, err := run(t, s, &fakePrompter{answers: []string{"pw"}})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				return
			}
			if msg := connMsg(t, err); !strings.Contains(msg, "Unable to negotiate with 127.0.0.1 port") || !strings.Contains(msg, tc.wantErr) {
				t.Errorf("message %q, want %q", msg, tc.wantErr)
			}
		})
	}
}

// TestPolicySettings: PubkeyAcceptedAlgorithms (and its old name) and
// CASignatureAlgorithms are served only where they leave OpenSSH's
// default list; any other value, from the command line or a file, is
// noted, so that the real ssh, which filters identities and CA
// signatures by it, serves the invocation. So is KbdInteractiveDevices,
// whatever its value (ssh asks the server for those devices only), and
// NoHostAuthenticationForLocalhost yes (ssh takes any key of a loopback
// address) and CheckHostIP yes (ssh checks the address's key too).
func TestPolicySettings(t *testing.T) {
	env := testEnv(t)
	for _, tc := range []struct {
		opt   string
		noted bool
	}{
		{"PubkeyAcceptedAlgorithms=rsa-sha2-512,rsa-sha2-256", true},
		{"PubkeyAcceptedAlgorithms=-ssh-ed25519", true},
		{"PubkeyAcceptedAlgorithms=+ssh-rsa", true},
		{"PubkeyAcceptedAlgorithms=^ssh-ed25519", true},
		{"PubkeyAcceptedAlgorithms=nosuch", true},
		{"PubkeyAcceptedKeyTypes=ecdsa-sha2-nistp256", true},
		{"PubkeyAcceptedAlgorithms=+ssh-ed25519", false},
		{"PubkeyAcceptedAlgorithms=-ssh-dss", false},
		{"PubkeyAcceptedAlgorithms=" + strings.Join(opensshHostKeyAlgos, ","), false},
		{"CASignatureAlgorithms=ssh-ed25519", true},
		{"CASignatureAlgorithms=+ssh-rsa", true},
		{"CASignatureAlgorithms=-ssh-rsa", false},
		{"KbdInteractiveDevices=bsdauth", true},
		{"KbdInteractiveDevices=pam", true},
		{"NoHostAuthenticationForLocalhost=yes", true},
		{"NoHostAuthenticationForLocalhost=no", false},
		{"CheckHostIP=yes", true},
		{"CheckHostIP=no", false},
	} {
		s := settingsFor(t, env, 22, tc.opt)
		if got := len(s.Unsupported) == 1; got != tc.noted || len(s.Unsupported) > 1 {
			t.Errorf("%s: unsupported %q, want a note: %t", tc.opt, s.Unsupported, tc.noted)
		}
	}
	noSystemConfig(t)
	writeFile(t, env.Home, ".ssh/config", "Host h\n  PubkeyAcceptedKeyTypes -ssh-ed25519\n", 0o600)
	s, err := Resolve(&fakessh.SSHInvocation{Host: "h"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Unsupported) != 1 {
		t.Errorf("from a file: unsupported %q, want one note", s.Unsupported)
	}
}
