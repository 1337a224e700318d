package bridge

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRealSSHJoinsTheMaster: a real ssh given the daemon master's
// ControlPath multiplexes over the daemon's connection (ControlMaster no:
// it cannot log in itself), as over an ssh -M master.
func TestRealSSHJoinsTheMaster(t *testing.T) {
	realSSH, err := exec.LookPath("/usr/bin/ssh")
	if err != nil {
		t.Skip("no OpenSSH client")
	}
	h := newHarness(t, 0)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("the master: %+v", r)
	}
	if st, err := os.Lstat(h.cp); err != nil || st.Mode()&fs.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("no 0600 control socket at the ControlPath: %v", err)
	}
	// run runs the real ssh with opts, then the host and command.
	run := func(stdin string, opts []string, command ...string) (string, string, int) {
		t.Helper()
		args := append([]string{"-F", "none", "-o", "ControlMaster=no", "-o", "ControlPath=" + h.cp, "-o", "BatchMode=yes", "-p", h.port}, opts...)
		cmd := exec.Command(realSSH, append(append(args, "tester@127.0.0.1"), command...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), code
	}
	for _, tc := range []struct {
		name, stdin    string
		opts           []string
		command        string
		stdout, stderr string
		code           int
	}{
		{"status and streams", "", nil, "echo out; echo err >&2; exit 3", "out\n", "err\n", 3},
		{"stdin to its end", "a\nb\n", nil, "cat; echo end", "a\nb\nend\n", "", 0},
		{"-n", "unread", []string{"-n"}, "cat; echo end", "end\n", "", 0},
		{"-O check", "", []string{"-O", "check"}, "", "", fmt.Sprintf("Master running (pid=%d)\r\n", os.Getpid()), 0},
	} {
		var command []string
		if tc.command != "" {
			command = []string{tc.command}
		}
		stdout, stderr, code := run(tc.stdin, tc.opts, command...)
		if stdout != tc.stdout || stderr != tc.stderr || code != tc.code {
			t.Errorf("%s: got %q %q %d, want %q %q %d", tc.name, stdout, stderr, code, tc.stdout, tc.stderr, tc.code)
		}
	}
	if n := h.ts.conns.Load(); n != 1 {
		t.Errorf("%d logins, want the master's only", n)
	}
	if st := h.srv.Status(); len(st.Targets) != 1 || st.Targets[0].Routes[routeMux] != 3 {
		t.Errorf("status: %+v, want 3 mux sessions counted", st.Targets)
	}
	if _, stderr, code := run("", []string{"-O", "exit"}); code != 0 || stderr != "Exit request sent.\r\n" {
		t.Errorf("-O exit: %q %d", stderr, code)
	}
	// The master exits after its answer, as ssh's does.
	waitFor(t, "the control socket to go with its master", func() bool {
		_, err := os.Lstat(h.cp)
		return err != nil
	})
}

// TestRealSSHMasterGone: the connection ends while a real ssh's request
// waits on the daemon's master (a -W forward's channel open, a remote
// forward's global request). ssh's master exits with it unanswered: its
// client reads EOF, and -W says "read from master failed" (and exits 0),
// -O forward that the request failed. The daemon once answered them as
// refusals.
func TestRealSSHMasterGone(t *testing.T) {
	realSSH, err := exec.LookPath("/usr/bin/ssh")
	if err != nil {
		t.Skip("no OpenSSH client")
	}
	for _, tc := range []struct {
		name   string
		opts   []string
		stderr string
		code   int
	}{
		{"-W", []string{"-W", "127.0.0.1:1"}, "mux_client_request_stdio_fwd: read from master failed: Broken pipe\r\n", 0},
		{"-O forward -R", []string{"-O", "forward", "-R", "127.0.0.1:0:127.0.0.1:1"}, "muxclient: master forward request failed\r\n", 255},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 0)
			if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
				t.Fatalf("the master: %+v", r)
			}
			h.ts.hang.Store(true)
			args := append([]string{"-F", "none", "-o", "ControlMaster=no", "-o", "ControlPath=" + h.cp, "-o", "BatchMode=yes", "-p", h.port}, tc.opts...)
			cmd := exec.Command(realSSH, append(args, "tester@127.0.0.1")...)
			var stderr bytes.Buffer
			cmd.Stdin, cmd.Stderr = strings.NewReader(""), &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the request to reach the server", func() bool { return h.ts.held.Load() > 0 })
			h.ts.hang.Store(false)
			h.ts.dropAll()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("ssh hangs on the dropped connection")
			}
			if got := cmd.ProcessState.ExitCode(); stderr.String() != tc.stderr || got != tc.code {
				t.Errorf("got %q %d, want %q %d", stderr.String(), got, tc.stderr, tc.code)
			}
		})
	}
}

// TestServedTerminalEscapes: a served -tt session is a mux client's, so
// its master's escape filter applies, as ssh's master applies it.
func TestServedTerminalEscapes(t *testing.T) {
	h := newHarness(t, 0)
	closed := "Shared connection to 127.0.0.1 closed.\r\n"
	r := h.run("ssh", h.sshArgs("-tt", "127.0.0.1", "wc -c"), "x\n~~y\n~?")
	if r.code != 0 || r.stdout != "5\n" || !strings.Contains(r.stderr, "~?\r\nSupported escape sequences:\r\n ~.   - terminate session\r\n") || !strings.HasSuffix(r.stderr, closed) {
		t.Errorf("~~ and ~?: %+v", r)
	}
	r = h.run("ssh", h.sshArgs("-tt", "127.0.0.1", "cat >/dev/null; echo never"), "~.")
	if r.code != 255 || r.stdout != "" || r.stderr != closed {
		t.Errorf("~.: %+v", r)
	}
	r = h.run("ssh", h.sshArgs("-tt", "-e", "none", "127.0.0.1", "wc -c"), "~.\n")
	if r.code != 0 || r.stdout != "3\n" || r.stderr != closed {
		t.Errorf("-e none: %+v", r)
	}
	// Without a terminal there is no filter.
	r = h.run("ssh", h.sshArgs("127.0.0.1", "wc -c"), "~.\n")
	if r.code != 0 || r.stdout != "3\n" {
		t.Errorf("no terminal: %+v", r)
	}
}

// TestControlMasterYesControl: `ssh -M -O cmd` asks no master; with no
// master and ControlPersist it logs in, becomes one and asks itself;
// beside a live master it is the real ssh's (a login of its own). The
// requests sent are not said with -q.
func TestControlMasterYesControl(t *testing.T) {
	h := newHarness(t, 0)
	yes := func(args ...string) []string { return withOption(h.sshArgs(args...), "ControlMaster", "yes") }
	r := h.run("ssh", yes("-O", "check", "127.0.0.1"), "")
	if r.code != 0 || r.stderr != fmt.Sprintf("Master running (pid=%d)\r\n", os.Getpid()) || h.ts.conns.Load() != 1 {
		t.Fatalf("-M -O check with no master: %+v, %d logins", r, h.ts.conns.Load())
	}
	if _, err := os.Lstat(h.cp); err != nil {
		t.Errorf("the new master has no control socket: %v", err)
	}
	if r := h.run("ssh", yes("-O", "check", "127.0.0.1"), ""); r.fallback == "" {
		t.Errorf("-M -O check beside a master: %+v, want the real ssh's", r)
	}
	if r := h.run("ssh", h.sshArgs("-q", "-O", "exit", "127.0.0.1"), ""); r.code != 0 || r.stderr != "" {
		t.Errorf("-q -O exit: %+v", r)
	}
	r = h.run("ssh", withOption(yes("-O", "check", "127.0.0.1"), "ControlPersist", "no"), "")
	if r.fallback == "" {
		t.Errorf("-M -O check without ControlPersist: %+v, want the real ssh's (it runs a login shell)", r)
	}
}

// TestMasterProcess: with ControlPersist each master has a process of its
// own, a child of the daemon's titled as ssh's, whose pid `-O check`
// names; killed with a signal ssh catches it ends its master only and
// the socket goes, with one it does not (SIGKILL) the socket stays,
// refusing; after `-O exit` it is gone.
func TestMasterProcess(t *testing.T) {
	h := newHarnessConfig(t, 0, Config{MasterStub: buildFront(t)})
	other := filepath.Join(filepath.Dir(h.cp), "other")
	check := func(cp string) (int, result) {
		r := h.run("ssh", h.sshArgsAt(cp, "-O", "check", "127.0.0.1"), "")
		var pid int
		if _, err := fmt.Sscanf(r.stderr, "Master running (pid=%d)", &pid); err != nil {
			return 0, r
		}
		return pid, r
	}
	up := func(cp string) int {
		t.Helper()
		if r := h.run("ssh", h.sshArgsAt(cp, "127.0.0.1", "true"), ""); r.code != 0 {
			t.Fatalf("master at %s: %+v", cp, r)
		}
		pid, r := check(cp)
		if pid == 0 {
			t.Fatalf("-O check at %s: %+v", cp, r)
		}
		return pid
	}
	pid, otherPID := up(h.cp), up(other)
	if pid == os.Getpid() || otherPID == os.Getpid() || pid == otherPID {
		t.Fatalf("masters' pids %d and %d, the daemon's %d: want one each, not the daemon's", pid, otherPID, os.Getpid())
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if !strings.Contains(string(status), fmt.Sprintf("\nPPid:\t%d\n", os.Getpid())) {
		t.Errorf("the master's process is not the daemon's child:\n%s", status)
	}
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); string(cmdline) != "ssh: "+h.cp+" [mux]\x00" {
		t.Errorf("cmdline %q", cmdline)
	}

	_ = syscall.Kill(pid, syscall.SIGTERM)
	waitFor(t, "the killed master's socket to go", func() bool { _, err := os.Lstat(h.cp); return err != nil })
	if _, r := check(h.cp); r.code != 255 || r.stderr != "Control socket connect("+h.cp+"): No such file or directory\r\n" {
		t.Errorf("-O check after kill -TERM: %+v", r)
	}
	if p, r := check(other); p != otherPID {
		t.Errorf("the other master after killing one: %+v", r)
	}

	pid = up(h.cp)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, "the killed master's connection to close", func() bool {
		t := h.srv.targets.lookup(h.cp)
		return t == nil || !t.hasLive()
	})
	if _, r := check(h.cp); r.code != 255 || r.stderr != "Control socket connect("+h.cp+"): Connection refused\r\n" {
		t.Errorf("-O check after kill -KILL: %+v", r)
	}
	_ = os.Remove(h.cp)

	pid = up(h.cp)
	if r := h.run("ssh", h.sshArgs("-O", "exit", "127.0.0.1"), ""); r.code != 0 {
		t.Fatalf("-O exit: %+v", r)
	}
	waitFor(t, "the master's process to go after -O exit", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return err != nil
	})
	if p, r := check(other); p != otherPID {
		t.Errorf("the other master after -O exit of one: %+v", r)
	}
}
