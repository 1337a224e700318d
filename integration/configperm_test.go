package integration

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConfigPermissionsLikeOpenSSH: a config file pulled in by Include
// is checked as ssh checks it (readconf.c's SSHCONF_CHECKPERM, with
// Debian's secure_permissions): owned by root or the user, not writable
// by others, writable by its group only where the owner is that group's
// one member. Before 2026-11-29 the bridge read an included file whoever
// owned it (another user's ProxyCommand ran), and refused a
// group-writable ~/.ssh/config that Debian's ssh reads. Each case runs
// the real ssh and the shim with control sockets of their own and wants
// the same exit status, stdout and stderr.
func TestConfigPermissionsLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	if os.Getuid() != 0 {
		t.Skip("needs root: the cases give the included file other owners")
	}
	other, err := user.Lookup(suite.lab.User)
	if err != nil {
		t.Fatal(err)
	}
	otherUID, _ := strconv.Atoi(other.Uid)
	otherGID, _ := strconv.Atoi(other.Gid)
	cases := []struct {
		name     string
		uid, gid int
		mode     os.FileMode
		refused  bool // by OpenSSH: the test's own check
	}{
		{"root's, 0644", 0, 0, 0o644, false},
		{"writable by others", 0, 0, 0o666, true},
		{"another user's", otherUID, otherGID, 0o644, true},
		// root's group has root alone on Debian: accepted.
		{"group-writable, the owner's group", 0, 0, 0o664, false},
		// abtest's group has abtest, not the owner (root).
		{"group-writable, another's group", 0, otherGID, 0o664, true},
		{"group-writable, a gid with no group", 0, 54321, 0o664, true},
	}
	d := newPrivateDaemon(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			inc := filepath.Join(dir, "included.conf")
			if err := os.WriteFile(inc, []byte("Host lab\n  ServerAliveInterval 30\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(inc, tc.uid, tc.gid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(inc, tc.mode); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(dir, "ssh_config")
			conf := "Include " + inc + "\nHost lab\n  HostName 127.0.0.1\n  Port " + suite.lab.Port + "\n  User " + suite.lab.User +
				"\n  IdentityFile " + suite.lab.Key + "\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  BatchMode yes\n  LogLevel ERROR\n"
			if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			var outs [2]sshOutcome
			for i, ssh := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
				cp := filepath.Join(dir, "cp"+strconv.Itoa(i))
				run := func(args ...string) sshOutcome {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					args = append([]string{"-F", cfg, "-o", "ControlMaster=auto", "-o", "ControlPersist=60s", "-o", "ControlPath=" + cp}, args...)
					o := runOwnSession(t, exec.CommandContext(ctx, ssh, args...), d.env())
					o.stderr = strings.ReplaceAll(o.stderr, dir, "DIR")
					return o
				}
				outs[i] = run("lab", "echo", "ran")
				run("-O", "exit", "lab")
			}
			if outs[1] != outs[0] {
				t.Errorf("through the shim: %+v\nwith OpenSSH: %+v", outs[1], outs[0])
			}
			if refused := outs[0].rc == 255 && strings.Contains(outs[0].stderr, "Bad owner or permissions on DIR/included.conf"); refused != tc.refused {
				t.Errorf("OpenSSH: %+v, want refused %v", outs[0], tc.refused)
			}
		})
	}
}
