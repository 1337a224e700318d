package sshclient

import (
	"bufio"
	"bytes"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// TestResolveAddr: an address becomes getnameinfo's text (checked
// against glibc's) unless only its case differs; a name is lower-cased;
// an address of the other family stays as given.
func TestResolveAddr(t *testing.T) {
	for _, tc := range []struct{ host, family, want string }{
		{"127.1", "", "127.0.0.1"}, {"0x7f000001", "", "127.0.0.1"}, {"0X7F000001", "", "127.0.0.1"},
		{"2130706433", "", "127.0.0.1"}, {"0177.0.0.1", "", "127.0.0.1"}, {"1.2.3", "", "1.2.0.3"},
		{"999.1.1.1", "", "999.1.1.1"}, {"LocalHost", "", "localhost"}, {"Host.Example", "", "host.example"},
		{"0:0:0:0:0:0:0:1", "", "::1"}, {"::", "", "::"}, {"::1.2.3.4", "", "::1.2.3.4"},
		{"::FFFF:1.2.3.4", "", "::FFFF:1.2.3.4"}, {"::ffff:0:0", "", "::ffff:0.0.0.0"}, {"1::", "", "1::"},
		{"1:0:0:2:0:0:0:3", "", "1:0:0:2::3"}, {"1:0:2:0:3:0:4:0", "", "1:0:2:0:3:0:4:0"},
		{"2001:DB8::1", "", "2001:DB8::1"}, {"2001:DB8::0001", "", "2001:db8::1"},
		{"0:0:0:0:0:1:0:0", "", "::1:0:0"}, {"::0.0.0.2", "", "::2"}, {"0:0:0:0:0:0:1.2.3.4", "", "::1.2.3.4"},
		{"::fffe:1.2.3.4", "", "::fffe:102:304"}, {"0:0:1::", "", "0:0:1::"},
		{"127.1", "inet6", "127.1"}, {"0:0::1", "inet", "0:0::1"}, {"127.1", "inet", "127.0.0.1"},
		{"0X7F000001", "inet6", "0x7f000001"}, {"FE80::1%LO", "", "FE80::1%LO"},
	} {
		if got, _ := resolveAddr(tc.host, tc.family); got != tc.want {
			t.Errorf("resolveAddr(%q, %q) = %q, want %q", tc.host, tc.family, got, tc.want)
		}
	}
	// A scoped address, which getnameinfo writes with the interface's
	// name, goes to the real ssh.
	if s := settingsFor(t, testEnv(t), 22, "HostName=FE80::1%%lo"); len(s.Unsupported) != 1 {
		t.Errorf("a scoped address: unsupported %q, want one note", s.Unsupported)
	}
}

// TestHostNameMatchesOpenSSH: the host ssh -G reports, and the
// ControlPath made of it (%h, %C), for numeric, upper-case and
// HostName-given hosts, and for a Match final pass, which sees the
// canonical host.
func TestHostNameMatchesOpenSSH(t *testing.T) {
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("no ssh client installed")
	}
	u, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config", `Match final host 127.0.0.1
  Port 2200
Host viaaddr
  HostName 0x7F000001
Host upper
  HostName Upper.Example
`, 0o600)
	for _, c := range []struct {
		host string
		opts []string
	}{
		{"127.1", nil}, {"0x7f000001", nil}, {"0X7F000001", nil}, {"2130706433", nil}, {"127.0.0.1", nil},
		{"2001:DB8::1", nil}, {"2001:db8::0001", nil}, {"0:0:0:0:0:0:0:1", nil}, {"::FFFF:1.2.3.4", nil},
		{"LocalHost", nil}, {"999.1.1.1", nil}, {"viaaddr", nil}, {"upper", nil},
		{"foo", []string{"HostName=127.1"}}, {"127.1", []string{"AddressFamily=inet6"}},
		{"::1", []string{"AddressFamily=inet"}},
	} {
		args := []string{"-G", "-F", cfg, "-o", "ControlPath=/cp/%h-%C"}
		inv := &fakessh.SSHInvocation{Host: c.host, ConfigFile: cfg, Options: []fakessh.Option{{Key: "controlpath", Value: "/cp/%h-%C"}}}
		for _, o := range c.opts {
			args = append(args, "-o", o)
			k, v, _ := strings.Cut(o, "=")
			inv.Options = append(inv.Options, fakessh.Option{Key: strings.ToLower(k), Value: v})
		}
		out, err := exec.Command(sshBin, append(args, c.host)...).Output()
		if err != nil {
			t.Fatalf("ssh %v: %v", args, err)
		}
		want := map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), " ")
			want[k] = v
		}
		s, err := Resolve(inv, Env{Home: u.HomeDir, User: u.Username, Cwd: dir})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{"hostname": s.HostName, "controlpath": s.ControlPath, "port": strconv.Itoa(s.Port)}
		for k, v := range got {
			if want[k] != v {
				t.Errorf("ssh %v %s: %s = %q, ssh -G says %q", c.opts, c.host, k, v, want[k])
			}
		}
	}
}
