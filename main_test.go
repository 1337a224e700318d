package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

// TestShimSkipsDaemonInit checks that the binary, invoked as ssh, runs the
// shim before the daemon's heavy packages initialize (package shimentry).
// ANSIBLE_BRIDGE_DISABLE=1 makes the shim exec the real ssh, after the
// Go runtime has printed what it initialized.
func TestShimSkipsDaemonInit(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not on PATH")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ansible-bridge")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	inits := func(argv0 string, args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1", "ANSIBLE_BRIDGE_DISABLE=1", "ANSIBLE_BRIDGE_ARGV0="+argv0)
		out, _ := cmd.CombinedOutput() // the real ssh may be missing; the trace comes first
		return string(out)
	}
	heavy := []string{"golang.org/x/crypto/ssh", "github.com/hanwen/go-fuse/v2/fuse", "github.com/pkg/sftp",
		"github.com/ansible-bridge/ansible-bridge/bridge"}
	shim := inits("ssh", "-V")
	// sshconf (the keyword table) initializes before the shim runs.
	if !strings.Contains(shim, "init github.com/ansible-bridge/ansible-bridge/fakessh/sshconf ") {
		t.Fatalf("no init trace of fakessh/sshconf in:\n%s", shim)
	}
	cli := inits("ansible-bridge", "version")
	for _, pkg := range heavy {
		if strings.Contains(shim, "init "+pkg+" ") {
			t.Errorf("the shim initialized %s", pkg)
		}
		// Guards the test itself: the CLI does initialize them.
		if !strings.Contains(cli, "init "+pkg+" ") {
			t.Errorf("the CLI did not initialize %s; is the trace format still \"init PKG @...\"?", pkg)
		}
	}
}

// buildBinary builds ansible-bridge into a temp dir.
func buildBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not on PATH")
	}
	bin := filepath.Join(t.TempDir(), "ansible-bridge")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// fakeDaemonPy listens on argv[1] as whoever runs it, says "ready", and
// records the first bytes of every connection in argv[2] until a
// connection that starts with SENTINEL: the test's own last one, so that
// once it is recorded every earlier connection is too.
const fakeDaemonPy = `
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
s.listen(16)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    d = c.recv(65536)
    with open(sys.argv[2], "ab") as f:
        f.write(b"conn:" + d + b"\n")
    c.close()
    if d.startswith(b"SENTINEL"):
        break
`

// TestSquattedSocketGetsNothing plays a hostile local user who prepared
// the victim's socket path: a directory it owns (mode 0777) with a fake
// daemon listening, or a socket of its own moved into the victim's private
// directory. The shim must send nothing, not even its Hello with argv and
// environment, and run the real ssh instead.
func TestSquattedSocketGetsNothing(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the fake daemon as another user (nobody)")
	}
	// Not a pyenv shim: nobody may not read root's pyenv.
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	bin := buildBinary(t)
	base, err := os.MkdirTemp("", "ab-squat-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	realSSH := fakeRealSSH(t, base, `"$@"`)
	// The attacker's directory: its own, open to all.
	evil := filepath.Join(base, "evil")
	if err := os.Mkdir(evil, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(evil, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(evil, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// The victim's own private directory, for the moved socket.
	private := filepath.Join(base, "ansible-bridge-0")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		socket string // what the victim's shim dials
		reason string // why it falls back: in no output of the shim's
	}{
		{name: "squatted directory", socket: filepath.Join(evil, "bridge.sock"), reason: "owned by uid 65534"},
		{name: "foreign socket in our directory", socket: filepath.Join(private, "bridge.sock"), reason: "served by uid 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen := filepath.Join(evil, "listen.sock")
			got := filepath.Join(evil, "got")
			os.Remove(listen)
			os.Remove(got)
			fake := exec.Command(py, "-c", fakeDaemonPy, listen, got)
			fake.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
			fake.Stderr = os.Stderr
			out, err := fake.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := fake.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fake.Process.Kill(); fake.Wait() })
			if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("fake daemon: %q, %v", line, err)
			}
			if err := os.Rename(listen, tc.socket); err != nil {
				t.Fatal(err)
			}
			shim := exec.Command(bin, "-v", "-o", "User=pwuser", "-o", "PasswordAuthentication=yes", "127.0.0.1", "id")
			shim.Env = append(os.Environ(), "ANSIBLE_BRIDGE_ARGV0=ssh", "ANSIBLE_BRIDGE_SOCKET="+tc.socket,
				"ANSIBLE_BRIDGE_REAL_SSH="+realSSH, "SSHPASS=secret123")
			var stderr strings.Builder
			shim.Stderr = &stderr
			stdout, err := shim.Output()
			if err != nil {
				t.Fatalf("shim: %v (stdout %q, stderr %q)", err, stdout, stderr.String())
			}
			// Why it fell back is not ssh's to print, -v or not.
			if strings.Contains(stderr.String(), tc.reason) {
				t.Errorf("shim -v stderr %q says %q: stderr is the real ssh's", stderr.String(), tc.reason)
			}
			if !strings.HasPrefix(string(stdout), "REAL-SSH ") {
				t.Errorf("shim stdout %q, want the real ssh's", stdout)
			}
			// The sentinel goes through the same socket path, unchecked.
			c, err := net.Dial("unix", tc.socket)
			if err != nil {
				t.Fatal(err)
			}
			c.Write([]byte("SENTINEL"))
			c.Close()
			if err := fake.Wait(); err != nil {
				t.Fatalf("fake daemon: %v", err)
			}
			rec, err := os.ReadFile(got)
			if err != nil {
				t.Fatal(err)
			}
			for _, conn := range strings.Split(strings.TrimSuffix(string(rec), "\n"), "\n") {
				if conn != "conn:" && conn != "conn:SENTINEL" {
					t.Errorf("the fake daemon received %q", conn)
				}
			}
			os.Remove(tc.socket)
		})
	}
}

// TestDaemonLogNotThroughSymlink: a socket directory that is a symlink
// (planted by someone else) to an open directory whose log file is a
// symlink to a victim's file. The daemon must refuse before writing.
func TestDaemonLogNotThroughSymlink(t *testing.T) {
	bin := buildBinary(t)
	base := t.TempDir()
	victim := filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"daemon.log", "bridge.daemon.log"} {
		if err := os.Symlink(victim, filepath.Join(open, name)); err != nil {
			t.Fatal(err)
		}
	}
	sockDir := filepath.Join(base, "ansible-bridge-x")
	if err := os.Symlink(open, sockDir); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "daemon", "--socket", filepath.Join(sockDir, "bridge.sock"), "--detached", "--idle", "1ms")
	cmd.Env = append(os.Environ(), "ANSIBLE_BRIDGE_ARGV0=ansible-bridge", "ANSIBLE_BRIDGE_LOG=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("daemon on a symlinked socket dir succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "symlink") {
		t.Errorf("daemon output %q does not name the symlink", out)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("victim file now %q", b)
	}
}

// TestLeanShim: with ansible-bridge-shim next to ansible-bridge (as make
// build leaves them), `shims` links to the shim-only binary, which runs
// the shim and starts the daemon from ansible-bridge beside it.
func TestLeanShim(t *testing.T) {
	bin := buildBinary(t)
	lean := filepath.Join(filepath.Dir(bin), fakessh.ShimBinary)
	build := exec.Command("go", "build", "-o", lean, "./fakessh/cmd/ansible-bridge-shim")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	shims := filepath.Join(t.TempDir(), "shims")
	if out, err := exec.Command(bin, "shims", shims).CombinedOutput(); err != nil {
		t.Fatalf("shims: %v\n%s", err, out)
	}
	for _, name := range []string{"ssh", "scp", "sftp"} {
		if dest, err := os.Readlink(filepath.Join(shims, name)); err != nil || dest != lean {
			t.Errorf("%s -> %q (%v), want %s", name, dest, err, lean)
		}
	}
	sock := filepath.Join(t.TempDir(), "s", "bridge.sock")
	env := daemonEnv(t, bin, sock)
	// ssh -O check answers from the daemon, which the shim starts.
	check := exec.Command(filepath.Join(shims, "ssh"), "-O", "check", "-o", "ControlPath=/nonexistent/cp", "127.0.0.1")
	check.Env = env
	out, _ := check.CombinedOutput()
	status := exec.Command(bin, "status")
	status.Env = env
	if st, err := status.CombinedOutput(); err != nil {
		t.Fatalf("no daemon after the lean shim ran (ssh -O check said %q): %v\n%s", out, err, st)
	}
}

// TestOpenSocketDirNamed: with ANSIBLE_BRIDGE_SOCKET in a 0755 directory
// every shim runs the real ssh, and status and doctor say why, naming the
// directory and its mode, instead of only "no daemon".
func TestOpenSocketDirNamed(t *testing.T) {
	bin := buildBinary(t)
	base := t.TempDir()
	dir := filepath.Join(base, "sock")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	realSSH := fakeRealSSH(t, base, `"$@"`)
	env := append(os.Environ(), "ANSIBLE_BRIDGE_SOCKET="+filepath.Join(dir, "bridge.sock"), "ANSIBLE_BRIDGE_REAL_SSH="+realSSH)
	run := func(argv0 string, args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(env, "ANSIBLE_BRIDGE_ARGV0="+argv0)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s %v: %v", argv0, args, err)
		}
		return string(out), code
	}
	if out, code := run("ssh", "-o", "ControlMaster=auto", "127.0.0.1", "true"); code != 0 || !strings.HasPrefix(out, "REAL-SSH ") {
		t.Fatalf("shim: exit %d, %q; want the real ssh", code, out)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("the shim wrote into the open directory: %v %v", entries, err)
	}
	want := dir + " has mode 0755 (want 0700)"
	out, code := run("ansible-bridge", "status")
	if code == 0 || !strings.Contains(out, want) || !strings.Contains(out, "every shim runs the real binary") || !strings.Contains(out, "ansible-bridge doctor") {
		t.Errorf("status: exit %d, output:\n%s\nwant it to say %q, that every shim runs the real binary, and to point at doctor", code, out, want)
	}
	out, code = run("ansible-bridge", "doctor")
	if code != 1 || !strings.Contains(out, "FAIL socket directory: ") || !strings.Contains(out, want) || !strings.Contains(out, "fix: ") {
		t.Errorf("doctor: exit %d, output:\n%s\nwant FAIL socket directory with %q and a fix", code, out, want)
	}
}

// TestTopIntoPipe: top with stdout a pipe prints one plain screen and
// exits, without terminal codes (with the old loop, this never returns).
func TestTopIntoPipe(t *testing.T) {
	bin := buildBinary(t)
	sock := filepath.Join(t.TempDir(), "s", "bridge.sock")
	cmd := exec.Command(bin, "top", "--interval", "1h")
	cmd.Env = append(os.Environ(), "ANSIBLE_BRIDGE_SOCKET="+sock)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("top with no daemon: %v, want exit 1", err)
	}
	if strings.Count(string(out), "no daemon at "+sock) != 1 || strings.Contains(string(out), "\x1b[") {
		t.Errorf("top into a pipe wrote %q, want one plain screen", out)
	}
}

// TestHugeHelloFallsBack: argv and environment beyond what one frame to
// the daemon may carry (OpenSSH has no such limit) run the real ssh, with
// the reason in the shim log like any other fallback.
func TestHugeHelloFallsBack(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	realSSH := fakeRealSSH(t, dir, `"$1"`)
	sock := filepath.Join(dir, "s", "bridge.sock")
	env := daemonEnv(t, bin, sock)
	shim := exec.Command(bin, "-v", "127.0.0.1", "true")
	shim.Env = append(env, "ANSIBLE_BRIDGE_ARGV0=ssh", "ANSIBLE_BRIDGE_REAL_SSH="+realSSH)
	// One string may not pass 128 KiB (MAX_ARG_STRLEN): many of 100 KiB.
	for i := 0; i*100<<10 <= wire.MaxPayload; i++ {
		shim.Env = append(shim.Env, fmt.Sprintf("HUGE%d=%s", i, strings.Repeat("x", 100<<10)))
	}
	var stderr strings.Builder
	shim.Stderr = &stderr
	stdout, err := shim.Output()
	if err != nil || string(stdout) != "REAL-SSH -v\n" {
		t.Fatalf("shim: %v, stdout %q, stderr %q; want the real ssh's output", err, stdout, stderr.String())
	}
	const reason = "too large for the bridge"
	if strings.Contains(stderr.String(), reason) {
		t.Errorf("shim -v stderr %q says %q: stderr is the real ssh's", stderr.String(), reason)
	}
	log, err := os.ReadFile(filepath.Join(dir, "s", "bridge.shim.log"))
	if err != nil || !strings.Contains(string(log), reason) {
		t.Errorf("shim log %q (%v) does not record %q", log, err, reason)
	}
}

// TestStatusFallbacksSinceDaemon: status shows the fallbacks since the
// daemon started (those the daemon decided, in its own count, not again
// from the shim log), and not an earlier run's.
func TestStatusFallbacksSinceDaemon(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	realSSH := fakeRealSSH(t, dir, `"$1"`)
	sock := filepath.Join(dir, "s", "bridge.sock")
	if err := os.Mkdir(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	old := "2026-01-01T00:00:00Z fallback prog=ssh real=/usr/bin/ssh reason=\"daemon: no ControlPath: ssh connects on its own\" argc=3\n"
	if err := os.WriteFile(filepath.Join(dir, "s", "bridge.shim.log"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	env := daemonEnv(t, bin, sock)
	// The shim starts the daemon, which hands -v to the real ssh.
	shim := exec.Command(bin, "-v", "-F", "none", "127.0.0.1", "true")
	shim.Env = append(env, "ANSIBLE_BRIDGE_ARGV0=ssh", "ANSIBLE_BRIDGE_REAL_SSH="+realSSH)
	if out, err := shim.Output(); err != nil || string(out) != "REAL-SSH -v\n" {
		t.Fatalf("shim: %v, stdout %q; want the real ssh's", err, out)
	}
	status := exec.Command(bin, "status")
	status.Env = env
	out, err := status.CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "handed to the real binary by the daemon: 1× -v") || strings.Contains(string(out), "no ControlPath") ||
		strings.Contains(string(out), "ssh: daemon: -v") {
		t.Errorf("status:\n%s\nwant the -v fallback since the daemon started, once, in the daemon's words, not the earlier run's", out)
	}
}

// fakeRealSSH writes dir/real-ssh, a stand-in for the real ssh that
// prints REAL-SSH and args (a shell word: "$@" or "$1"), and returns its
// path.
func fakeRealSSH(t *testing.T, dir, args string) string {
	t.Helper()
	p := filepath.Join(dir, "real-ssh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho REAL-SSH "+args+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// daemonEnv is the environment of a daemon on sock that does not exit
// idle, stopped when t ends.
func daemonEnv(t *testing.T, bin, sock string) []string {
	env := append(os.Environ(), "ANSIBLE_BRIDGE_SOCKET="+sock, "ANSIBLE_BRIDGE_IDLE=0")
	t.Cleanup(func() {
		stop := exec.Command(bin, "stop")
		stop.Env = env
		stop.Run()
	})
	return env
}
