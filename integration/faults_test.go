package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"github.com/ansible-bridge/ansible-bridge/integration/procstat"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	abridge "github.com/ansible-bridge/ansible-bridge/bridge"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"github.com/ansible-bridge/ansible-bridge/integration/relay"
	"golang.org/x/sys/unix"
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

// goRunPlaybook runs runPlaybook in the background; the channel yields its
// result, or closes without one if it failed t. Should t end first, the
// run is let go (hook/release) and waited for.
func goRunPlaybook(t *testing.T, hook string, spec runSpec) <-chan *runResult {
	t.Helper()
	done := make(chan *runResult, 1)
	finished := make(chan struct{})
	go func() {
		// runPlaybook's Fatal paths end this goroutine only: the
		// channel closes without a result.
		defer close(finished)
		defer close(done)
		done <- runPlaybook(t, spec)
	}()
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(hook, "release"), nil, 0o666)
		<-finished
	})
	return done
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

// sampleProc reads what a process holds: resident memory, open files,
// threads.
func sampleProc(t *testing.T, pid int) procstat.Sample {
	t.Helper()
	s, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return s
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
			done := goRunPlaybook(t, hook, runSpec{
				Playbook: "faults-kill.yml", Mode: m, Side: bridge,
				HostVars: map[string]map[string]any{"t": {"hook_dir": hook, "items": items, "hold_item": hold}},
				Env:      d.env(),
			})
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
	for _, pid := range procstat.Descendants(sshd) {
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
	all := append([]int{pid}, procstat.Descendants(pid)...)
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
				done := goRunPlaybook(t, hook, runSpec{
					Playbook: "faults-sshd.yml", Mode: tc.mode, Side: sd,
					HostVars: map[string]map[string]any{"t": {"hook_dir": hook, "held_on": tc.on}},
					Env:      d.env(),
				})
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
		_ = cmd.Wait() // the exit status is in ProcessState
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
				// ssh as Ansible runs it, the master of its ControlPath:
				// the daemon serves it.
				mux := append([]string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + filepath.Join(t.TempDir(), "cp")}, tc.opts...)
				got[sd] = run(t, sd, d, r, mux, tc.stallAfterUp, tc.resume)
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

// TestTCPKeepAliveLikeOpenSSH: the TCP connection to the target has the
// keepalive timer ssh gives its own: the kernel's (two hours before the
// first probe) with TCPKeepAlive yes, none with no. Go's 15-second probes
// ended a connection whose link went silent for two and a half minutes,
// which ssh's outlives.
func TestTCPKeepAliveLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	d := newPrivateDaemon(t)
	target := net.JoinHostPort("127.0.0.1", suite.lab.Port)
	// timer is the keepalive timer of the connection to port, as ss shows
	// it: "keepalive" and its minutes left, or "" for none.
	timer := func(t *testing.T, sd side, opts []string) string {
		r, err := relay.Start(context.Background(), "127.0.0.1:0", target, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		mux := append([]string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + filepath.Join(t.TempDir(), "cp")}, opts...)
		cmd := sshCmd(ctx, sd, d, r.Port(), mux, "echo up; exec cat")
		stdin := startHeld(t, cmd, "up\n")
		defer func() {
			stdin.Close()
			_ = cmd.Wait()
		}()
		out, err := exec.Command("ss", "-tnoH", "state", "established", "dst", fmt.Sprintf("127.0.0.1:%d", r.Port())).Output()
		if err != nil {
			t.Fatalf("ss: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 1 {
			t.Fatalf("%s: %d connections to the relay: %q", sd, len(lines), out)
		}
		m := regexp.MustCompile(`timer:\((keepalive),(\d+)min`).FindStringSubmatch(lines[0])
		if m == nil {
			if strings.Contains(lines[0], "keepalive") {
				return "keepalive under a minute: " + lines[0]
			}
			return ""
		}
		return m[1] + " " + m[2] + "min"
	}
	for _, tc := range []struct {
		name string
		opts []string
		want string // a prefix
	}{
		{"default", nil, "keepalive 1"}, // 100 minutes and more
		{"TCPKeepAlive=no", []string{"-o", "TCPKeepAlive=no"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[side]string{}
			for _, sd := range []side{stock, bridgeSide()} {
				got[sd] = timer(t, sd, tc.opts)
				if !strings.HasPrefix(got[sd], tc.want) || (tc.want == "" && got[sd] != "") {
					t.Errorf("%s: keepalive timer %q, want %q", sd, got[sd], tc.want)
				}
			}
			t.Logf("stock %q, bridge %q", got[stock], got[bridgeSide()])
		})
	}
}

var portNumber = regexp.MustCompile(`port \d+`)

// normalizePort hides the relay's port: each side has a relay of its own.
func normalizePort(s string) string { return portNumber.ReplaceAllString(s, "port N") }

// TestFleet: 50 hosts (the lab's sshd at 127.0.0.2–51, a counting relay on
// each) with forks=50 through one daemon: every host ok, exactly one TCP
// connection per host, and once the connections have closed the daemon's
// fds and threads are back near where they started. Its memory is logged.
func TestFleet(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	const hosts = 50
	d := newPrivateDaemon(t)
	st := d.startDetached(t)
	before := sampleProc(t, st.PID)
	idle := d.mustStatus(t).Memory

	vars := map[string]map[string]any{}
	relays := map[string]*relay.Relay{}
	for i := 0; i < hosts; i++ {
		addr := fmt.Sprintf("127.0.0.%d", i+2)
		r, err := relay.Start(context.Background(), addr+":0", net.JoinHostPort("127.0.0.1", suite.lab.Port), 0)
		if err != nil {
			t.Fatalf("relay on %s: %v", addr, err)
		}
		t.Cleanup(func() { r.Close() })
		name := fmt.Sprintf("fleet%02d", i+2)
		relays[name] = r
		vars[name] = map[string]any{
			"ansible_host": addr, "ansible_port": r.Port(), "ansible_user": suite.lab.User,
			"ansible_ssh_private_key_file": suite.lab.Key, "ansible_python_interpreter": "/usr/bin/python3",
		}
	}
	stopWatch := watchPeak(t, st.PID)
	res := runPlaybook(t, runSpec{
		Playbook: "faults-fleet.yml", Mode: mode{true, "sftp"}, Side: bridge, HostVars: vars,
		Env: append(d.env(), "ANSIBLE_FORKS="+strconv.Itoa(hosts)),
	})
	peak := stopWatch()
	wantExit(t, res, 0)
	for name, r := range relays {
		wantStats(t, res, name, map[string]int{"ok": 4, "failures": 0, "unreachable": 0})
		wantTask(t, res, name, "command", "ok", name)
		wantTask(t, res, name, "become", "ok", "root")
		if n := r.Stats().Connections; n != 1 {
			t.Errorf("%s: %d TCP connections, want 1", name, n)
		}
	}
	// The daemon returns its freed memory twice once its last connection
	// has closed (Server.expireIdle): what it holds after that stays.
	var mem abridge.MemoryStatus
	waitFor(t, time.Minute, "every connection to close and the daemon to return its memory", func() bool {
		s := d.mustStatus(t)
		for _, ts := range s.Targets {
			if ts.Connections > 0 {
				return false
			}
		}
		mem = s.Memory
		return mem.Returned >= idle.Returned+2
	})
	after := sampleProc(t, st.PID)
	t.Logf("daemon %d: at start %v, Go %v; at the peak %v; connections closed %v, Go %v",
		st.PID, before, goMemory(idle), peak, after, goMemory(mem))
	// Loose bounds: the runtime keeps some threads it made under load, and
	// logs stay open; a leak per host would be 50 or more.
	if after.FDs > before.FDs+5 {
		t.Errorf("daemon fds: %d at start, %d once the connections closed", before.FDs, after.FDs)
	}
	if after.Threads > before.Threads+10 {
		t.Errorf("daemon threads: %d at start, %d once the connections closed", before.Threads, after.Threads)
	}
	// What a connected target costs the daemon at the peak, each with a
	// task in flight (2026-12-03: 0.58 MiB and 3.1 fds): the TCP
	// connection, its ControlPath's listener and master, the shim's socket.
	if per := float64(peak.RSSKiB-before.RSSKiB) / hosts; per > 1024 {
		t.Errorf("daemon RSS at the peak: %.0f KiB per connected target, want at most 1 MiB", per)
	}
	if per := float64(peak.FDs-before.FDs) / hosts; per > 4 {
		t.Errorf("daemon fds at the peak: %.1f per connected target, want at most 4", per)
	}
	// Nothing per target stays once its connection has closed (2026-12-03:
	// the Go heap 1.3 -> 1.6 MiB), and the memory the run took goes back
	// to the system (RSS +29 MiB at the peak, +5.3 MiB kept: the runtime's
	// bookkeeping for the peak, docs/limits.md).
	if grew := float64(mem.HeapLive) - float64(idle.HeapLive); grew > hosts*32<<10 {
		t.Errorf("daemon's Go heap: %.1f MiB at start, %.1f MiB once the connections closed: more than 32 KiB a target stayed",
			mib(idle.HeapLive), mib(mem.HeapLive))
	}
	if mem.ZipsCached != 0 {
		t.Errorf("daemon holds %d decoded module zips once the connections closed, want none", mem.ZipsCached)
	}
	if kept, took := after.RSSKiB-before.RSSKiB, peak.RSSKiB-before.RSSKiB; kept > took/3 {
		t.Errorf("daemon RSS: %d KiB more at the peak, %d KiB still more once the connections closed: want at most a third kept", took, kept)
	}
	if s := d.mustStatus(t); s.PID != st.PID {
		t.Errorf("daemon pid %d became %d", st.PID, s.PID)
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// goMemory is the Go runtime's account of the daemon's memory, in MiB.
func goMemory(m abridge.MemoryStatus) string {
	return fmt.Sprintf("heap %.1f live, %.1f in spans, %.1f free; stacks %.1f; runtime %.1f",
		mib(m.HeapLive), mib(m.HeapInUse), mib(m.HeapFree), mib(m.Stacks), mib(m.Runtime))
}

// watchPeak samples pid's RSS and fds every 100 ms until the returned
// function is called, which returns the highest of each (a sampler, not
// a wait: the peak of a run in progress has no event to wait for).
func watchPeak(t *testing.T, pid int) (stop func() procstat.Sample) {
	t.Helper()
	var (
		peak = sampleProc(t, pid)
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			s, err := procstat.Read(pid)
			if err != nil {
				continue // the test reports a daemon that died
			}
			peak.RSSKiB, peak.AnonKiB = max(peak.RSSKiB, s.RSSKiB), max(peak.AnonKiB, s.AnonKiB)
			peak.FDs, peak.Threads = max(peak.FDs, s.FDs), max(peak.Threads, s.Threads)
		}
	}()
	return func() procstat.Sample {
		close(done)
		wg.Wait()
		return peak
	}
}

// runAll runs specs at once: like runPlaybook, but nothing is reset (each
// spec names its own output directories) and ansible-playbook processes
// run in parallel. Files are not collected.
func runAll(t *testing.T, specs []runSpec) []*runResult {
	t.Helper()
	type prepared struct {
		cmd                      *exec.Cmd
		dir, stdout, stderr, res string
	}
	var ps []prepared
	for _, spec := range specs {
		dir := filepath.Join(suite.work, "r", strconv.FormatInt(runSeq.Add(1), 10))
		cp := filepath.Join(dir, "cp")
		if err := os.MkdirAll(cp, 0o700); err != nil {
			t.Fatal(err)
		}
		p := prepared{dir: dir, stdout: filepath.Join(dir, "stdout"), stderr: filepath.Join(dir, "stderr"), res: filepath.Join(dir, "result.json")}
		inv := writeInventory(t, dir, spec.HostVars)
		pathEnv := suite.basePATH
		if spec.Side == bridge {
			pathEnv = suite.shims + string(os.PathListSeparator) + suite.basePATH
		}
		env := append(cleanEnv(os.Environ()),
			"PATH="+pathEnv, "HOME="+suite.home, "LANG=C.UTF-8",
			"ANSIBLE_CONFIG="+filepath.Join(suite.work, "ansible.cfg"),
			"ANSIBLE_CALLBACK_PLUGINS="+filepath.Join(suite.corpus, "plugins", "callback"),
			"ANSIBLE_STDOUT_CALLBACK=abjson", "ANSIBLE_LOAD_CALLBACK_PLUGINS=1",
			"AB_RESULT_FILE="+p.res, "ANSIBLE_HOST_KEY_CHECKING=False", "ANSIBLE_RETRY_FILES_ENABLED=False",
			"ANSIBLE_NOCOLOR=1", "ANSIBLE_SSH_CONTROL_PATH_DIR="+cp,
			"ANSIBLE_PIPELINING="+strconv.FormatBool(spec.Mode.Pipelining),
			"ANSIBLE_SSH_TRANSFER_METHOD="+spec.Mode.Transfer)
		env = append(bridgeEnv(env), spec.Env...)
		cmd := exec.Command("ansible-playbook", "-i", inv, filepath.Join(suite.corpus, spec.Playbook))
		cmd.Dir, cmd.Env = dir, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Stdout, cmd.Stderr = createFile(t, p.stdout), createFile(t, p.stderr)
		p.cmd = cmd
		ps = append(ps, p)
	}
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			timer := time.AfterFunc(runTimeout, func() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) })
			defer timer.Stop()
			errs[i] = p.cmd.Wait()
		}()
	}
	wg.Wait()
	var out []*runResult
	for i, p := range ps {
		p.cmd.Stdout.(*os.File).Close()
		p.cmd.Stderr.(*os.File).Close()
		r := &runResult{Spec: specs[i], Dir: p.dir, ExitCode: p.cmd.ProcessState.ExitCode()}
		noteRunOnFailure(t, r)
		r.Stdout, r.Stderr = readString(t, p.stdout), readString(t, p.stderr)
		r.Masters = stopMasters(t, filepath.Join(p.dir, "cp"))
		raw, err := os.ReadFile(p.res)
		if err != nil {
			t.Fatalf("%s run %d (%v) wrote no results: %v\nstdout:\n%s\nstderr:\n%s", r.Spec.Side, i, errs[i], err, r.Stdout, r.Stderr)
		}
		if err := json.Unmarshal(raw, &r.Doc); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s run %d: exit %d (%s)", r.Spec.Side, i, r.ExitCode, p.dir)
		out = append(out, r)
	}
	return out
}

// TestConcurrentRuns: three ansible-playbook runs at once through one
// daemon (each with its own files, all overlapping) each give what three
// concurrent stock runs give.
func TestConcurrentRuns(t *testing.T) {
	requireLab(t)
	tests := []struct {
		mode      mode
		transfers bool
	}{
		// Each transfer setting once, modes crossed (CI's time).
		{mode{true, "sftp"}, false},
		{mode{false, "scp"}, true},
	}
	for _, tc := range tests {
		m := tc.mode
		t.Run(fmt.Sprintf("%s/transfers=%t", m, tc.transfers), func(t *testing.T) {
			requireBridge(t)
			d := newPrivateDaemon(t)
			hook := hookDir(t)
			results := map[side][]*runResult{}
			tmpGlob := filepath.Join(filepath.Dir(suite.targetOut[suite.lab.User]), ".ansible", "tmp", "ansible-tmp-*")
			for _, sd := range []side{stock, bridgeSide()} {
				resetOutputs(t)
				// Left by earlier tests (a killed daemon's, as stock's).
				tmps, _ := filepath.Glob(tmpGlob)
				for _, d := range tmps {
					os.RemoveAll(d)
				}
				entries, _ := os.ReadDir(hook)
				for _, e := range entries {
					os.Remove(filepath.Join(hook, e.Name()))
				}
				var specs []runSpec
				for i := 1; i <= 3; i++ {
					specs = append(specs, runSpec{
						Playbook: "faults-concurrent.yml", Mode: m, Side: sd, Env: d.env(),
						HostVars: map[string]map[string]any{"t": {
							"run_id": i, "hook_dir": hook, "transfers": tc.transfers,
							"out_dir": filepath.Join(suite.targetOut[suite.lab.User], fmt.Sprintf("run%d", i)),
						}},
					})
				}
				results[sd] = runAll(t, specs)
				// Every run removed its temp dirs, as stock's rm does: none
				// reached the target after its rm (another run's module
				// writing it).
				tmps, _ = filepath.Glob(tmpGlob)
				if len(tmps) > 0 {
					t.Errorf("%s: temp dirs left on the target: %q", sd, tmps)
				}
				for i, r := range results[sd] {
					wantExit(t, r, 0)
					wantStats(t, r, "t", map[string]int{"failures": 0, "ignored": 1, "unreachable": 0})
					wantTask(t, r, "t", "command", "ok", fmt.Sprintf("run %d", i+1))
					if !tc.transfers {
						continue
					}
					st := wantTask(t, r, "t", "stat", "ok", "")
					if s, _ := st["stat"].(map[string]any); s == nil || s["checksum"] != suite.bigSHA {
						t.Errorf("%s run %d: big.bin on the target: %v, want sha256 %s", sd, i+1, st["stat"], suite.bigSHA)
					}
				}
			}
			for i := range results[stock] {
				compareRuns(t, results[bridgeSide()][i], results[stock][i])
			}
		})
	}
}

// largeFile writes size pseudo-random bytes (the same every run) and
// returns the path and its sha256.
func largeFile(t *testing.T, size int) (string, string) {
	t.Helper()
	p := filepath.Join(suite.data, fmt.Sprintf("large-%d.bin", size))
	b := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{1, 2, 3}).Read(b)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
	return p, fmt.Sprintf("%x", sha256.Sum256(b))
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return "missing: " + err.Error()
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestLargeCopy: a 64 MiB file (AB_LARGE_MB) copied to the target and fetched back
// through the bridge is intact both ways; and a daemon killed while the
// file is on its way (during the upload, or during the module run that
// writes it out) never leaves a partial destination: it is absent or
// whole, and the next run completes the copy.
func TestLargeCopy(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	size := 64 << 20
	// AB_LARGE_MB=300 runs it at the size the trust issue's check used.
	if mb, err := strconv.Atoi(os.Getenv("AB_LARGE_MB")); err == nil && mb > 0 {
		size = mb << 20
	}
	src, want := largeFile(t, size)
	target := filepath.Join(suite.targetOut[suite.lab.User], "large.bin")
	local := filepath.Join(suite.local, "large.bin")
	vars := map[string]map[string]any{"t": {"large_src": src}}
	for _, m := range []mode{{true, "sftp"}, {false, "scp"}} {
		t.Run("copy and fetch/"+m.String(), func(t *testing.T) {
			d := newPrivateDaemon(t)
			r := runPlaybook(t, runSpec{Playbook: "faults-large.yml", Mode: m, Side: bridge, HostVars: vars, Env: d.env()})
			wantExit(t, r, 0)
			if got := fileSHA(t, target); got != want {
				t.Errorf("on the target: sha256 %s, want %s", got, want)
			}
			if got := fileSHA(t, local); got != want {
				t.Errorf("fetched: sha256 %s, want %s", got, want)
			}
		})
	}
	// Killed while the shim uploads (route sftp), or while the module
	// that writes the file out runs.
	for _, during := range []string{"sftp", "module"} {
		t.Run("daemon killed during "+during, func(t *testing.T) {
			// Without pipelining the copy task runs the stat module (the
			// target's second module run, after the file task's), uploads
			// the file by sftp, uploads AnsiballZ_copy.py, then runs the
			// copy module (the third), which writes the file out. Kill at
			// an sftp in flight after two modules (the file, or the
			// wrapper just after it), or at the third module in flight.
			// A poll can miss a short window: up to 3 runs.
			modulesBefore := map[string]int{"sftp": 2, "module": 3}[during]
			var killed int
			var finished *runResult
			for attempt := 1; attempt <= 3 && killed == 0; attempt++ {
				d := newPrivateDaemon(t)
				hook := hookDir(t)
				done := goRunPlaybook(t, hook, runSpec{
					Playbook: "faults-large.yml", Mode: mode{false, "sftp"}, Side: bridge, Env: d.env(),
					HostVars: map[string]map[string]any{"t": {"large_src": src, "skip_fetch": true}},
				})
				func() {
					deadline := time.Now().Add(2 * time.Minute)
					for time.Now().Before(deadline) {
						select {
						case finished = <-done:
							return
						default:
						}
						st, ok := d.status(t)
						if !ok || len(st.Targets) == 0 {
							continue
						}
						modules := st.Targets[0].Routes["module"]
						for _, iv := range st.InFlight {
							if (iv.Prog == during || iv.Route == during) && modules >= modulesBefore {
								if err := syscall.Kill(st.PID, syscall.SIGKILL); err == nil {
									killed = st.PID
									t.Logf("killed daemon %d during %s invocation %d (%s) %q", st.PID, during, iv.ID, iv.Route, iv.Command)
								}
								return
							}
						}
						time.Sleep(5 * time.Millisecond) // polling a condition
					}
				}()
				if finished == nil {
					finished = <-done
				}
				if finished == nil {
					t.Fatal("the run failed to complete (see above)")
				}
				if killed == 0 {
					t.Logf("run %d: the copy ended before the test saw it in flight (%s); exit %d", attempt, during, finished.ExitCode)
				}
			}
			if killed == 0 {
				t.Fatalf("in 3 runs the test never saw the copy in flight (%s)", during)
			}
			d := newPrivateDaemon(t)
			t.Logf("copy: %s", finished.event(t, "t", "copy").Status)
			entries, _ := os.ReadDir(filepath.Dir(target))
			for _, e := range entries {
				t.Logf("left in %s: %s", filepath.Dir(target), e.Name())
			}
			if got := fileSHA(t, target); !strings.HasPrefix(got, "missing") && got != want {
				t.Errorf("partial destination after the kill: sha256 %s, want %s or no file", got, want)
			}
			// The next run, on a fresh daemon, completes the copy. (Not
			// through runPlaybook: it would clear the directory.)
			r := runAll(t, []runSpec{{Playbook: "faults-large.yml", Mode: mode{false, "sftp"}, Side: bridge, Env: d.env(),
				HostVars: map[string]map[string]any{"t": {"large_src": src, "skip_fetch": true}}}})[0]
			wantExit(t, r, 0)
			if got := fileSHA(t, target); got != want {
				t.Errorf("after the next run: sha256 %s, want %s", got, want)
			}
		})
	}
}

// The helper of TestOtherUIDRefused: the test binary, re-run as another
// user, connects to the socket named by abDialEnv and sends a Hello.
const abDialEnv = "AB_FAULTS_DIAL_AS_OTHER"

func init() {
	if p := os.Getenv(abDialEnv); p != "" {
		os.Exit(dialAsOther(p))
	}
}

// dialAsOther prints what the daemon did with a Hello from this process:
// exit 0 when it closed the connection without a frame, 1 when it
// answered, 2 when the connection could not be made.
func dialAsOther(path string) int {
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("dial:", err)
		return 2
	}
	defer c.Close()
	hello, _ := json.Marshal(wire.HelloMsg{Prog: "ctl", Argv: []string{"status", "--json"}, PID: os.Getpid()})
	if err := wire.Write(c, wire.Hello, hello); err != nil {
		fmt.Println("write:", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	f, err := wire.Read(c)
	if err != nil {
		fmt.Println("refused:", err)
		return 0
	}
	fmt.Printf("answered: frame %c %q\n", f.Type, f.Payload)
	return 1
}

// startDetached starts the private daemon as the shim would, under the
// command wrapper if any (prlimit ...), and returns its status once it
// answers.
func (d *privateDaemon) startDetached(t *testing.T, wrapper ...string) abridge.Status {
	t.Helper()
	// As fakessh's startDaemon: in a session of its own, not waited for
	// (it runs until stopped); its output, if any, to a file.
	out := createFile(t, d.log+".start")
	defer out.Close()
	args := append(wrapper, suite.bin, "daemon", "--socket", d.socket, "--detached")
	start := exec.Command(args[0], args[1:]...)
	start.Env = append(cleanEnv(os.Environ()), d.env()...)
	start.Stdout, start.Stderr = out, out
	start.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := start.Start(); err != nil {
		t.Fatalf("ansible-bridge daemon: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = start.Wait(); close(exited) }()
	var st abridge.Status
	waitFor(t, 30*time.Second, "the daemon to answer", func() bool {
		select {
		case <-exited:
			t.Fatalf("the daemon exited: %s", readString(t, d.log+".start"))
		default:
		}
		var ok bool
		st, ok = d.status(t)
		return ok
	})
	return st
}

// TestOtherUIDRefused: another user (nobody) gets nothing from root's
// daemon. Its shim, pointed at root's socket, runs the real ssh without
// sending anything; and a process of that uid that can reach the socket
// anyway (CAP_DAC_OVERRIDE, so that the directory's and the socket's modes
// do not stop it) is refused by the daemon's SO_PEERCRED check, which logs
// it, and the daemon serves on.
func TestOtherUIDRefused(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	d := newPrivateDaemon(t)
	st := d.startDetached(t)
	nobody := nobodyUID(t)
	cred := &syscall.Credential{Uid: nobody, Gid: nobody}

	// Binaries nobody can run: the work directory is root's.
	dir, err := os.MkdirTemp("", "ab-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	install := func(src, name string) string {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shimDir := filepath.Join(dir, "shims")
	if err := os.Mkdir(shimDir, 0o755); err != nil {
		t.Fatal(err)
	}
	install(filepath.Join(filepath.Dir(suite.bin), "ansible-bridge-shim"), "shims/ssh")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := install(self, "integration.test")
	logBefore := fileSize(d.log)

	t.Run("shim", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(shimDir, "ssh"), "-o", "BatchMode=yes", "-p", "1", "127.0.0.1", "true")
		cmd.Env = []string{"PATH=" + shimDir + ":/usr/bin:/bin", "HOME=/nonexistent", "ANSIBLE_BRIDGE_SOCKET=" + d.socket}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, _ := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		t.Logf("shim as nobody: exit %d: %q", code, out)
		// The real ssh's answer: nothing listens on port 1.
		if code != 255 || !strings.Contains(string(out), "port 1: Connection refused") {
			t.Errorf("shim as nobody against root's socket: exit %d, %q; want the real ssh's refused connection", code, out)
		}
	})
	t.Run("peer uid", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, helper)
		cmd.Env = []string{abDialEnv + "=" + d.socket}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, AmbientCaps: []uintptr{unix.CAP_DAC_OVERRIDE}}
		out, err := cmd.CombinedOutput()
		t.Logf("nobody with CAP_DAC_OVERRIDE: %v: %s", err, out)
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("a Hello from uid %d: exit %d (%s), want the connection closed unanswered", nobody, code, out)
		}
		waitFor(t, 30*time.Second, "the daemon to log the refusal", func() bool {
			return strings.Contains(string(readFrom(d.log, logBefore)), "refusing connection from another user")
		})
	})
	after := d.mustStatus(t)
	if after.PID != st.PID {
		t.Errorf("daemon pid %d became %d", st.PID, after.PID)
	}
	// Only the status calls of this test reached the daemon.
	for _, l := range strings.Split(string(readFrom(d.log, logBefore)), "\n") {
		if strings.Contains(l, "prog=") && !strings.Contains(l, "prog=ctl") {
			t.Errorf("the daemon served another user's shim: %s", l)
		}
	}
}

// TestDaemonSurvivesGarbage: 200 connections to the daemon's socket
// carrying random bytes or malformed frames (bad lengths, cut frames,
// frames out of order, Hellos that are not JSON or name nothing it
// serves, stray control frames after a Hello) leave it up: the same
// daemon answers status afterwards, with nothing left in flight.
func TestDaemonSurvivesGarbage(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	d := newPrivateDaemon(t)
	st := d.startDetached(t)
	rng := rand.New(rand.NewPCG(11, 12))
	blob := func(max int) []byte {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	frame := func(typ wire.Type, payload []byte) []byte {
		var b bytes.Buffer
		_ = wire.Write(&b, typ, payload)
		return b.Bytes()
	}
	hello := func(prog string, argv ...string) []byte {
		p, _ := json.Marshal(wire.HelloMsg{Prog: prog, Argv: argv, PID: 1})
		return frame(wire.Hello, p)
	}
	cases := []func() []byte{
		func() []byte { return blob(64 << 10) },                                   // random bytes
		func() []byte { return nil },                                              // connect, close
		func() []byte { return []byte{byte(wire.Hello), 0xff, 0xff, 0xff, 0xff} }, // length over MaxPayload
		func() []byte { // cut short
			b := frame(wire.Hello, blob(4096))
			return b[:rng.IntN(len(b))]
		},
		func() []byte { return frame(wire.Hello, blob(4096)) },                    // not JSON
		func() []byte { return frame(wire.Stdin, blob(100)) },                     // no Hello first
		func() []byte { return hello(string(blob(8))) },                           // unknown prog
		func() []byte { return hello("ctl", string(blob(16)), string(blob(16))) }, // unknown command
		func() []byte { // ssh that must fall back, then stray frames
			b := hello("ssh", "-N", "-o", "ForwardAgent=yes", "nohost.invalid")
			b = append(b, frame(wire.Signal, blob(20))...)
			b = append(b, frame(wire.WindowSize, blob(9))...)
			return append(b, frame(wire.PromptReply, blob(30))...)
		},
		func() []byte { // a Hello, then garbage where frames should be
			return append(hello("ctl", "status"), blob(1024)...)
		},
		func() []byte { return append(frame(wire.Hello, []byte(`{"prog":"ssh","argv":`)), blob(64)...) },
	}
	for i := 0; i < 200; i++ {
		payload := cases[i%len(cases)]()
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		_, _ = c.Write(payload)
		if uc, ok := c.(*net.UnixConn); ok && i%2 == 0 {
			_ = uc.CloseWrite() // half of them: EOF, then read the answer
			_, _ = io.Copy(io.Discard, c)
		}
		c.Close()
	}
	waitFor(t, 30*time.Second, "nothing in flight", func() bool {
		s := d.mustStatus(t)
		return len(s.InFlight) == 0
	})
	after := d.mustStatus(t)
	if after.PID != st.PID {
		t.Fatalf("daemon pid %d became %d: it died", st.PID, after.PID)
	}
	if b, _ := os.ReadFile(d.log); bytes.Contains(b, []byte("panic")) {
		t.Errorf("the daemon log has a panic:\n%s", tail(string(b), 40))
	}
	t.Logf("daemon %d served %d invocations and still answers", after.PID, after.Invocations)
}

// TestNoPasswordInStatusOrProcesses adds to TestNoPasswordLeaks (logs, the
// mount) what it does not look at: after the playbooks that type
// passwords, with the connections and interpreters still up, neither
// `status` (text and JSON) nor the command line or environment of the
// daemon or of any process on the target (sessions, interpreters, become
// interpreters) holds a password.
func TestNoPasswordInStatusOrProcesses(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	d := newPrivateDaemon(t)
	for _, pb := range []string{"become.yml", "password.yml"} {
		for _, pipelining := range []bool{false, true} {
			// AB_PASSWORD cleared: the lab's environment holds it, and the
			// daemon the first shim starts inherits the shim's.
			r := runPlaybook(t, runSpec{
				Playbook: pb, Mode: mode{Pipelining: pipelining, Transfer: "sftp"}, Side: bridge,
				HostVars: setupBecome(t), Env: append(d.env(), "AB_PASSWORD="),
			})
			if r.ExitCode != 0 && r.ExitCode != 2 && r.ExitCode != 4 {
				t.Fatalf("%s: exit %d\n%s", pb, r.ExitCode, r.Stderr)
			}
		}
	}
	check := passwordCheck(t)
	st := d.mustStatus(t)
	// sshpass's password prompts reached the C front (the suite's shims
	// link to it), which handed those calls to the Go shim: counted.
	if st.FrontHandovers["prompt"] == 0 {
		t.Errorf("front_handovers %v: no prompt handed over, though sshpass logged in with a password", st.FrontHandovers)
	}
	interpreters := 0
	for _, ts := range st.Targets {
		interpreters += len(ts.Interpreters)
	}
	if interpreters == 0 {
		t.Fatalf("no interpreter is up: nothing to look at")
	}
	for _, args := range [][]string{{"status"}, {"status", "--json"}} {
		cmd := exec.Command(suite.bin, args...)
		cmd.Env = append(cleanEnv(os.Environ()), d.env()...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		check(strings.Join(args, " "), out)
	}
	procs := append([]int{st.PID}, procstat.Descendants(labSSHDPid(t))...)
	for _, pid := range procs {
		for _, f := range []string{"cmdline", "environ"} {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f)); err == nil {
				cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				check(fmt.Sprintf("/proc/%d/%s (%.200q)", pid, f, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})), b)
			}
		}
	}
	t.Logf("looked at status and %d processes (the daemon, %d interpreters and the rest on the target)", len(procs), interpreters)
}

// TestKilledWhileLoggingIn: an ssh killed while its login is under way
// (AWX's cancel and timeouts kill ansible-playbook's process group) dies
// of the signal, and its login dies with it: no command runs and no
// master is left for the next client. The bridge's daemon finished the
// login, ran the command and kept a master that a wrong key then rode.
// The relay holds the login still while the client is killed.
func TestKilledWhileLoggingIn(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	d := newPrivateDaemon(t)
	target := net.JoinHostPort("127.0.0.1", suite.lab.Port)
	type outcome struct {
		signal syscall.Signal
		check  string
		ran    bool
	}
	got := map[side]outcome{}
	for _, sd := range []side{stock, bridgeSide()} {
		r, err := relay.Start(context.Background(), "127.0.0.1:0", target, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		r.Stall(true)
		dir, err := os.MkdirTemp("", "abkl-") // a socket path's length is bounded
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		t.Cleanup(func() { stopMasters(t, dir) })
		marker := filepath.Join("/tmp", fmt.Sprintf("ab-killed-login-%d-%s", os.Getpid(), sd))
		t.Cleanup(func() { os.Remove(marker) })
		opts := []string{"-o", "ControlMaster=auto", "-o", "ControlPersist=30s", "-o", "ControlPath=" + dir + "/cp"}
		logStart := fileSize(d.log)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := sshCmd(ctx, sd, d, r.Port(), opts, "touch "+marker)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the login's connection", func() bool { return r.Stats().Connections > 0 })
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		var o outcome
		if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() {
			o.signal = ws.Signal()
		}
		if sd != stock {
			waitFor(t, 30*time.Second, "the daemon to abandon the login", func() bool {
				return strings.Contains(string(readFrom(d.log, logStart)), "login abandoned")
			})
		}
		r.Stall(false)
		check := sshCmd(ctx, sd, d, r.Port(), append(opts, "-O", "check"), "")
		out, _ := check.CombinedOutput()
		o.check = strings.ReplaceAll(string(out), dir, "DIR")
		_, err = os.Stat(marker)
		o.ran = err == nil
		got[sd] = o
	}
	t.Logf("OpenSSH: %+v", got[stock])
	if got[bridgeSide()] != got[stock] {
		t.Errorf("through the shim: %+v\nwith OpenSSH: %+v", got[bridgeSide()], got[stock])
	}
	if w := got[stock]; w.signal != syscall.SIGTERM || w.ran {
		t.Errorf("OpenSSH: %+v, want it killed by SIGTERM before its command ran", w)
	}
}
