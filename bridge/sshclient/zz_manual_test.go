package sshclient

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// Compare with the real ssh against /tmp/lab sshd (manual, deleted after use).
func TestManualCompare(t *testing.T) {
	if os.Getenv("MANUAL") == "" {
		t.Skip()
	}
	cases := []struct {
		name string
		args []string
		answers []string
	}{
		{"unknown strict", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/none", "-o", "StrictHostKeyChecking=yes", "-i", "/tmp/lab/userkey", "sct@127.0.0.1"}, nil},
		{"ask no tty", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/none", "-i", "/tmp/lab/userkey", "sct@127.0.0.1"}, nil},
		{"changed yes", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh_changed", "-o", "StrictHostKeyChecking=yes", "-i", "/tmp/lab/userkey", "sct@127.0.0.1"}, nil},
		{"changed rsa", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh_rsa", "-o", "StrictHostKeyChecking=yes", "-i", "/tmp/lab/userkey", "sct@127.0.0.1"}, nil},
		{"changed no", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh_changed", "-o", "StrictHostKeyChecking=no", "-i", "/tmp/lab/userkey", "sct@127.0.0.1"}, nil},
		{"two entries", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh_two", "-o", "StrictHostKeyChecking=yes", "-i", "/tmp/lab/userkey", "sct@127.0.0.1"}, nil},
		{"revoked yes", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh_rev", "-o", "StrictHostKeyChecking=yes", "-i", "/tmp/lab/userkey", "sct@127.0.0.1"}, nil},
		{"revoked no", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh_rev", "-o", "StrictHostKeyChecking=no", "-i", "/tmp/lab/userkey", "sct@127.0.0.1"}, nil},
		{"denied batch", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh1", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", "/tmp/lab/wrongkey", "sct@127.0.0.1"}, nil},
		{"password", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh1", "-o", "PubkeyAuthentication=no", "sct@127.0.0.1"}, []string{"bad", "bad", "bad", "bad", "pw123"}},
		{"too many", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh1", "-o", "PubkeyAuthentication=no", "sct@127.0.0.1"}, []string{"1", "2", "3", "4", "5", "6", "7"}},
		{"passphrase", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh1", "-o", "IdentitiesOnly=yes", "-i", "/tmp/lab/userkey_enc", "sct@127.0.0.1"}, []string{"wrong", "secret"}},
		{"openkey", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh1", "-o", "BatchMode=yes", "-i", "/tmp/lab/openkey", "sct@127.0.0.1"}, nil},
		{"garbagekey", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh1", "-o", "BatchMode=yes", "-i", "/tmp/lab/garbagekey", "sct@127.0.0.1"}, nil},
		{"pubonly", []string{"-p", "2299", "-o", "UserKnownHostsFile=/tmp/lab/kh1", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", "/tmp/lab/pubonly", "sct@127.0.0.1"}, nil},
		{"jump", []string{"-F", "/tmp/lab/cfgJ", "-o", "BatchMode=yes", "-J", "127.0.0.1", "-p", "2299", "localhost"}, nil},
		{"jump target refused", []string{"-F", "/tmp/lab/cfgJ", "-o", "BatchMode=yes", "-J", "127.0.0.1", "-p", "1", "localhost"}, nil},
		{"jump hop refused", []string{"-F", "/tmp/lab/cfgJ", "-o", "BatchMode=yes", "-J", "127.0.0.1:1,127.0.0.1", "-p", "2299", "localhost"}, nil},
		{"jump loop", []string{"-o", "BatchMode=yes", "-J", "sct@127.0.0.1:2299", "-p", "2299", "sct@127.0.0.1"}, nil},
		{"proxy false", []string{"-o", "ProxyCommand=false", "-p", "2299", "sct@127.0.0.1"}, nil},
		{"proxy stderr", []string{"-o", "ProxyCommand=sh -c 'echo err >&2; exit 1'", "-p", "2299", "sct@127.0.0.1"}, nil},
		{"refused", []string{"-p", "1", "127.0.0.1"}, nil},
		{"reset pre-banner", []string{"-p", "23540", "127.0.0.1"}, nil},
		{"readclose", []string{"-p", "24001", "127.0.0.1"}, nil},
		{"bannerclose", []string{"-p", "24003", "127.0.0.1"}, nil},
		{"hang", []string{"-o", "ConnectTimeout=2", "-p", "23260", "127.0.0.1"}, nil},
		{"kex", []string{"-o", "KexAlgorithms=diffie-hellman-group1-sha1", "-p", "2299", "127.0.0.1"}, nil},
	}
	for _, c := range cases {
		inv := &fakessh.SSHInvocation{ConfigFile: "none"}
		args := c.args
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch a {
			case "-p":
				inv.Options = append(inv.Options, fakessh.Option{Key: "port", Value: args[i+1]}); i++
			case "-i":
				inv.Options = append(inv.Options, fakessh.Option{Key: "identityfile", Value: args[i+1]}); i++
			case "-J":
				inv.Options = append(inv.Options, fakessh.Option{Key: "proxyjump", Value: args[i+1]}); i++
			case "-F":
				inv.ConfigFile = args[i+1]; i++
			case "-o":
				k, v, _ := strings.Cut(args[i+1], "=")
				inv.Options = append(inv.Options, fakessh.Option{Key: strings.ToLower(k), Value: v}); i++
			default:
				if u, h, ok := strings.Cut(a, "@"); ok {
					inv.Host = h
					inv.Options = append(inv.Options, fakessh.Option{Key: "user", Value: u})
				} else {
					inv.Host = a
				}
			}
		}
		var out string
		s, err := Resolve(inv, Env{Home: "/root", User: "root", Cwd: "/tmp/lab"})
		p := &fakePrompter{answers: c.answers}
		if err == nil {
			var cl interface{ Close() error }
			cl, err = Dial(context.Background(), s, p, testLogger(t))
			if err == nil {
				cl.Close()
			}
		}
		if err != nil {
			out = err.(*ConnError).Stderr()
		}
		full := append([]string{"-F", "none"}, c.args...)
		if inv.ConfigFile != "none" {
			full = c.args
		}
		real := ""
		if c.answers == nil {
			b, _ := exec.Command("ssh", append(full, "true")...).CombinedOutput()
			real = string(b)
		}
		t.Logf("=== %s\nOURS notes=%q prompts=%q\nOURS err =%q\nREAL     =%q", c.name, p.notified(), p.prompts, out, real)
		if c.answers == nil && p.notified()+out != real {
			t.Errorf("%s differs", c.name)
		}
	}
}
