package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWrapperBeforeShims: a user's ssh wrapper before the shims on PATH
// that execs the shim by its path (assh, logging wrappers do) must not be
// run again by the shim's fallback, which would exec the shim again, for
// ever. Each call ends as /usr/bin/ssh's, with the wrapper run once; the
// wrapper counts its runs and refuses past 3, so a loop fails the test.
func TestWrapperBeforeShims(t *testing.T) {
	testWrapper(t, true)
}

// TestWrapperShimsOffPath: the same wrapper with the shims' directory not
// on PATH (ssh_executable naming the shim, a site wrapper on PATH): the
// fallback finds the wrapper first and runs it; run again, the shim skips
// it (ANSIBLE_BRIDGE_FALLBACK), so each call ends as /usr/bin/ssh's with
// the wrapper run twice where the shim falls back, once where the daemon
// serves it.
func TestWrapperShimsOffPath(t *testing.T) {
	testWrapper(t, false)
}

func testWrapper(t *testing.T, shimsOnPath bool) {
	requireLab(t)
	requireBridge(t)
	d := newPrivateDaemon(t)
	home, err := os.MkdirTemp(suite.work, "home-")
	if err != nil {
		t.Fatal(err)
	}
	wrap := filepath.Join(home, "wrap")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(wrap, 0o755); err != nil {
		t.Fatal(err)
	}
	count := filepath.Join(home, "runs")
	wrapper := fmt.Sprintf(`#!/bin/sh
n=$(($(cat %[1]s 2>/dev/null || echo 0) + 1))
echo $n > %[1]s
if [ $n -gt 3 ]; then echo "wrapper: run $n times: a loop" >&2; exit 99; fi
exec %[2]s "$@"
`, count, filepath.Join(suite.shims, "ssh"))
	if err := os.WriteFile(filepath.Join(wrap, "ssh"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("Host lab\n  HostName 127.0.0.1\n  Port %s\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  BatchMode yes\n  LogLevel ERROR\n",
		suite.lab.Port, suite.lab.User, suite.lab.Key)
	plain := filepath.Join(home, ".ssh", "plain")
	if err := os.WriteFile(plain, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	// The daemon serves the shims' side of this one; the daemon's own
	// ssh -V (its client version) must not loop either. Each side has a
	// master of its own.
	mux := map[string]string{}
	for _, side := range []string{"openssh", "shims"} {
		mux[side] = filepath.Join(home, ".ssh", "mux-"+side)
		cfg := base + "  ControlMaster auto\n  ControlPath " + home + "/" + side[:1] + "%C\n  ControlPersist 30\n"
		if err := os.WriteFile(mux[side], []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = exec.Command(suite.realSSH, "-F", mux["openssh"], "-O", "exit", "lab").Run() })
	env := append(cleanEnv(os.Environ()), append([]string{"HOME=" + home, "LANG=C.UTF-8"}, d.env()...)...)
	run := func(path, ssh string, args []string) (stdout, stderr string, code int) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, ssh, args...)
		cmd.Env = append(env, "PATH="+path)
		cmd.Dir = home
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("%s %q timed out; stderr:\n%s", ssh, args, e.String())
		}
		code = cmd.ProcessState.ExitCode()
		if err != nil && code < 0 {
			t.Fatalf("%s %q: %v", ssh, args, err)
		}
		return o.String(), e.String(), code
	}
	for _, tc := range []struct {
		name     string
		args     func(side string) []string
		fallback bool // the shim runs the real ssh
	}{
		{"Ansible's ControlPersist probe", func(string) []string { return []string{"-o", "ControlPersist"} }, true},
		{"-V", func(string) []string { return []string{"-V"} }, true},
		{"no Control options: the real ssh", func(string) []string { return []string{"-F", plain, "lab", "echo real; exit 3"} }, true},
		{"served by the daemon", func(side string) []string { return []string{"-F", mux[side], "lab", "echo served; exit 4"} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.Remove(count); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			wo, we, wc := run(suite.basePATH, suite.realSSH, tc.args("openssh"))
			dirs, runs := []string{wrap, suite.shims, suite.basePATH}, "1"
			if !shimsOnPath {
				dirs = []string{wrap, suite.basePATH}
				if tc.fallback {
					runs = "2"
				}
			}
			o, e, c := run(strings.Join(dirs, string(os.PathListSeparator)), filepath.Join(wrap, "ssh"), tc.args("shims"))
			if o != wo || e != we || c != wc {
				t.Errorf("through the wrapper: exit %d, stdout %q, stderr %q\nwith OpenSSH: exit %d, stdout %q, stderr %q", c, o, e, wc, wo, we)
			}
			if !shimsOnPath && !tc.fallback {
				// Not checked: the daemon's own ssh -V runs the wrapper too
				// (twice, looping back once): 3 runs (docs/limits.md).
				return
			}
			if b, _ := os.ReadFile(count); strings.TrimSpace(string(b)) != runs {
				t.Errorf("the wrapper ran %s times, want %s", strings.TrimSpace(string(b)), runs)
			}
		})
	}
}
