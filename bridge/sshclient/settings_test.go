package sshclient

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// writeFile writes content under dir and returns the path.
func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// noSystemConfig points the system config at a file that does not exist.
func noSystemConfig(t *testing.T) {
	t.Helper()
	setSystemConfig(t, filepath.Join(t.TempDir(), "absent"))
}

func setSystemConfig(t *testing.T, p string) {
	t.Helper()
	old := systemConfig
	systemConfig = p
	t.Cleanup(func() { systemConfig = old })
}

func opts(kv ...string) []fakessh.Option {
	var out []fakessh.Option
	for _, o := range kv {
		k, v, _ := strings.Cut(o, "=")
		out = append(out, fakessh.Option{Key: k, Value: v})
	}
	return out
}

func TestResolve(t *testing.T) {
	const cfg = `# test config
Host web*
  User webuser
  Port 2200

Host *.example.com !bad.example.com
  User exuser
  IdentityFile ~/.ssh/ex_%h_%p_%r
  IdentityFile "~/.ssh/with space"

Host alias
  HostName Real.%h.Example.COM
  ProxyCommand nc -q0 %h %p # %r %n %%

Host jumped
  ProxyJump hop1,hop2:2022
  ProxyCommand ignored

Host commanded
  ProxyCommand first
  ProxyJump ignored

Host unjumped
  ProxyJump none
  ProxyCommand after-none

Host Case
  Port 7

Host *
  User fallback
  Port 2222
  IdentityFile ~/.ssh/all
  ChallengeResponseAuthentication no
  UserKnownHostsFile ~/kh_%h %d/kh2
  ConnectTimeout 1m30s
  ServerAliveInterval 5
  LogLevel verbose
`
	tests := []struct {
		name   string
		inv    fakessh.SSHInvocation
		check  func(t *testing.T, s *Settings, home string)
		noConf bool
	}{
		{
			name: "first Host block wins",
			inv:  fakessh.SSHInvocation{Host: "web1.example.com"},
			check: func(t *testing.T, s *Settings, home string) {
				want := []string{home + "/.ssh/ex_web1.example.com_2200_webuser", home + "/.ssh/with space", home + "/.ssh/all"}
				if s.User != "webuser" || s.Port != 2200 || !reflect.DeepEqual(s.IdentityFiles, want) {
					t.Errorf("got %s %d %q", s.User, s.Port, s.IdentityFiles)
				}
			},
		},
		{
			name: "negated pattern",
			inv:  fakessh.SSHInvocation{Host: "bad.example.com"},
			check: func(t *testing.T, s *Settings, home string) {
				if s.User != "fallback" || s.Port != 2222 {
					t.Errorf("got %s %d", s.User, s.Port)
				}
			},
		},
		{
			name: "command line first; identities accumulate",
			inv: fakessh.SSHInvocation{Host: "web1.example.com", User: "dest",
				Options: opts("user=cli", "identityfile=rel/key", "port=99", "stricthostkeychecking=accept-new")},
			check: func(t *testing.T, s *Settings, home string) {
				if s.User != "cli" || s.Port != 99 || s.StrictHostKeyChecking != "accept-new" {
					t.Errorf("got %s %d %s", s.User, s.Port, s.StrictHostKeyChecking)
				}
				if s.IdentityFiles[0] != "rel/key" || s.IdentityFiles[1] != home+"/.ssh/ex_web1.example.com_99_cli" {
					t.Errorf("identities %q", s.IdentityFiles)
				}
			},
		},
		{
			name: "destination user when no option",
			inv:  fakessh.SSHInvocation{Host: "web1", User: "dest"},
			check: func(t *testing.T, s *Settings, home string) {
				if s.User != "dest" {
					t.Errorf("user %s", s.User)
				}
			},
		},
		{
			name: "HostName %h, lower case; ProxyCommand tokens",
			inv:  fakessh.SSHInvocation{Host: "alias"},
			check: func(t *testing.T, s *Settings, home string) {
				if s.HostName != "real.alias.example.com" || s.HostArg != "alias" {
					t.Errorf("hostname %q", s.HostName)
				}
				if s.ProxyCommand != "nc -q0 real.alias.example.com 2222 # fallback alias %" {
					t.Errorf("proxy command %q", s.ProxyCommand)
				}
			},
		},
		{
			name: "Host patterns are case-sensitive",
			inv:  fakessh.SSHInvocation{Host: "CASE"},
			check: func(t *testing.T, s *Settings, home string) {
				if s.Port != 2222 || s.HostName != "case" {
					t.Errorf("port %d host %s", s.Port, s.HostName)
				}
			},
		},
		{
			name: "ProxyJump first blocks ProxyCommand",
			inv:  fakessh.SSHInvocation{Host: "jumped"},
			check: func(t *testing.T, s *Settings, home string) {
				if s.ProxyCommand != "" || s.ProxyJump != "hop1,hop2:2022" || s.Jump == nil {
					t.Fatalf("proxy %q jump %q", s.ProxyCommand, s.ProxyJump)
				}
				// The last hop, reached through the earlier ones, with
				// its own settings from the config.
				j := s.Jump
				if j.HostName != "hop2" || j.Port != 2022 || j.User != "fallback" || j.ProxyJump != "hop1" || j.Jump == nil || j.Jump.Port != 2222 {
					t.Errorf("hop %+v", j)
				}
			},
		},
		{
			name: "ProxyCommand first blocks ProxyJump",
			inv:  fakessh.SSHInvocation{Host: "commanded"},
			check: func(t *testing.T, s *Settings, home string) {
				if s.ProxyCommand != "first" || s.Jump != nil {
					t.Errorf("proxy %q jump %v", s.ProxyCommand, s.Jump)
				}
			},
		},
		{
			name: "ProxyJump none blocks only ProxyJump",
			inv:  fakessh.SSHInvocation{Host: "unjumped"},
			check: func(t *testing.T, s *Settings, home string) {
				if s.ProxyCommand != "after-none" || s.Jump != nil {
					t.Errorf("proxy %q jump %v", s.ProxyCommand, s.Jump)
				}
			},
		},
		{
			name: "ControlPersist",
			inv:  fakessh.SSHInvocation{Host: "other", Options: opts("controlpersist=60s")},
			check: func(t *testing.T, s *Settings, home string) {
				if s.ControlPersist != time.Minute {
					t.Errorf("ControlPersist %v, want 1m", s.ControlPersist)
				}
			},
		},
		{
			name: "ControlPersist yes",
			inv:  fakessh.SSHInvocation{Host: "other", Options: opts("controlpersist=yes")},
			check: func(t *testing.T, s *Settings, home string) {
				if s.ControlPersist != PersistForever {
					t.Errorf("ControlPersist %v, want forever", s.ControlPersist)
				}
			},
		},
		{
			name: "command-line ProxyJump none",
			inv:  fakessh.SSHInvocation{Host: "jumped", Options: opts("proxyjump=none")},
			check: func(t *testing.T, s *Settings, home string) {
				if s.ProxyCommand != "ignored" || s.Jump != nil {
					t.Errorf("proxy %q jump %v", s.ProxyCommand, s.Jump)
				}
			},
		},
		{
			name: "Host * values and aliases",
			inv:  fakessh.SSHInvocation{Host: "other"},
			check: func(t *testing.T, s *Settings, home string) {
				if s.KbdInteractiveAuthentication || !s.PasswordAuthentication {
					t.Errorf("kbd %v password %v", s.KbdInteractiveAuthentication, s.PasswordAuthentication)
				}
				if s.ConnectTimeout != 90*time.Second || s.ServerAliveInterval != 5*time.Second || s.LogLevel != "VERBOSE" {
					t.Errorf("timeouts %v %v %s", s.ConnectTimeout, s.ServerAliveInterval, s.LogLevel)
				}
				want := []string{home + "/kh_other", home + "/kh2"}
				if !reflect.DeepEqual(s.UserKnownHostsFiles, want) {
					t.Errorf("known hosts %q", s.UserKnownHostsFiles)
				}
			},
		},
		{
			name:   "-F none: defaults",
			inv:    fakessh.SSHInvocation{Host: "Web1", ConfigFile: "none", Options: opts("loglevel=quiet")},
			noConf: true,
			check: func(t *testing.T, s *Settings, home string) {
				want := &Settings{
					HostArg: "Web1", HostName: "web1", Port: 22, User: "tester",
					IdentityFiles:         []string{home + "/.ssh/id_rsa", home + "/.ssh/id_ed25519"},
					StrictHostKeyChecking: "ask",
					UserKnownHostsFiles:   []string{home + "/.ssh/known_hosts", home + "/.ssh/known_hosts2"},
					GlobalKnownHostsFiles: []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"},
					ConnectionAttempts:    1, AddressFamily: "any", ServerAliveCountMax: 3, TCPKeepAlive: true,
					PasswordAuthentication: true, KbdInteractiveAuthentication: true, PubkeyAuthentication: true,
					PreferredAuthentications: []string{"gssapi-with-mic", "hostbased", "publickey", "keyboard-interactive", "password"},
					NumberOfPasswordPrompts:  3, LogLevel: "QUIET",
					ControlMaster: "no", ControlPersist: PersistNo, StreamLocalBindMask: 0o177, EscapeChar: '~',
				}
				got := *s
				got.Env, got.userKHDisplay, got.globalKHDisplay, got.updateHostKeys = Env{}, nil, nil, false
				if !reflect.DeepEqual(&got, want) {
					t.Errorf("got  %+v\nwant %+v", &got, want)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			noSystemConfig(t)
			env := testEnv(t)
			writeFile(t, env.Home, ".ssh/config", cfg, 0o600)
			// Default identities exist: they are used only without IdentityFile.
			writeFile(t, env.Home, ".ssh/id_rsa", "x", 0o600)
			writeFile(t, env.Home, ".ssh/id_ed25519", "x", 0o600)
			s, err := Resolve(&tc.inv, env)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			tc.check(t, s, env.Home)
		})
	}
}

// TestCommandLineWords: -o values reach the resolver as the shim's parser
// split them; a quoted file name with a blank stays one file.
func TestCommandLineWords(t *testing.T) {
	env := testEnv(t)
	inv, err := fakessh.ParseSSH([]string{"ssh", "-F", "none",
		"-o", `UserKnownHostsFile="~/a b/kh" /c/kh`, "-o", `GlobalKnownHostsFile /g/kh`,
		"-o", `IdentityFile="~/my key"`, "-o", `HostKeyAlias=al#1`, "h"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Resolve(inv, env)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{env.Home + "/a b/kh", "/c/kh"}; !reflect.DeepEqual(s.UserKnownHostsFiles, want) {
		t.Errorf("UserKnownHostsFiles %q, want %q", s.UserKnownHostsFiles, want)
	}
	if want := []string{"/g/kh"}; !reflect.DeepEqual(s.GlobalKnownHostsFiles, want) {
		t.Errorf("GlobalKnownHostsFiles %q, want %q", s.GlobalKnownHostsFiles, want)
	}
	if want := []string{env.Home + "/my key"}; !reflect.DeepEqual(s.IdentityFiles, want) {
		t.Errorf("IdentityFiles %q, want %q", s.IdentityFiles, want)
	}
	if s.HostKeyAlias != "al#1" {
		t.Errorf("HostKeyAlias %q", s.HostKeyAlias)
	}
}

func TestResolveSources(t *testing.T) {
	t.Run("user config before system config", func(t *testing.T) {
		env := testEnv(t)
		writeFile(t, env.Home, ".ssh/config", "Port 1111\n", 0o600)
		setSystemConfig(t, writeFile(t, t.TempDir(), "ssh_config", "Host *\n  Port 2222\n  User sys\n", 0o644))
		s, err := Resolve(&fakessh.SSHInvocation{Host: "h"}, env)
		if err != nil {
			t.Fatal(err)
		}
		if s.Port != 1111 || s.User != "sys" {
			t.Errorf("port %d user %s", s.Port, s.User)
		}
	})
	t.Run("-F replaces both", func(t *testing.T) {
		env := testEnv(t)
		writeFile(t, env.Home, ".ssh/config", "Port 1111\n", 0o600)
		setSystemConfig(t, writeFile(t, t.TempDir(), "ssh_config", "User sys\n", 0o644))
		writeFile(t, env.Cwd, "myconf", "Port 3333\n", 0o600)
		s, err := Resolve(&fakessh.SSHInvocation{Host: "h", ConfigFile: "myconf"}, env)
		if err != nil {
			t.Fatal(err)
		}
		if s.Port != 3333 || s.User != "tester" {
			t.Errorf("port %d user %s", s.Port, s.User)
		}
	})
	t.Run("Debian system config with Include", func(t *testing.T) {
		env := testEnv(t)
		etc := t.TempDir()
		writeFile(t, etc, "ssh_config.d/10-a.conf", "Host h\n  User fromdir\n", 0o644)
		writeFile(t, etc, "ssh_config.d/20-b.conf", "User second\nPort 2020\n", 0o644)
		setSystemConfig(t, writeFile(t, etc, "ssh_config", "Include "+etc+"/ssh_config.d/*.conf\n"+
			"Include /nonexistent/*.conf\n\nHost *\n    SendEnv LANG LC_*\n    HashKnownHosts yes\n    GSSAPIAuthentication yes\n", 0o644))
		s, err := Resolve(&fakessh.SSHInvocation{Host: "h"}, env)
		if err != nil {
			t.Fatal(err)
		}
		if s.User != "fromdir" || s.Port != 2020 || !s.HashKnownHosts {
			t.Errorf("user %s port %d hash %v", s.User, s.Port, s.HashKnownHosts)
		}
	})
	t.Run("Include relative to ~/.ssh, inside a Host block", func(t *testing.T) {
		noSystemConfig(t)
		env := testEnv(t)
		writeFile(t, env.Home, ".ssh/inc/x.conf", "Port 4444\nHost *\n  User incuser\n", 0o600)
		writeFile(t, env.Home, ".ssh/config", "Host nomatch\n  Include inc/*.conf\nHost h\n  Include inc/*.conf\n  User after\n", 0o600)
		s, err := Resolve(&fakessh.SSHInvocation{Host: "h"}, env)
		if err != nil {
			t.Fatal(err)
		}
		// The included Host * block ends in the included file: "User
		// after" still belongs to "Host h", but incuser came first.
		if s.Port != 4444 || s.User != "incuser" {
			t.Errorf("port %d user %s", s.Port, s.User)
		}
		s, err = Resolve(&fakessh.SSHInvocation{Host: "other"}, env)
		if err != nil {
			t.Fatal(err)
		}
		if s.Port != 22 {
			t.Errorf("include in a non-matching block applied: port %d", s.Port)
		}
	})
	t.Run("Match", func(t *testing.T) {
		noSystemConfig(t)
		env := testEnv(t)
		writeFile(t, env.Home, ".ssh/config", `Match exec "true"
  User fromexec
Match originalhost MYHOST user tester
  Port 1001
Host myhost
  HostName target.example
Match host target.example
  IdentityFile ~/matched
Match !localuser tester
  Compression yes
  User notme
Match final
  User finaluser
Match canonical all
  LogLevel error
`, 0o600)
		s, err := Resolve(&fakessh.SSHInvocation{Host: "myhost"}, env)
		if err != nil {
			t.Fatal(err)
		}
		if s.Port != 1001 || s.HostName != "target.example" || s.User != "finaluser" || s.LogLevel != "ERROR" {
			t.Errorf("port %d host %s user %s loglevel %s", s.Port, s.HostName, s.User, s.LogLevel)
		}
		if len(s.IdentityFiles) != 1 || s.IdentityFiles[0] != env.Home+"/matched" {
			t.Errorf("identities %q", s.IdentityFiles)
		}
		if len(s.Unsupported) != 1 || !strings.Contains(s.Unsupported[0], "Match exec") {
			t.Errorf("unsupported %q", s.Unsupported)
		}
	})
	t.Run("environment variables in IdentityFile", func(t *testing.T) {
		noSystemConfig(t)
		env := testEnv(t)
		env.Environ = []string{"KEYDIR=/keys"}
		s, err := Resolve(&fakessh.SSHInvocation{Host: "h", Options: opts("identityfile=${KEYDIR}/id_%u")}, env)
		if err != nil {
			t.Fatal(err)
		}
		if s.IdentityFiles[0] != "/keys/id_tester" {
			t.Errorf("identity %q", s.IdentityFiles[0])
		}
	})
	t.Run("ControlPath, ControlMaster, ControlPersist", func(t *testing.T) {
		noSystemConfig(t)
		env := testEnv(t)
		long, _ := os.Hostname()
		sum := sha1.Sum([]byte(long + "h" + "2200" + "bob"))
		tests := []struct {
			opts         []string
			path, master string
			persist      time.Duration
		}{
			{nil, "", "no", PersistNo},
			{[]string{"controlpath=~/cp/%C", "port=2200", "user=bob", "controlmaster=auto", "controlpersist=60s"},
				env.Home + "/cp/" + hex.EncodeToString(sum[:]), "auto", time.Minute},
			{[]string{"controlpath=/tmp/%r@%h:%p", "controlmaster=true", "controlpersist=yes"}, "/tmp/tester@h:22", "yes", PersistForever},
			{[]string{"controlpath=none", "controlmaster=false", "controlpersist=0"}, "", "no", PersistForever},
			{[]string{"controlpath=/a b/c", "controlmaster=autoask", "controlpersist=no"}, "/a b/c", "autoask", PersistNo},
		}
		for _, tt := range tests {
			s, err := Resolve(&fakessh.SSHInvocation{Host: "h", Options: opts(tt.opts...)}, env)
			if err != nil {
				t.Fatal(err)
			}
			if s.ControlPath != tt.path || s.ControlMaster != tt.master || s.ControlPersist != tt.persist {
				t.Errorf("%q: path %q master %q persist %v, want %q %q %v", tt.opts, s.ControlPath, s.ControlMaster, s.ControlPersist, tt.path, tt.master, tt.persist)
			}
		}
	})
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		inv    fakessh.SSHInvocation
		want   string // FILE is the -F path
	}{
		{name: "missing -F", inv: fakessh.SSHInvocation{Host: "h", ConfigFile: "absent"},
			want: "Can't open user config file absent: No such file or directory"},
		{name: "bad values", config: "Host *\n  Port abc\n  StrictHostKeyChecking maybe\n  ConnectTimeout soon\n  LogLevel loud\n",
			want: "FILE line 2: Bad port 'abc'.\r\nFILE line 3: unsupported option \"maybe\".\r\nFILE line 4: invalid time value.\r\n" +
				"FILE line 5: unsupported log level 'loud'\r\nFILE: terminating, 4 bad configuration options"},
		{name: "bad AddKeysToAgent", config: "Host *\n  AddKeysToAgent maybe\n  AddKeysToAgent confirm 1x\n  AddKeysToAgent yes 1m\n  AddKeysToAgent \"\"\n",
			want: "FILE line 2: unsupported option\r\nFILE line 3: invalid time value.\r\nFILE line 4: unsupported option\r\n" +
				"FILE line 5: missing argument.\r\nFILE line 5: unsupported option\r\nFILE: terminating, 4 bad configuration options"},
		{name: "bad command line", inv: fakessh.SSHInvocation{Host: "h", ConfigFile: "none", Options: opts("numberofpasswordprompts=x")},
			want: "command-line line 0: integer value invalid."},
		{name: "unknown token", config: "IdentityFile ~/%x\n",
			want: "vdollar_percent_expand: unknown key %x\r\npercent_dollar_expand: failed"},
		{name: "unset variable", inv: fakessh.SSHInvocation{Host: "h", ConfigFile: "none", Options: opts("identityfile=${NOPE_UNSET_VAR}/x")},
			want: "vdollar_percent_expand: env var ${NOPE_UNSET_VAR} has no value\r\ninvalid environment variable expansion"},
		// ssh reads the whole file before it expands a path.
		{name: "bad option after ControlPath", config: "ControlPath /cp-${NOPE_UNSET_VAR}\nBogusoption yes\nHost x\n  Other no\n",
			want: "FILE: line 2: Bad configuration option: bogusoption\r\nFILE: line 4: Bad configuration option: other\r\n" +
				"FILE: terminating, 2 bad configuration options"},
		{name: "bad option, bad quotes", config: "Bogusoption \"yes\n",
			want: "FILE: line 1: Bad configuration option: bogusoption\r\nFILE line 1: invalid quotes\r\nFILE: terminating, 1 bad configuration options"},
		{name: "bad option -q", config: "ControlPath /cp-%Z\nBogusoption yes\n", inv: fakessh.SSHInvocation{Options: opts("loglevel=QUIET")}},
		{name: "bad option, LogLevel FATAL", config: "Bogusoption yes\n", inv: fakessh.SSHInvocation{Options: opts("loglevel=FATAL")},
			want: "FILE: terminating, 1 bad configuration options"},
		// The file's LogLevel applies only once it is read.
		{name: "bad option, file's LogLevel", config: "LogLevel QUIET\nBogusoption yes\n",
			want: "FILE: line 2: Bad configuration option: bogusoption\r\nFILE: terminating, 1 bad configuration options"},
		{name: "IgnoreUnknown", config: "IgnoreUnknown other,bogus*\nBogusoption yes\nControlPath /cp-%Z\n",
			want: "vdollar_percent_expand: unknown key %Z\r\npercent_dollar_expand: failed"},
		{name: "IgnoreUnknown after", config: "Bogusoption yes\nIgnoreUnknown bogus*\n",
			want: "FILE: line 1: Bad configuration option: bogusoption\r\nFILE: terminating, 1 bad configuration options"},
		{name: "bad Match attribute", config: "Match bogus x\n",
			want: "Unsupported Match attribute bogus\r\nFILE line 1: Bad Match condition\r\nFILE: terminating, 1 bad configuration options"},
		{name: "Match all combined", config: "Match all host x\n",
			want: "FILE line 1: 'all' cannot be combined with other Match attributes\r\nFILE line 1: Bad Match condition\r\n" +
				"FILE: terminating, 1 bad configuration options"},
		{name: "Match without criteria", config: "Match #x\nMatch host\nMatch\nHost\nHost \"x\n",
			want: "One or more attributes required for Match\r\nFILE line 1: Bad Match condition\r\n" +
				"Missing Match criteria for host\r\nFILE line 2: Bad Match condition\r\n" +
				"FILE line 3: no argument after keyword \"match\"\r\nFILE line 4: no argument after keyword \"host\"\r\n" +
				"FILE line 5: invalid quotes\r\nFILE: terminating, 5 bad configuration options"},
		// An unset variable is reported and expansion goes on; any other
		// error ends it.
		{name: "unset variables", config: "ControlPath /${NOPE_UNSET_VAR}/${NOPE_ALSO}\n",
			want: "vdollar_percent_expand: env var ${NOPE_UNSET_VAR} has no value\r\n" +
				"vdollar_percent_expand: env var ${NOPE_ALSO} has no value\r\ninvalid environment variable expansion"},
		{name: "unset variable, unknown key", config: "ControlPath /${NOPE_UNSET_VAR}/%Z/${NOPE_ALSO}\n",
			want: "vdollar_percent_expand: env var ${NOPE_UNSET_VAR} has no value\r\n" +
				"vdollar_percent_expand: unknown key %Z\r\npercent_dollar_expand: failed"},
		{name: "unterminated variable", config: "ControlPath /cp-${NOPE\n",
			want: "vdollar_percent_expand: environment variable 'NOPE' missing closing '}'\r\npercent_dollar_expand: failed"},
		{name: "empty variable", config: "ControlPath /cp-${}\n",
			want: "vdollar_percent_expand: zero-length environment variable\r\npercent_dollar_expand: failed"},
		{name: "HostName token", config: "HostName %Z\n", want: "vdollar_percent_expand: unknown key %Z\r\npercent_expand: failed"},
		// ssh logs these after it has read LogLevel from its files.
		{name: "ControlPath, file's LogLevel QUIET", config: "LogLevel QUIET\nControlPath /cp-%Z\n"},
		{name: "ControlPath, LogLevel FATAL", config: "LogLevel FATAL\nControlPath /cp-${NOPE}\n", want: "invalid environment variable expansion"},
		{name: "ControlPath -q", config: "ControlPath /cp-%Z\n", inv: fakessh.SSHInvocation{Options: opts("loglevel=QUIET")}},
		// ssh checks for a ProxyJump loop before it expands a path, at
		// the command line's LogLevel.
		{name: "jumphost loop before ControlPath", config: "LogLevel QUIET\n",
			inv:  fakessh.SSHInvocation{Host: "127.0.0.1", Options: opts("port=2222", "proxyjump=u@127.0.0.1:2222", "user=u", "controlpath=/x-%j")},
			want: "jumphost loop via 127.0.0.1"},
		{name: "jumphost loop -q",
			inv: fakessh.SSHInvocation{Host: "127.0.0.1", Options: opts("loglevel=QUIET", "proxyjump=127.0.0.1", "controlpath=/x-%j")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t)
			env.Environ = []string{}
			inv := tc.inv
			if inv.Host == "" {
				inv.Host = "h"
			}
			if tc.config != "" {
				inv.ConfigFile = writeFile(t, env.Home, "cfg", tc.config, 0o600)
			}
			_, err := Resolve(&inv, env)
			var ce *ConnError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v", err)
			}
			if want := strings.ReplaceAll(tc.want, "FILE", inv.ConfigFile); ce.Msg != want {
				t.Errorf("got  %q\nwant %q", ce.Msg, want)
			}
		})
	}
	t.Run("not served", func(t *testing.T) {
		// ssh says "Unsupported option" first: the real one runs.
		env := testEnv(t)
		inv := fakessh.SSHInvocation{Host: "h", ConfigFile: writeFile(t, env.Home, "cfg", "KerberosAuthentication yes\nControlPath /cp-%Z\n", 0o600)}
		s, err := Resolve(&inv, env)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Unsupported) == 0 {
			t.Error("served")
		}
	})
	t.Run("writable user config", func(t *testing.T) {
		noSystemConfig(t)
		env := testEnv(t)
		p := writeFile(t, env.Home, ".ssh/config", "Port 1\n", 0o600)
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
		_, err := Resolve(&fakessh.SSHInvocation{Host: "h"}, env)
		if err == nil || err.Error() != "Bad owner or permissions on "+p {
			t.Errorf("err = %v", err)
		}
	})
}

func TestLookupName(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{HostName: "h", Port: 22}, "h"},
		{Settings{HostName: "h", Port: 2222}, "[h]:2222"},
		{Settings{HostName: "::1", Port: 2222}, "[::1]:2222"},
		{Settings{HostName: "h", Port: 2222, HostKeyAlias: "alias"}, "alias"},
	} {
		if got := lookupName(&tc.s); got != tc.want {
			t.Errorf("lookupName(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// TestResolveMatchesOpenSSH compares Resolve with "ssh -G" for a config
// exercising Host, Match and first-wins rules.
func TestResolveMatchesOpenSSH(t *testing.T) {
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("no ssh client installed")
	}
	u, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config", `Host a*
  User auser
Host *.lan !b.lan
  Port 2022
  HostName %h.internal
Match originalhost c user bob
  Port 3033
Match host *.internal
  StrictHostKeyChecking accept-new
  ConnectTimeout 7
Host D
  BatchMode yes
Host *
  User every
  Port 4044
  PasswordAuthentication no
  HostKeyAlias kA
  ProxyCommand nc %h %p
`, 0o600)
	cases := []struct {
		host string
		args []string
	}{
		{"a1", nil}, {"x.lan", nil}, {"b.lan", nil}, {"c", []string{"-l", "bob"}}, {"c", nil},
		{"D", nil}, {"d", nil}, {"a.lan", []string{"-p", "5"}}, {"x.lan", []string{"-o", "User=cli", "-o", "Port=6"}},
	}
	for _, c := range cases {
		args := append([]string{"-G", "-F", cfg}, c.args...)
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
		inv := &fakessh.SSHInvocation{Host: c.host, ConfigFile: cfg}
		for i := 0; i < len(c.args); i += 2 {
			switch c.args[i] {
			case "-l":
				inv.Options = append(inv.Options, fakessh.Option{Key: "user", Value: c.args[i+1]})
			case "-p":
				inv.Options = append(inv.Options, fakessh.Option{Key: "port", Value: c.args[i+1]})
			case "-o":
				k, v, _ := strings.Cut(c.args[i+1], "=")
				inv.Options = append(inv.Options, fakessh.Option{Key: strings.ToLower(k), Value: v})
			}
		}
		s, err := Resolve(inv, Env{Home: u.HomeDir, User: u.Username, Cwd: dir})
		if err != nil {
			t.Fatal(err)
		}
		strict := map[string]string{"yes": "true", "no": "false", "ask": "ask", "accept-new": "accept-new"}[s.StrictHostKeyChecking]
		timeout := "none"
		if s.ConnectTimeout > 0 {
			timeout = fmt.Sprint(int(s.ConnectTimeout.Seconds()))
		}
		got := map[string]string{
			"hostname": s.HostName, "port": fmt.Sprint(s.Port), "user": s.User,
			"stricthostkeychecking": strict, "connecttimeout": timeout,
			"batchmode": yesno(s.BatchMode), "passwordauthentication": yesno(s.PasswordAuthentication),
			"hostkeyalias": s.HostKeyAlias,
		}
		for k, v := range got {
			if want[k] != v {
				t.Errorf("ssh %v %s: %s = %q, ssh -G says %q", c.args, c.host, k, v, want[k])
			}
		}
	}
}

func yesno(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// TestSessionKeywordsFromFiles: what shapes a session, set in a config
// file the shim never reads, makes the invocation fall back unless the
// command line set it first or it is ssh's default; forwardings unless
// ClearAllForwardings (which scp and sftp pass).
func TestSessionKeywordsFromFiles(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		cmdline      []fakessh.Option
		noted        string
	}{
		{"RemoteCommand", "RemoteCommand echo hi", nil, "remotecommand ..."},
		{"RemoteCommand none", "RemoteCommand none", nil, ""},
		{"RemoteCommand after the command line's", "RemoteCommand echo hi", []fakessh.Option{{Key: "remotecommand", Value: "none"}}, ""},
		{"RequestTTY force", "RequestTTY force", nil, "requesttty force"},
		{"RequestTTY auto", "RequestTTY auto", nil, ""},
		{"RequestTTY after -T", "RequestTTY yes", []fakessh.Option{{Key: "requesttty", Value: "no"}}, ""},
		{"StdinNull", "StdinNull yes", nil, "stdinnull yes"},
		{"SetEnv", "SetEnv A=1", nil, "setenv ..."},
		{"ForwardAgent", "ForwardAgent yes", nil, "forwardagent yes"},
		{"ForwardAgent no", "ForwardAgent no", nil, ""},
		{"SessionType none", "SessionType none", nil, "sessiontype none"},
		{"LocalForward", "LocalForward 1234 127.0.0.1:22", nil, "localforward 1234 127.0.0.1:22"},
		{"LocalForward, cleared", "LocalForward 1234 127.0.0.1:22", []fakessh.Option{{Key: "clearallforwardings", Value: "yes"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noSystemConfig(t)
			env := testEnv(t)
			writeFile(t, env.Home, ".ssh/config", "Host h\n  "+tc.config+"\n", 0o600)
			s, err := Resolve(&fakessh.SSHInvocation{Host: "h", Options: tc.cmdline}, env)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.noted == "" && len(s.Unsupported) != 0:
				t.Errorf("unsupported %q, want none", s.Unsupported)
			case tc.noted != "" && (len(s.Unsupported) != 1 || !strings.HasPrefix(s.Unsupported[0], tc.noted+" (from ")):
				t.Errorf("unsupported %q, want %q", s.Unsupported, tc.noted)
			}
		})
	}
}

// TestBracketedDestination: ssh keeps a plain destination's brackets (no
// name resolves then); only an ssh:// URI's host loses them.
func TestBracketedDestination(t *testing.T) {
	s, err := Resolve(&fakessh.SSHInvocation{Host: "[127.0.0.1]", ConfigFile: "none"}, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.HostName != "[127.0.0.1]" {
		t.Errorf("HostName %q, want the brackets kept", s.HostName)
	}
}

// TestIdentityFileNone: ssh skips an IdentityFile none (any case), which
// still counts as configured: no default identity is tried either.
func TestIdentityFileNone(t *testing.T) {
	env := testEnv(t)
	writeFile(t, env.Home, ".ssh/id_ed25519", "key", 0o600)
	if s := settingsFor(t, env, 22, "IdentityFile=none"); len(s.IdentityFiles) != 0 {
		t.Errorf("IdentityFile none: identities %q, want none", s.IdentityFiles)
	}
	s := settingsFor(t, env, 22, "IdentityFile=NONE", "IdentityFile=~/k")
	if want := []string{env.Home + "/k"}; !reflect.DeepEqual(s.IdentityFiles, want) {
		t.Errorf("IdentityFile NONE and ~/k: identities %q, want %q", s.IdentityFiles, want)
	}
}
