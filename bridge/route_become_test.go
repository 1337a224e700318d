package bridge

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

// fakeSudo is a sudo that becomes nobody new: it takes -p PROMPT (printed
// on stderr, as sudo -S does, before it reads a password that must be
// "secret") and -n (fail: a password is required), drops its other
// options and runs the command, so that the tests need no sudoers rule.
// It counts its runs in the file "runs" next to it.
const fakeSudo = `#!/bin/sh
echo run >> "$(dirname "$0")/runs"
prompt= n=
while [ "$1" != /bin/sh ]; do
	case "$1" in
	-p) prompt=$2; shift ;;
	-n) n=1 ;;
	esac
	shift
done
if [ -n "$prompt" ]; then
	if [ -n "$n" ]; then echo "sudo: a password is required" >&2; exit 1; fi
	printf '%s' "$prompt" >&2
	IFS= read -r pw
	if [ "$pw" != secret ]; then echo "Sorry, try again." >&2; exit 1; fi
fi
exec "$@"
`

// becomeID is the become ID of the tests' wrappers.
const becomeID = "abcdefghijklmnopqrstuvwxyzabcdef"

// sudoPrompt is the -p prompt Ansible's sudo plugin sets with a password.
const sudoPrompt = "[sudo via ansible, key=" + becomeID + "] password:"

// writeFakeSudo installs fakeSudo and returns its path.
func writeFakeSudo(t *testing.T) string {
	t.Helper()
	sudo := filepath.Join(t.TempDir(), "sudo")
	if err := os.WriteFile(sudo, []byte(fakeSudo), 0o755); err != nil {
		t.Fatal(err)
	}
	return sudo
}

// sudoRuns is how many times the fake sudo ran.
func sudoRuns(t *testing.T, sudo string) int {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(sudo), "runs"))
	return strings.Count(string(b), "run\n")
}

// sudoCmd is the remote command of a sudo step as Ansible writes it:
// flags, then inner (a python, with the script if any).
func sudoCmd(sudo, flags, inner string) string {
	return `/bin/sh -c '` + sudo + ` ` + flags + ` -u root /bin/sh -c '"'"'echo BECOME-SUCCESS-` + becomeID + ` ; ` + inner + `'"'"' && sleep 0'`
}

// exchange is one step of a dialog: once after appears in the output
// (stdout and stderr, from where the previous step matched), send goes to
// the daemon as stdin.
type exchange struct{ after, send string }

// holdStdin, last in a dialog, keeps stdin open until the exit, as
// Ansible does while it waits for a tool that has its password.
var holdStdin = exchange{after: "\x00never printed"}

// runDialog plays the shim's side of an invocation whose stdin answers
// what the daemon prints, as Ansible answers a become prompt, and ends
// stdin after the last step.
func (h *harness) runDialog(prog string, argv []string, steps ...exchange) result {
	h.t.Helper()
	c, err := net.Dial("unix", h.sock)
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	hello := shimHello(prog, argv, h.t.TempDir(), []string{"HOME=" + h.t.TempDir(), "USER=tester", "TERM=xterm", "LANG=C.UTF-8", "PATH=" + h.path})
	if err := wire.Write(c, wire.Hello, hello); err != nil {
		h.t.Fatal(err)
	}
	sends := make(chan string, len(steps))
	go func() {
		for s := range sends {
			if s != "" {
				_ = wire.Write(c, wire.Stdin, []byte(s))
			}
		}
		_ = wire.Write(c, wire.StdinEOF, nil)
	}()
	var out, errb, both bytes.Buffer
	accepted, from, closed := false, 0, false
	closeSends := func() {
		if !closed {
			closed = true
			close(sends)
		}
	}
	defer closeSends()
	for {
		f, err := wire.Read(c)
		if err != nil {
			h.t.Fatalf("read: %v (stderr so far %q)", err, errb.String())
		}
		switch f.Type {
		case wire.Accept:
			accepted = true
		case wire.Stdout:
			out.Write(f.Payload)
			both.Write(f.Payload)
		case wire.Stderr:
			errb.Write(f.Payload)
			both.Write(f.Payload)
		case wire.Fallback:
			return result{fallback: string(f.Payload)}
		case wire.Exit:
			code, _ := wire.ExitCode(f.Payload)
			return result{stdout: out.String(), stderr: errb.String(), code: code}
		}
		for accepted && len(steps) > 0 {
			i := bytes.Index(both.Bytes()[from:], []byte(steps[0].after))
			if i < 0 {
				break
			}
			from += i + len(steps[0].after)
			sends <- steps[0].send
			steps = steps[1:]
		}
		if accepted && len(steps) == 0 {
			closeSends()
		}
	}
}

// TestBecomePassword drives the become route with a password, as
// Ansible's sudo plugin does with ansible_become_password: the first step
// relays the tool's prompt and the password typed; later steps are
// answered by the bridge, which checks the password itself; a wrong one
// goes to the tool, whose refusal is the answer, and so does a step
// with -n once a password was needed.
func TestBecomePassword(t *testing.T) {
	wrapper := pingWrapper(t)
	sudo := writeFakeSudo(t)
	py := targetPython(t)
	h := newHarness(t, 0)
	var collected atomic.Int32
	h.srv.collect = func() { collected.Add(1) }
	cmd := sudoCmd(sudo, `-H -S -p "`+sudoPrompt+`"`, py)
	marker := "BECOME-SUCCESS-" + becomeID
	for i := 1; i <= 2; i++ {
		r := h.runDialog("ssh", h.sshArgs("127.0.0.1", cmd), exchange{sudoPrompt, "secret\n"}, exchange{marker, wrapper})
		if r.code != 0 || !strings.HasPrefix(r.stdout, marker+"\n") || !strings.Contains(r.stdout, pong) || r.stderr != sudoPrompt {
			t.Fatalf("become step %d: %+v", i, r)
		}
		if n := h.routes()["become"]; n != i {
			t.Fatalf("step %d: routes %v, want become=%d", i, h.routes(), i)
		}
	}
	if n := sudoRuns(t, sudo); n != 1 {
		t.Errorf("sudo ran %d times, want once", n)
	}

	// A wrong password: the real tool answers.
	r := h.runDialog("ssh", h.sshArgs("127.0.0.1", cmd), exchange{sudoPrompt, "wrong\n"}, holdStdin)
	if r.code != 1 || !strings.Contains(r.stderr, "Sorry, try again.") || strings.Contains(r.stdout, marker) {
		t.Fatalf("wrong password: %+v", r)
	}
	// -n where a password was needed: the tool says so.
	r = h.runDialog("ssh", h.sshArgs("127.0.0.1", sudoCmd(sudo, `-H -S -n -p "`+sudoPrompt+`"`, py)), holdStdin)
	if r.code != 1 || !strings.Contains(r.stderr, "a password is required") {
		t.Fatalf("-n step: %+v", r)
	}
	if n := sudoRuns(t, sudo); n != 3 {
		t.Errorf("sudo ran %d times, want 3", n)
	}
	// Passwords reach neither the log nor the journal.
	for _, e := range h.logs.AllEntries() {
		if s, _ := e.String(); strings.Contains(s, "secret") {
			t.Errorf("password logged: %s", s)
		}
	}
	// What the steps that typed it dropped is collected (and so
	// overwritten) two ticks later, while the connection stays open.
	for deadline := time.Now().Add(5 * time.Second); collected.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no garbage collection after the steps that typed a password")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	if !h.srv.targets.connected() {
		t.Error("the connection closed: the test wants it open")
	}
}

// TestBecomeNotModule: a become step whose stdin is python but no module
// wrapper runs in the become user's interpreter all the same; a held
// wrapper run by path (no pipelining) is noted as run by the become user,
// as the debug view shows it.
func TestBecomeNotModule(t *testing.T) {
	wrapper := pingWrapper(t)
	sudo := writeFakeSudo(t)
	py := targetPython(t)
	h := newHarness(t, 0)
	marker := "BECOME-SUCCESS-" + becomeID
	r := h.runDialog("ssh", h.sshArgs("127.0.0.1", sudoCmd(sudo, "-H -S -n", py)), exchange{marker, "print('plain ' + 'python')\n"})
	if r.code != 0 || r.stdout != marker+"\nplain python\n" {
		t.Fatalf("plain python: %+v", r)
	}
	if n := h.routes()["become"]; n != 1 {
		t.Fatalf("routes %v, want become=1", h.routes())
	}

	base := filepath.Join(t.TempDir(), ".ansible", "tmp")
	ssh := func(cmd string, extra ...string) result {
		t.Helper()
		return h.run("ssh", h.sshArgs(append(extra, "127.0.0.1", cmd)...), "")
	}
	if r := ssh(ansibleMkdir(base, "ansible-tmp-1")); r.code != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	held := base + "/ansible-tmp-1"
	local := filepath.Join(t.TempDir(), "AnsiballZ_ping.py")
	if err := os.WriteFile(local, []byte(wrapper), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "put "+local+" "+held+"/AnsiballZ_ping.py\n"); r.code != 0 {
		t.Fatalf("put: %+v", r)
	}
	// Without -tt, as the first step: the test server gives no terminal
	// for the interpreter one would start.
	r = ssh(sudoCmd(sudo, "-H -S -n", py+" "+held+"/AnsiballZ_ping.py"))
	if r.code != 0 || !strings.HasPrefix(r.stdout, marker+"\n") || !strings.Contains(r.stdout, pong) {
		t.Fatalf("held wrapper: %+v", r)
	}
	if n := h.routes()["become"]; n != 2 {
		t.Fatalf("routes %v, want become=2", h.routes())
	}
	// The debug view lists the dir under the become user too.
	src := mountSource{h.srv}
	targets := src.Targets()
	if len(targets) != 2 || !strings.HasSuffix(targets[1].Name, becomeSep+"root") {
		t.Fatalf("debug view targets %+v", targets)
	}
	dirs := src.TempDirs(targets[1].Name)
	if len(dirs) != 1 || dirs[0].Path != held || len(dirs[0].Files) != 1 {
		t.Fatalf("debug view temp dirs %+v", dirs)
	}
	if n := sudoRuns(t, sudo); n != 1 {
		t.Errorf("sudo ran %d times, want once", n)
	}
}

// TestSetfaclRunsOnTarget: Ansible's setfacl for an unprivileged become
// user is a permission step whose outcome depends on the target: it runs
// there, after the held temp dir it names is written, and its status is
// what the same command gives on the files it left (127 where setfacl is
// not installed, as on the lab).
func TestSetfaclRunsOnTarget(t *testing.T) {
	h := newHarness(t, 0)
	base := filepath.Join(t.TempDir(), ".ansible", "tmp")
	ssh := func(cmd string) result {
		t.Helper()
		return h.run("ssh", h.sshArgs("127.0.0.1", cmd), "")
	}
	if r := ssh(ansibleMkdir(base, "ansible-tmp-1")); r.code != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	held := base + "/ansible-tmp-1"
	local := filepath.Join(t.TempDir(), "AnsiballZ_ping.py")
	if err := os.WriteFile(local, []byte(pingWrapper(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "put "+local+" "+held+"/AnsiballZ_ping.py\n"); r.code != 0 {
		t.Fatalf("put: %+v", r)
	}
	facl := `setfacl -m u:nobody:r-x ` + held + `/ ` + held + `/AnsiballZ_ping.py`
	r := ssh(`/bin/sh -c '` + facl + ` && sleep 0'`)
	if _, err := os.Stat(held + "/AnsiballZ_ping.py"); err != nil {
		t.Fatalf("the held dir was not written to the target before setfacl: %v", err)
	}
	want := 0
	if err := exec.Command("/bin/sh", "-c", facl+" 2>/dev/null").Run(); err != nil {
		want = err.(*exec.ExitError).ExitCode()
	}
	if r.code != want {
		t.Fatalf("setfacl: %+v, want exit %d", r, want)
	}
	if n := h.routes()["exec"]; n != 2 {
		t.Fatalf("routes %v, want exec=2 (the first mkdir makes the base, setfacl)", h.routes())
	}
}
