package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMessagesLikeOpenSSH runs ssh through the shim and through OpenSSH
// where ssh fails, or warns, before it would use a connection, and wants
// the same exit status, output and messages: a configuration error after
// a ControlPath it cannot expand, a ProxyJump loop before the
// ControlPath's unknown token, -q hiding the ControlPath's errors, and an
// identity file that cannot be read. Each side has a directory of its own
// (named DIR in the messages) for its ControlPath and files.
func TestMessagesLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	key := hostPublicKey(t, filepath.Join(suite.lab.Dir, "ssh_host_ed25519_key.pub"))
	login := []string{"-i", suite.lab.Key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-p", suite.lab.Port,
		"-o", "UserKnownHostsFile=DIR/known_hosts", "-o", "ControlMaster=auto", "-o", "ControlPersist=60s"}
	dest := suite.lab.User + "@127.0.0.1"
	long := strings.Repeat("l", 108)
	cases := []struct {
		name   string
		config string   // DIR/cfg, passed with -F when set
		args   []string // after the login options
		first  []string // before them
	}{
		{"bad option after an unset ${VAR}", "Host t\n  HostName 127.0.0.1\n  ControlPath DIR/cp-${AB_UNSET_CPV}\n  Bogusoption yes\n",
			[]string{"t", "true"}, nil},
		{"bad Match line after an unset ${VAR}", "ControlPath DIR/cp-${AB_UNSET_CPV}\nMatch bogus x\n", []string{"t", "true"}, nil},
		{"bad option, -q", "ControlPath DIR/cp-%Z\nBogusoption yes\n", []string{"-q", "t", "true"}, nil},
		{"ProxyJump loop before %j", "", []string{"-J", dest + ":" + suite.lab.Port, "-o", "ControlPath=DIR/x-%j", dest, "true"}, nil},
		{"-q, -O check without a master", "", []string{"-q", "-o", "ControlPath=DIR/cp", "-O", "check", dest}, nil},
		{"LogLevel QUIET, ControlPath too long", "", []string{"-o", "LogLevel=QUIET", "-o", "ControlPath=DIR/" + long, dest, "true"}, nil},
		{"LogLevel FATAL, ControlPath too long", "", []string{"-o", "LogLevel=FATAL", "-o", "ControlPath=DIR/" + long, dest, "true"}, nil},
		{"-q, ControlPath unknown token", "", []string{"-q", "-o", "ControlPath=DIR/cp-%Z", dest, "true"}, nil},
		{"LogLevel FATAL, unset ${VAR}", "", []string{"-o", "LogLevel=FATAL", "-o", "ControlPath=DIR/cp-${AB_UNSET_CPV}", dest, "true"}, nil},
		{"identity file is a directory", "", []string{"-o", "ControlPath=DIR/cp", dest, "echo", "ok"}, []string{"-i", "DIR/keydir"}},
	}
	for n, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newPrivateDaemon(t)
			var runs [2]sshOutcome
			for i, side := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
				dir := filepath.Join(t.TempDir(), fmt.Sprintf("%d", n))
				if err := os.MkdirAll(filepath.Join(dir, "keydir"), 0o700); err != nil {
					t.Fatal(err)
				}
				writeKnownHosts(t, filepath.Join(dir, "known_hosts"), "[127.0.0.1]:"+suite.lab.Port+" "+key+"\n")
				var args []string
				for _, a := range append(tc.first, login...) {
					args = append(args, strings.ReplaceAll(a, "DIR", dir))
				}
				if tc.config != "" {
					cfg := filepath.Join(dir, "cfg")
					if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(tc.config, "DIR", dir)), 0o600); err != nil {
						t.Fatal(err)
					}
					args = append(args, "-F", cfg)
				} else {
					args = append(args, "-F", "none")
				}
				for _, a := range tc.args {
					args = append(args, strings.ReplaceAll(a, "DIR", dir))
				}
				runs[i] = runOwnSession(t, exec.Command(side, args...), d.env())
				runs[i].stderr = strings.ReplaceAll(runs[i].stderr, dir, "DIR")
				t.Cleanup(func() {
					runOwnSession(t, exec.Command(side, "-O", "exit", "-o", "ControlPath="+filepath.Join(dir, "cp"), dest), d.env())
				})
			}
			want, got := runs[0], runs[1]
			if got.rc != want.rc || got.stdout != want.stdout || got.stderr != want.stderr {
				t.Errorf("through the shim: rc %d, stdout %q, stderr:\n%s\nwith OpenSSH: rc %d, stdout %q, stderr:\n%s",
					got.rc, got.stdout, got.stderr, want.rc, want.stdout, want.stderr)
			}
		})
	}
}
