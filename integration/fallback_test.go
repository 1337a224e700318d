package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

// shimLog is where shims record each fallback to the real binary (next to
// the daemon socket).
func shimLog() string {
	return wire.SideFile(suite.socket, "shim.log")
}

// isProbe reports whether a shim log line is the fallback for Ansible's
// `ssh -o ControlPersist` probe, which every run makes first: it names no
// host, and the real ssh's usage error is the authoritative answer.
func isProbe(line string) bool {
	l := strings.ToLower(line)
	return strings.Contains(l, "prog=ssh ") && strings.Contains(l, "argc=2") && strings.Contains(l, "controlpersist")
}

// watchShimLog returns a function that reports the fallback lines the shims
// logged since watchShimLog was called, leaving out the ControlPersist probe
// (see isProbe); it also logs them if t fails.
func watchShimLog(t *testing.T) func() []string {
	t.Helper()
	if suite.compareStock {
		return func() []string { return nil }
	}
	start := fileSize(shimLog())
	lines := func() []string {
		var out []string
		for _, l := range strings.Split(string(readFrom(shimLog(), start)), "\n") {
			if strings.Contains(l, "fallback") && !isProbe(l) {
				out = append(out, l)
			}
		}
		return out
	}
	t.Cleanup(func() {
		if l := lines(); t.Failed() && len(l) > 0 {
			t.Logf("shim fallbacks during this test (%s):\n%s", shimLog(), strings.Join(l, "\n"))
		}
	})
	return lines
}

// TestFallback gives Ansible an ssh option the bridge cannot honour
// (ForwardAgent=yes): the shims must hand those invocations to the real
// binaries, say so in the shim log, and the run must equal stock.
func TestFallback(t *testing.T) {
	requireLab(t)
	tests := []struct {
		name string
		vars map[string]any
	}{
		// Only ssh gets the option: sftp/scp stay with the bridge while the
		// real ssh runs the commands.
		{"ssh_extra_args", map[string]any{"ansible_ssh_extra_args": "-o ForwardAgent=yes"}},
		// ssh, sftp and scp all get it: everything goes to the real binaries.
		{"ssh_common_args", map[string]any{"ansible_ssh_common_args": "-o UserKnownHostsFile=/dev/null -o ForwardAgent=yes"}},
	}
	modes := []mode{{false, "sftp"}, {false, "scp"}, {true, "piped"}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range modes {
				t.Run(m.String(), func(t *testing.T) {
					requireBridge(t)
					fallbacks := watchShimLog(t)
					spec := runSpec{
						Playbook: "fallback.yml",
						Mode:     m,
						HostVars: map[string]map[string]any{"t": tc.vars},
					}
					spec.Side = stock
					want := runPlaybook(t, spec)
					checkFallback(t, want)
					spec.Side = bridgeSide()
					got := runPlaybook(t, spec)
					checkFallback(t, got)
					compareRuns(t, got, want)
					if suite.compareStock {
						return
					}
					lines := fallbacks()
					if len(lines) == 0 {
						t.Errorf("the shim log %s records no fallback", shimLog())
					}
					for _, l := range lines {
						// Once the real ssh is the master of the run's
						// ControlPath, ssh, sftp and scp multiplex over it.
						if !strings.Contains(strings.ToLower(l), "forwardagent") && !strings.Contains(l, "master started by ssh") {
							t.Errorf("fallback for another reason than ForwardAgent: %s", l)
						}
					}
					t.Logf("%d fallbacks, first: %s", len(lines), first(lines))
					// The real ssh leaves its ControlPersist master behind.
					if got.Masters == 0 {
						t.Errorf("bridge run left no ssh control master: the real ssh never ran")
					}
				})
			}
		})
	}
}

func checkFallback(t *testing.T, r *runResult) {
	t.Helper()
	wantExit(t, r, 0)
	wantTask(t, r, "t", "command", "ok", "via real ssh")
	wantTask(t, r, "t", "become", "ok", "root")
	wantFile(t, r, "target:abtest/fallback.txt", &fileEntry{Mode: "0640", SHA256: sha("fallback\n")})
	wantFile(t, r, "local/fallback.txt", &fileEntry{SHA256: sha("fallback\n")})
}

func first(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return l[0]
}

// TestSandboxedShimFallsBack: a shim in another mount namespace (a
// sandbox: ansible-runner's bubblewrap; here unshare) that reaches a
// daemon outside it goes to the real ssh, which reads the sandbox's own
// files (a key the sandbox hides would have been the daemon's to read).
func TestSandboxedShimFallsBack(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare (util-linux)")
	}
	d := newPrivateDaemon(t)
	cp := t.TempDir()
	ssh := []string{filepath.Join(suite.shims, "ssh"), "-o", "ControlMaster=auto", "-o", "ControlPath=" + cp + "/%C",
		"-o", "ControlPersist=30", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-i", suite.lab.Key, "-p", suite.lab.Port, suite.lab.User + "@127.0.0.1"}
	run := func(argv ...string) string {
		t.Helper()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(cleanEnv(os.Environ()), append([]string{"PATH=" + suite.basePATH}, d.env()...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", argv, err, out)
		}
		return string(out)
	}
	start := fileSize(wire.SideFile(d.socket, "shim.log"))
	if out := run(append(ssh, "echo outside")...); out != "outside\n" {
		t.Fatalf("outside the sandbox: %q", out)
	}
	if out := run(append([]string{"unshare", "--mount", "--"}, append(ssh, "echo inside")...)...); out != "inside\n" {
		t.Fatalf("inside the sandbox: %q", out)
	}
	logged := string(readFrom(wire.SideFile(d.socket, "shim.log"), start))
	if n := strings.Count(logged, "another mount namespace"); n != 1 {
		t.Errorf("shim log: %d sandbox fallbacks, want 1:\n%s", n, logged)
	}
	run(append(slices.Clone(ssh[:len(ssh)-1]), "-O", "exit", ssh[len(ssh)-1])...)

	// What else puts the shim elsewhere, with a ControlPath no master
	// holds: the real ssh connects, names its host and opens its files
	// from there (before, a shim with no network reached the target
	// through the daemon's).
	short, err := os.MkdirTemp("", "abs-") // a socket path's length is bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	t.Cleanup(func() { stopMasters(t, short) })
	other := slices.Clone(ssh)
	other[4] = "ControlPath=" + short + "/%l-%p"
	for _, tc := range []struct {
		name, wrap, want, logged string
	}{
		{"network", `exec unshare --net -- "$@"`, "ssh: connect to host 127.0.0.1 port " + suite.lab.Port + ": Network is unreachable\r\n", "another network namespace"},
		{"UTS", `exec unshare --uts -- sh -c 'hostname ab-uts-test && exec "$@"' sh "$@"`, "uts\n", "another UTS namespace"},
		{"groups", `exec setpriv --groups 54321 -- "$@"`, "groups\n", "groups are not the daemon's"},
		// A root caller without the right to read what its mode denies
		// (audit 16: the daemon logged in with a key it could not read).
		{"capabilities", `exec setpriv --inh-caps=-dac_override,-dac_read_search --bounding-set=-dac_override,-dac_read_search -- "$@"`, "capabilities\n", "capabilities, no_new_privs or seccomp"},
		{"no_new_privs", `exec setpriv --no-new-privs -- "$@"`, "no_new_privs\n", "capabilities, no_new_privs or seccomp"},
		{"file size", `ulimit -f 100000 && exec "$@"`, "file size\n", "file size limit (ulimit -f)"},
		// torsocks and proxychains hook ssh's connect through the loader.
		{"preload", `LD_PRELOAD=libc.so.6 exec "$@"`, "preload\n", "LD_PRELOAD is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := fileSize(wire.SideFile(d.socket, "shim.log"))
			cmd := exec.Command("sh", append([]string{"-c", tc.wrap, "sh"}, append(other, "echo "+strings.ToLower(tc.name))...)...)
			cmd.Env = append(cleanEnv(os.Environ()), append([]string{"PATH=" + suite.basePATH}, d.env()...)...)
			out, _ := cmd.CombinedOutput()
			if string(out) != tc.want {
				t.Errorf("output %q, want %q", out, tc.want)
			}
			if logged := string(readFrom(wire.SideFile(d.socket, "shim.log"), start)); !strings.Contains(logged, tc.logged) {
				t.Errorf("shim log has no %q fallback:\n%s", tc.logged, logged)
			}
			if tc.name == "UTS" {
				// The real ssh's master, named by the shim's host name.
				if m, _ := filepath.Glob(short + "/ab-uts-test-*"); len(m) != 1 {
					t.Errorf("no master socket named by the shim's host name in %s", short)
				}
			}
		})
	}
}
