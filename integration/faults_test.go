package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	abridge "github.com/ansible-bridge/ansible-bridge/bridge"
	"github.com/ansible-bridge/ansible-bridge/integration/relay"
)

// The fault tests: what must keep holding when the daemon, the target's
// sshd or the network fail under a run (issue 11). Each test uses a daemon
// of its own (privateDaemon), so that killing it or loading it disturbs no
// other test, and every wait is for a condition, bounded by a deadline.

// privateDaemon is a socket of its own: the first shim that uses it starts
// a daemon there, as for a user.
type privateDaemon struct {
	socket, log string
}

// newPrivateDaemon returns a fresh socket path in a private directory; the
// daemon started there is stopped when t ends.
func newPrivateDaemon(t *testing.T) *privateDaemon {
	t.Helper()
	dir, err := os.MkdirTemp(suite.work, "pd-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sock"), 0o700); err != nil {
		t.Fatal(err)
	}
	d := &privateDaemon{socket: filepath.Join(dir, "sock", "bridge.sock"), log: filepath.Join(dir, "daemon.log")}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, suite.bin, "stop")
		cmd.Env = append(cleanEnv(os.Environ()), d.env()...)
		_ = cmd.Run()
		if t.Failed() {
			b, _ := os.ReadFile(d.log)
			t.Logf("private daemon log %s:\n%s", d.log, tail(string(b), 60))
		}
	})
	return d
}

func (d *privateDaemon) env() []string {
	return []string{"ANSIBLE_BRIDGE_SOCKET=" + d.socket, "ANSIBLE_BRIDGE_LOG=" + d.log}
}

// status asks the daemon for its state; ok is false when none answers.
func (d *privateDaemon) status(t *testing.T) (st abridge.Status, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.bin, "status", "--json")
	cmd.Env = append(cleanEnv(os.Environ()), d.env()...)
	out, err := cmd.Output()
	if err != nil {
		return st, false
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st, st.PID > 0
}

// mustStatus is status, failing t when no daemon answers.
func (d *privateDaemon) mustStatus(t *testing.T) abridge.Status {
	t.Helper()
	st, ok := d.status(t)
	if !ok {
		t.Fatalf("no daemon answers on %s", d.socket)
	}
	return st
}

// waitFor polls cond (a condition, not a duration) until it holds or
// limit passes; it fails t with what on timeout.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// hookDir is a directory the target's users and the test share: a task
// touches a file there and waits for the test to touch another.
func hookDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ab-hook-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// procSample is what a process holds: resident memory, open files, threads.
type procSample struct {
	RSSKiB, FDs, Threads int
}

func (p procSample) String() string {
	return fmt.Sprintf("RSS %.1f MiB, %d fds, %d threads", float64(p.RSSKiB)/1024, p.FDs, p.Threads)
}

func sampleProc(t *testing.T, pid int) procSample {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	var s procSample
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.Atoi(f[0])
		switch k {
		case "VmRSS":
			s.RSSKiB = n
		case "Threads":
			s.Threads = n
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	s.FDs = len(fds)
	return s
}

// descendants returns the pids of every process below pid.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// labSSHDPid is the pid of the lab's listening sshd.
func labSSHDPid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(suite.lab.Dir, "sshd.pid"))
	if err != nil {
		t.Fatalf("lab sshd pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("lab sshd pid %q: %v", b, err)
	}
	return pid
}

// loopItems returns the per-item results of a loop task.
func loopItems(t *testing.T, r *runResult, host, task string) []map[string]any {
	t.Helper()
	e := r.event(t, host, task)
	raw, _ := e.Result["results"].([]any)
	var out []map[string]any
	for _, x := range raw {
		m, _ := x.(map[string]any)
		out = append(out, m)
	}
	return out
}

func itemStatus(m map[string]any) string {
	switch {
	case m["unreachable"] == true:
		return "unreachable"
	case m["failed"] == true:
		return "failed"
	}
	return "ok"
}

// TestDaemonKilledMidRun: kill -9 of the daemon while a loop item runs
// costs that item (UNREACHABLE or failed) and nothing else: the next items
// run on a fresh daemon the shims start, and the host stays in the play.
func TestDaemonKilledMidRun(t *testing.T) {
	requireLab(t)
	for _, m := range []mode{{true, "sftp"}, {false, "scp"}} {
		t.Run(m.String(), func(t *testing.T) {
			requireBridge(t)
			d := newPrivateDaemon(t)
			hook := hookDir(t)
			const items, hold = 12, 5
			done := make(chan *runResult, 1)
			go func() {
				// runPlaybook's Fatal paths would end this goroutine only:
				// the test below notices the missing result.
				defer close(done)
				done <- runPlaybook(t, runSpec{
					Playbook: "faults-kill.yml", Mode: m, Side: bridge,
					HostVars: map[string]map[string]any{"t": {"hook_dir": hook, "items": items, "hold_item": hold}},
					Env:      d.env(),
				})
			}()
			waitFor(t, 2*time.Minute, "item "+strconv.Itoa(hold)+" to start", func() bool { return exists(filepath.Join(hook, "started")) })
			st := d.mustStatus(t)
			if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed daemon %d while item %d ran", st.PID, hold)
			var orphans []int // the killed daemon's interpreters on the target
			for _, ts := range st.Targets {
				for _, in := range ts.Interpreters {
					orphans = append(orphans, in.PID)
				}
			}
			touch(t, filepath.Join(hook, "release"))
			r := <-done
			if r == nil {
				t.Fatal("the run failed to complete (see above)")
			}
			got := loopItems(t, r, "t", "loop")
			if len(got) != items {
				t.Fatalf("%d loop results, want %d", len(got), items)
			}
			bad := 0
			for i, res := range got {
				s := itemStatus(res)
				if s != "ok" {
					bad++
					t.Logf("item %d: %s: %v", i+1, s, res["msg"])
				}
				switch {
				case i+1 == hold:
				case s != "ok":
					t.Errorf("item %d: %s, want ok (only item %d was in flight): %s", i+1, s, hold, short(res))
				case res["stdout"] != fmt.Sprintf("item %d", i+1):
					t.Errorf("item %d: stdout %q", i+1, res["stdout"])
				}
			}
			if bad > 1 {
				t.Errorf("%d items lost to one daemon kill, want at most 1", bad)
			}
			wantTask(t, r, "t", "after", "ok", "after")
			st2 := d.mustStatus(t)
			if st2.PID == st.PID {
				t.Errorf("daemon pid %d unchanged after kill -9", st.PID)
			}
			t.Logf("items after the kill ran on daemon %d; recap %v", st2.PID, r.Doc.Stats["t"])
			// Its connection gone, sshd ends the killed daemon's
			// interpreters: nothing of it stays on the target.
			for _, pid := range orphans {
				waitFor(t, 30*time.Second, fmt.Sprintf("interpreter %d of the killed daemon to exit", pid), func() bool {
					return syscall.Kill(pid, 0) != nil
				})
			}
		})
	}
}

// holderSession returns the lab sshd's child (the per-connection monitor)
// whose subtree runs the process with marker in its command line.
func holderSession(t *testing.T, marker string) int {
	t.Helper()
	sshd := labSSHDPid(t)
	for _, pid := range descendants(sshd) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(b), marker) {
			continue
		}
		for p := pid; p > 1; {
			pp := parentPid(p)
			if pp == sshd {
				return p
			}
			p = pp
		}
	}
	return 0
}

func parentPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(f[1])
	return pp
}

// killTree sends SIGKILL to pid and everything below it.
func killTree(pid int) {
	all := append([]int{pid}, descendants(pid)...)
	for _, p := range all {
		_ = syscall.Kill(p, syscall.SIGSTOP) // none may fork meanwhile
	}
	for _, p := range all {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// restartLabSSHD kills the lab's sshd with every session it serves, as a
// crashed or rebooted target would, and starts it again as lab.sh does.
func restartLabSSHD(t *testing.T) {
	t.Helper()
	pid := labSSHDPid(t)
	killTree(pid)
	addr := "127.0.0.1:" + suite.lab.Port
	waitFor(t, 30*time.Second, "the lab sshd to stop listening", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	// As lab.sh starts it (sshd rewrites its own command line).
	lab := suite.lab.Dir
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-f", filepath.Join(lab, "sshd_config"), "-E", filepath.Join(lab, "sshd.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("restart sshd: %v", err)
	}
	go cmd.Wait() //nolint:errcheck // reaped if it exits while the test runs
	waitFor(t, 30*time.Second, "the restarted sshd's banner", func() bool {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		b := make([]byte, 8)
		n, _ := io.ReadFull(c, b)
		return n == 8 && string(b) == "SSH-2.0-"
	})
	t.Logf("restarted the lab sshd (was pid %d, now %d)", pid, cmd.Process.Pid)
}

// TestSSHDFaults: a killed sshd session (kill -9 of the per-connection
// sshd while a task runs) and a restarted sshd (between tasks, every
// session killed with it) give the same results as with stock ssh: the
// task in flight UNREACHABLE with a message of the same class, the next
// tasks ok on a new connection.
func TestSSHDFaults(t *testing.T) {
	requireLab(t)
	tests := []struct {
		name string
		mode mode
		on   string // where "held" runs
	}{
		{"session-killed", mode{true, "sftp"}, "t"},
		{"session-killed", mode{false, "scp"}, "t"},
		{"sshd-restarted", mode{true, "sftp"}, "localhost"},
	}
	for _, tc := range tests {
		t.Run(tc.name+"/"+tc.mode.String(), func(t *testing.T) {
			requireBridge(t)
			d := newPrivateDaemon(t)
			runs := map[side]*runResult{}
			// One hook directory for both runs: its name is in the results.
			hook := hookDir(t)
			for _, sd := range []side{stock, bridgeSide()} {
				for _, f := range []string{"started", "release"} {
					if err := os.Remove(filepath.Join(hook, f)); err != nil && !os.IsNotExist(err) {
						t.Fatal(err)
					}
				}
				done := make(chan *runResult, 1)
				go func() {
					defer close(done)
					done <- runPlaybook(t, runSpec{
						Playbook: "faults-sshd.yml", Mode: tc.mode, Side: sd,
						HostVars: map[string]map[string]any{"t": {"hook_dir": hook, "held_on": tc.on}},
						Env:      d.env(),
					})
				}()
				waitFor(t, 2*time.Minute, "task held to start", func() bool { return exists(filepath.Join(hook, "started")) })
				if tc.on == "t" {
					var sess int
					waitFor(t, 30*time.Second, "the sshd session running task held", func() bool {
						sess = holderSession(t, hook)
						return sess != 0
					})
					killTree(sess)
					t.Logf("%s run: killed sshd session %d", sd, sess)
				} else {
					restartLabSSHD(t)
				}
				touch(t, filepath.Join(hook, "release"))
				r := <-done
				if r == nil {
					t.Fatal("the run failed to complete (see above)")
				}
				if e := r.event(t, "t", "held"); e.Status == "unreachable" {
					t.Logf("%s run: held: %v", sd, e.Result["msg"])
				}
				wantTask(t, r, "t", "after", "ok", "after")
				runs[sd] = r
			}
			compareRuns(t, runs[bridgeSide()], runs[stock])
		})
	}
}

// sshCmd is ssh (stock: the real binary; bridge: the shim) to the lab's
// user through port, with ssh_config and known hosts out of the way.
func sshCmd(ctx context.Context, sd side, d *privateDaemon, port int, opts []string, command string) *exec.Cmd {
	bin := suite.realSSH
	path := suite.basePATH
	if sd == bridge {
		bin = filepath.Join(suite.shims, "ssh")
		path = suite.shims + string(os.PathListSeparator) + suite.basePATH
	}
	args := []string{"-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-i", suite.lab.Key, "-p", strconv.Itoa(port)}
	args = append(args, opts...)
	args = append(args, suite.lab.User+"@127.0.0.1", command)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(cleanEnv(os.Environ()), "PATH="+path, "HOME="+suite.home, "LANG=C.UTF-8")
	cmd.Env = append(cmd.Env, d.env()...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// sshMessage is ssh's stderr without the known-hosts notice and line-end
// noise: what Ansible would put in an UNREACHABLE message.
func sshMessage(stderr string) string {
	var keep []string
	for _, l := range strings.Split(strings.ReplaceAll(stderr, "\r", ""), "\n") {
		if l == "" || strings.HasPrefix(l, "Warning: Permanently added") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// TestStalledNetwork: a link that goes silent (the relay's Stall) under a
// session with ServerAliveInterval, or under a new connection with
// ConnectTimeout, ends the bridge's ssh as it ends OpenSSH's: exit 255 and
// the same message, once the timeouts expire; without them, a stall that
// ends is survived by both.
func TestStalledNetwork(t *testing.T) {
	requireLab(t)
	target := net.JoinHostPort("127.0.0.1", suite.lab.Port)
	startStallRelay := func(t *testing.T) *relay.Relay {
		r, err := relay.Start(context.Background(), "127.0.0.1:0", target, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	type outcome struct {
		code int
		msg  string
	}
	run := func(t *testing.T, sd side, d *privateDaemon, r *relay.Relay, opts []string, stallAfterUp, resume bool) outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := sshCmd(ctx, sd, d, r.Port(), opts, "echo up; exec cat")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out := bufio.NewReader(stdout)
		if stallAfterUp {
			if l, err := out.ReadString('\n'); l != "up\n" {
				t.Fatalf("%s: first line %q, %v; stderr %q", sd, l, err, stderr.String())
			}
			r.Stall(true)
		}
		if resume {
			if _, err := io.WriteString(stdin, "ping\n"); err != nil {
				t.Fatal(err)
			}
			r.Stall(false)
			if l, err := out.ReadString('\n'); l != "ping\n" {
				t.Fatalf("%s: after the stall: %q, %v; stderr %q", sd, l, err, stderr.String())
			}
			stdin.Close()
		}
		_, _ = io.Copy(io.Discard, out)
		err = cmd.Wait()
		if ctx.Err() != nil {
			t.Fatalf("%s: ssh %v still running after %v", sd, opts, 2*time.Minute)
		}
		o := outcome{code: cmd.ProcessState.ExitCode(), msg: sshMessage(stderr.String())}
		t.Logf("%s: exit %d after %v: %q", sd, o.code, time.Since(start).Round(10*time.Millisecond), o.msg)
		return o
	}
	tests := []struct {
		name         string
		opts         []string
		stallAfterUp bool // else stalled before connecting
		resume       bool
		wantCode     int
		wantMsg      string // a substring; stock must show it too
	}{
		{"ServerAlive", []string{"-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=2"}, true, false, 255, "Timeout, server 127.0.0.1 not responding."},
		{"ConnectTimeout", []string{"-o", "ConnectTimeout=2"}, false, false, 255, "timed out"},
		{"no timeouts, stall ends", nil, true, true, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requireBridge(t)
			d := newPrivateDaemon(t)
			got := map[side]outcome{}
			for _, sd := range []side{stock, bridgeSide()} {
				r := startStallRelay(t)
				if !tc.stallAfterUp {
					r.Stall(true)
				}
				got[sd] = run(t, sd, d, r, tc.opts, tc.stallAfterUp, tc.resume)
				r.Close()
				if got[sd].code != tc.wantCode || !strings.Contains(got[sd].msg, tc.wantMsg) {
					t.Errorf("%s: exit %d, %q; want exit %d and %q", sd, got[sd].code, got[sd].msg, tc.wantCode, tc.wantMsg)
				}
			}
			if g, w := got[bridgeSide()], got[stock]; g.code != w.code || normalizePort(g.msg) != normalizePort(w.msg) {
				t.Errorf("bridge: exit %d, %q\n stock: exit %d, %q", g.code, g.msg, w.code, w.msg)
			}
		})
	}
}

var portNumber = regexp.MustCompile(`port \d+`)

// normalizePort hides the relay's port: each side has a relay of its own.
func normalizePort(s string) string { return portNumber.ReplaceAllString(s, "port N") }
