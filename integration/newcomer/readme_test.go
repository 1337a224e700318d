// Package newcomer runs the README's commands as a newcomer would, from a
// fresh clone of the repository, on a machine where things are in the way:
// the chosen port is taken, /etc/sudoers.d holds a file of mode 0644 (which
// sudo accepts), and, through lab.sh's AB_SUDOERS, a sudoers file that does
// not parse. Each failure must be clear and actionable and come before
// anything is created. It also installs with the README's `make install`
// and checks that `ansible-bridge env` finds working shims.
//
// It never touches the lab the rest of the suite uses: its lab settings
// (AB_LAB, AB_USER_PREFIX) name a lab of its own, which its checks fail
// before creating, and the broken sudoers file lives in a temp dir, never
// in /etc/sudoers.d. Like the other end-to-end tests it needs root and runs
// under `make test` (AB_LAB set); it skips otherwise.
package newcomer

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// prefix names the users and sudoers file of this test's lab (lab.sh's
// AB_USER_PREFIX): abrmtest, abrmpw, abrmnopy, /etc/sudoers.d/abrm-lab.
const prefix = "abrm"

type fixture struct {
	t     *testing.T
	clone string
	env   []string // the base environment for commands
}

func setup(t *testing.T) *fixture {
	t.Helper()
	switch {
	case os.Getuid() != 0:
		t.Skip("needs root (sudo, /etc/sudoers.d, users)")
	case os.Getenv("AB_LAB") == "":
		t.Skip("AB_LAB is not set: an end-to-end test, run by make test")
	}
	for _, tool := range []string{"git", "sudo", "visudo", "make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	clone := filepath.Join(base, "clone")
	if out, err := exec.Command("git", "clone", "-q", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	// Go's caches as the suite's own, so that the clone builds from them.
	var goenv []string
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		goenv = append(goenv, k+"="+strings.TrimSpace(string(out)))
	}
	env := append(os.Environ(), goenv...)
	env = append(env, "GOTOOLCHAIN=local")
	return &fixture{t: t, clone: clone, env: env}
}

// sh runs a README command line with bash in the clone and returns its
// combined output and exit status.
func (f *fixture) sh(line string, env ...string) (string, int) {
	f.t.Helper()
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = f.clone
	cmd.Env = append(append([]string(nil), f.env...), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		f.t.Fatalf("%s: %v", line, err)
	}
	f.t.Logf("$ %s  (exit %d)\n%s", line, code, out)
	return string(out), code
}

// readmeLine returns the README's command line that starts with start, as
// written, without its trailing comment.
func (f *fixture) readmeLine(start string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.clone, "README.md"))
	if err != nil {
		f.t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(strings.Trim(l, "`"))
		if strings.HasPrefix(l, start) {
			if i := strings.Index(l, "  #"); i >= 0 {
				l = l[:i]
			}
			return strings.TrimSpace(l)
		}
	}
	f.t.Fatalf("README has no command starting %q", start)
	return ""
}

// readmeExample returns the README's example demo command with a port
// setting, e.g. "sudo AB_PORT=2299 make demo", with its port.
func (f *fixture) readmeExample() (string, string) {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.clone, "README.md"))
	if err != nil {
		f.t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "`sudo AB_PORT=")
	if i < 0 {
		f.t.Fatal("README shows no `sudo AB_PORT=... make demo` example")
	}
	line, _, _ := strings.Cut(s[i+1:], "`")
	port := strings.TrimPrefix(strings.Fields(line)[1], "AB_PORT=")
	if _, err := strconv.Atoi(port); err != nil || !strings.HasSuffix(line, "make demo") {
		f.t.Fatalf("README's example %q is not `sudo AB_PORT=N make demo`", line)
	}
	return line, port
}

// labSettings are this test's own lab: nothing of it may exist after a
// failed check.
type labSettings struct {
	dir, port string
}

func (l labSettings) sudoArgs() string {
	return "AB_LAB=" + l.dir + " AB_USER_PREFIX=" + prefix
}

// assertNothingCreated checks that lab.sh created nothing: no state
// directory, no chroot, no users, no sudoers file.
func assertNothingCreated(t *testing.T, l labSettings) {
	t.Helper()
	for _, p := range []string{l.dir, "/srv/ab-lab-nopy-" + l.port, "/etc/sudoers.d/" + prefix + "-lab"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created before the failed check", p)
		}
	}
	for _, u := range []string{"test", "pw", "nopy"} {
		if exec.Command("id", "-u", prefix+u).Run() == nil {
			t.Errorf("user %s was created before the failed check", prefix+u)
		}
	}
}

// cleanupLab removes what a broken lab.sh would have made despite the
// checks, so that a failing run leaves nothing behind.
func cleanupLab(t *testing.T, f *fixture, l labSettings) {
	t.Cleanup(func() {
		for _, u := range []string{"test", "pw", "nopy"} {
			if exec.Command("id", "-u", prefix+u).Run() == nil {
				_ = exec.Command("userdel", "-r", prefix+u).Run()
			}
		}
		os.Remove("/etc/sudoers.d/" + prefix + "-lab")
		os.RemoveAll("/srv/ab-lab-nopy-" + l.port)
		os.RemoveAll(l.dir)
	})
}

// takenPort listens on a loopback port until the test ends.
func takenPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// sudoersNote puts a valid file of mode 0644 into /etc/sudoers.d, which sudo
// accepts and visudo -c may complain about, and checks that sudo still
// works with it.
func sudoersNote(t *testing.T) string {
	t.Helper()
	path := "/etc/sudoers.d/ab-readme-test-" + strconv.Itoa(os.Getpid())
	const text = "# ansible-bridge integration/newcomer test: a 0644 file sudo accepts; safe to delete\n"
	tmp := filepath.Join(t.TempDir(), "note")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("visudo", "-c", "-q", "-f", tmp).CombinedOutput(); err != nil {
		t.Fatalf("visudo rejects the test's sudoers file: %v\n%s", err, out)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sudo", "-n", "true").CombinedOutput(); err != nil {
		t.Fatalf("sudo fails with a 0644 file in /etc/sudoers.d: %v\n%s", err, out)
	}
	return path
}

// TestReadmeTryIt runs the README's "Try it" commands with the port taken
// and a 0644 file in /etc/sudoers.d, then with a sudoers file that does not
// parse.
func TestReadmeTryIt(t *testing.T) {
	f := setup(t)
	demoCmd := f.readmeLine("sudo make demo")
	example, examplePort := f.readmeExample()
	if !strings.Contains(string(must(os.ReadFile(filepath.Join(f.clone, "README.md")))), "AB_LAB") {
		t.Error("README does not name AB_LAB")
	}
	note := sudoersNote(t)

	// make demo installs what it needs first: a stand-in for setup.sh
	// that records its run and fails stops the demo right there.
	standIn := filepath.Join(t.TempDir(), "setup-stand-in")
	ran := standIn + ".ran"
	if err := os.WriteFile(standIn, []byte("#!/bin/sh\ntouch "+ran+"\necho 'setup.sh: installing: stand-in'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, code := f.sh(demoCmd + " SETUP=" + standIn); code == 0 || !strings.Contains(out, "installing: stand-in") || strings.Contains(out, "created user") {
		t.Errorf("%s with setup failing: exit %d; want it to stop after setup", demoCmd, code)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("%s did not run setup first: %v", demoCmd, err)
	}
	// With the packages present (CI's make test installed them), the real
	// setup changes nothing and says so.
	if out, code := f.sh("scripts/setup.sh"); code != 0 || !strings.Contains(out, "all packages present") {
		t.Errorf("scripts/setup.sh with every package present: exit %d", code)
	}

	t.Run("port taken", func(t *testing.T) {
		l := labSettings{dir: filepath.Join(t.TempDir(), "lab"), port: takenPort(t)}
		cleanupLab(t, f, l)
		// The README's example with the taken port, and this test's lab.
		line := strings.Replace(example, "sudo AB_PORT="+examplePort, "sudo "+l.sudoArgs()+" AB_PORT="+l.port, 1)
		out, code := f.sh(line)
		if code == 0 {
			t.Fatalf("%s succeeded with 127.0.0.1:%s taken", line, l.port)
		}
		if !strings.Contains(out, "127.0.0.1:"+l.port+" is taken") || !strings.Contains(out, "set AB_PORT") {
			t.Errorf("the failure does not name 127.0.0.1:%s and AB_PORT:\n%s", l.port, out)
		}
		// The 0644 file is accepted: at most a note that names it.
		if strings.Contains(out, "does not parse") {
			t.Errorf("a 0644 file in /etc/sudoers.d failed the run:\n%s", out)
		}
		if strings.Contains(out, "bad permissions") && !strings.Contains(out, note) {
			t.Errorf("the note on file modes does not name %s:\n%s", note, out)
		}
		// Neither the lab nor the demo's build started.
		if strings.Contains(out, "building ansible-bridge") || strings.Contains(out, "created user") {
			t.Errorf("the demo went on after the failed check:\n%s", out)
		}
		assertNothingCreated(t, l)
	})

	t.Run("sudoers does not parse", func(t *testing.T) {
		dir := t.TempDir()
		incl := filepath.Join(dir, "sudoers.d")
		broken := filepath.Join(incl, "zz-broken-by-test")
		main := filepath.Join(dir, "sudoers")
		if err := os.Mkdir(incl, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(incl, "ok-0644"), []byte("# fine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(broken, []byte("Defaults this is not sudoers\n"), 0o440); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(main, []byte("root ALL=(ALL:ALL) ALL\n@includedir "+incl+"\n"), 0o440); err != nil {
			t.Fatal(err)
		}
		l := labSettings{dir: filepath.Join(t.TempDir(), "lab"), port: takenPort(t)}
		cleanupLab(t, f, l)
		// README's `sudo make demo`, with this test's lab and its sudoers.
		line := strings.Replace(demoCmd, "sudo ", "sudo AB_SUDOERS="+main+" "+l.sudoArgs()+" AB_PORT="+l.port+" ", 1)
		out, code := f.sh(line)
		if code == 0 {
			t.Fatalf("%s succeeded with %s", line, broken)
		}
		if !strings.Contains(out, "does not parse ("+broken+")") || !strings.Contains(out, "syntax error") || !strings.Contains(out, "fix or remove") {
			t.Errorf("the failure does not name %s, the reason and the fix:\n%s", broken, out)
		}
		// The sudoers check comes first: the taken port is not reached.
		if strings.Contains(out, "is taken") {
			t.Errorf("the port was checked before sudo's configuration:\n%s", out)
		}
		assertNothingCreated(t, l)
	})
}

// TestReadmeInstall runs the README's install commands with HOME in a temp
// dir (so ~/.local is there) and checks the shims it installs work.
func TestReadmeInstall(t *testing.T) {
	f := setup(t)
	install := f.readmeLine("make install PREFIX=")
	envLine := f.readmeLine(`eval "$(`)
	home := t.TempDir()
	sock := filepath.Join(t.TempDir(), "s", "bridge.sock")
	env := []string{"HOME=" + home, "XDG_DATA_HOME=", "ANSIBLE_BRIDGE_SOCKET=" + sock, "ANSIBLE_BRIDGE_IDLE=0"}
	if _, code := f.sh(install, env...); code != 0 {
		t.Fatalf("%s: exit %d", install, code)
	}
	bin := filepath.Join(home, ".local", "bin", "ansible-bridge")
	shims := filepath.Join(home, ".local", "share", "ansible-bridge", "bin")
	t.Cleanup(func() {
		cmd := exec.Command(bin, "stop")
		cmd.Env = append(os.Environ(), "ANSIBLE_BRIDGE_SOCKET="+sock)
		_ = cmd.Run()
	})

	// version: make build's version, the clone's revision, the Go version.
	head, err := exec.Command("git", "-C", f.clone, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	out, code := f.sh(bin+" version", env...)
	if code != 0 || !strings.Contains(out, "revision "+strings.TrimSpace(string(head))) || !strings.Contains(out, "go "+runtime.Version()) ||
		!strings.Contains(out, "module github.com/ansible-bridge/ansible-bridge") {
		t.Errorf("version: exit %d, %q; want the module, revision %s and %s", code, out, head, runtime.Version())
	}

	// The README's env line, then what a shell would find.
	out, code = f.sh(envLine+` && command -v ssh scp sftp && echo "pipelining=$ANSIBLE_PIPELINING"`, env...)
	want := strings.Join([]string{filepath.Join(shims, "ssh"), filepath.Join(shims, "scp"), filepath.Join(shims, "sftp"), "pipelining=True"}, "\n") + "\n"
	if code != 0 || out != want {
		t.Errorf("after %s: exit %d\n%s\nwant\n%s", envLine, code, out, want)
	}

	// The shims work: ssh through the bridge to the suite's lab, as a
	// ControlPath's master (as Ansible runs it; without one the real ssh
	// would run), whose connection status then shows; doctor finds the
	// shims first on PATH.
	key, user, port := os.Getenv("AB_KEY"), os.Getenv("AB_USER"), os.Getenv("AB_PORT")
	if key == "" || user == "" || port == "" {
		t.Skip("AB_KEY, AB_USER, AB_PORT not set (scripts/lab.sh env)")
	}
	mux := "-o ControlMaster=auto -o ControlPersist=60 -o ControlPath=" + filepath.Join(t.TempDir(), "cm-%C")
	out, code = f.sh(envLine+` && ssh `+mux+` -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes -i `+key+
		` -p `+port+` `+user+`@127.0.0.1 echo through-the-bridge && ansible-bridge status && ansible-bridge doctor`, env...)
	for _, w := range []string{"through-the-bridge\n", user + "@127.0.0.1:" + port, "ok   ssh shim: " + filepath.Join(shims, "ssh"), "ok   scp shim", "ok   sftp shim"} {
		if !strings.Contains(out, w) {
			t.Errorf("%q not in the output (exit %d)", w, code)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
