package interp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
	"golang.org/x/sys/unix"
)

// reaperChild names the TestTeardown* case the test binary runs as a
// child subreaper (see asSubreaper).
const reaperChild = "AB_TEST_SUBREAPER_CASE"

// asSubreaper runs the test named name again in a child of the test
// binary that is a subreaper (PR_SET_CHILD_SUBREAPER) and reaps only the
// children it started: what an agent's processes leave to the target's
// init stays there as zombies, as under a container's PID 1 that reaps
// nothing. It reports whether this process is that child.
func asSubreaper(t *testing.T, name string) bool {
	t.Helper()
	if os.Getenv(reaperChild) == name {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
		}
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), reaperChild+"="+name)
	out, err := cmd.CombinedOutput()
	t.Logf("the subreaper's run:\n%s", out)
	if err != nil {
		t.Fatalf("the subreaper's run failed: %v", err)
	}
	return false
}

// ownChildren lists this process's children (pid → state letter, "Z" for
// a zombie), as /proc shows them.
func ownChildren(t *testing.T) map[int]string {
	t.Helper()
	out := map[int]string{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		// state ppid ...
		if f := procStat(e.Name()); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			pid, _ := strconv.Atoi(e.Name())
			out[pid] = f[0]
		}
	}
	return out
}

// TestTeardownLeavesNoZombies: once an agent with warm zygotes (their
// seeds, their spares) has exited, none of its processes is left to
// init, alive or a zombie: stock's processes end with their sessions,
// reaped by sshd, and a container's PID 1 may reap nothing.
func TestTeardownLeavesNoZombies(t *testing.T) {
	if !asSubreaper(t, "TestTeardownLeavesNoZombies") {
		return
	}
	ws := wrappers(t, job{"command", map[string]any{"_raw_params": "true"}}, job{"ping", map[string]any{}})
	ctx := ctxT(t, 60*time.Second)
	// Several connections: the agent is often told to exit before the
	// last task's process has, though the task's answer has come.
	for conn := 0; conn < 5; conn++ {
		c := startAgent(t, agentEnv{})
		// Three tasks of each module: each zygote warm, its seed forked
		// and a spare held.
		for i := 0; i < 3; i++ {
			for _, w := range ws {
				if res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, w)}); err != nil || res.ExitCode != 0 {
					t.Fatalf("task: %v %+v", err, res)
				}
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if left := ownChildren(t); len(left) > 0 {
			t.Fatalf("connection %d: processes left to the subreaper after the agent exited (pid: state): %v", conn, left)
		}
	}
}

// TestTeardownLeavesRunningTasks: an agent told to exit while a task
// runs exits at once; the task runs on (as stock's module does when its
// ssh dies) and is the only process the agent leaves.
func TestTeardownLeavesRunningTasks(t *testing.T) {
	if !asSubreaper(t, "TestTeardownLeavesRunningTasks") {
		return
	}
	c := startAgent(t, agentEnv{})
	sleeper := startSleepTask(t, c, fmt.Sprintf("sleep 3600.%d", os.Getpid()), nil)
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the agent exited %v after close, its task running", time.Since(start))
	if err := syscall.Kill(sleeper, 0); err != nil {
		t.Fatalf("the task's sleep %d did not outlive the agent: %v", sleeper, err)
	}
	for pid, state := range ownChildren(t) {
		if state == "Z" {
			t.Errorf("zombie %d left to the subreaper while the task runs", pid)
		}
	}
}

// startSleepTask warms agent c's zygote with three `true` tasks, then
// leaves a `command` task running sleep (a duration no other sleep here
// has, to find the task's by; on a terminal if pty is set), and returns
// the sleep's pid, killed at the end of t.
func startSleepTask(t *testing.T, c *interp.Client, sleep string, pty *interp.PTY) int {
	t.Helper()
	ws := wrappers(t, job{"command", map[string]any{"_raw_params": "true"}},
		job{"command", map[string]any{"_raw_params": sleep}})
	ctx := ctxT(t, 60*time.Second)
	request := func(w []byte) interp.ModuleRequest {
		return interp.ModuleRequest{Wrapper: parsed(t, w), PTY: pty}
	}
	for i := 0; i < 3; i++ {
		if res, err := c.RunModule(ctx, request(ws[0])); err != nil || res.ExitCode != 0 {
			t.Fatalf("task: %v %+v", err, res)
		}
	}
	go func() { _, _ = c.RunModule(context.Background(), request(ws[1])) }()
	var sleeper int
	if !pollAgent(t, ctx, c, func() bool {
		out, _ := exec.Command("pgrep", "-x", "-f", sleep).Output()
		sleeper, _ = strconv.Atoi(strings.TrimSpace(string(out)))
		return sleeper != 0
	}) {
		t.Fatalf("no %q running 10 s after the task was sent", sleep)
	}
	t.Cleanup(func() { _ = syscall.Kill(sleeper, syscall.SIGKILL) })
	return sleeper
}

// TestHangupLeavesNoZombies: a become interpreter on a terminal is hung
// up when its connection drops (no exit request comes), and sudo relays
// the SIGHUP to it. Sent to the agent and to every process of its group
// (its zygotes and their seeds), it ends them in the order a closed
// channel does: none of its processes is left to init, and the agent
// dies of the SIGHUP, as it would have before.
func TestHangupLeavesNoZombies(t *testing.T) {
	skipIfHangupIgnored(t)
	if !asSubreaper(t, "TestHangupLeavesNoZombies") {
		return
	}
	ws := wrappers(t, job{"command", map[string]any{"_raw_params": "true"}}, job{"ping", map[string]any{}})
	ctx := ctxT(t, 60*time.Second)
	c := startAgent(t, agentEnv{})
	for i := 0; i < 3; i++ {
		for _, w := range ws {
			if res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, w)}); err != nil || res.ExitCode != 0 {
				t.Fatalf("task: %v %+v", err, res)
			}
		}
	}
	agent := c.Info().PID
	group := sameGroupDescendants(t, agent)
	if len(group) < 2 { // two zygotes, and their seeds unless one is being replaced
		t.Fatalf("the agent's group: %v, want its zygotes", group)
	}
	// The agent last: once it has the signal its processes may leave.
	for _, pid := range append(group, agent) {
		if err := syscall.Kill(pid, syscall.SIGHUP); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("SIGHUP to %d: %v", pid, err)
		}
	}
	err := c.Close()
	if err == nil || !strings.Contains(err.Error(), "exit status 129") {
		t.Errorf("the agent's end: %v, want its shell's exit status 129 (SIGHUP)", err)
	}
	if left := ownChildren(t); len(left) > 0 {
		t.Fatalf("processes left to the subreaper after the hangup (pid: state): %v", left)
	}
}

// sameGroupDescendants lists pid's descendants in its process group: a
// spare (a session of its own) and what it forks are not.
func sameGroupDescendants(t *testing.T, pid int) []int {
	t.Helper()
	pgrp := procStat(strconv.Itoa(pid))[2]
	var out []int
	for parents := []int{pid}; len(parents) > 0; {
		var next []int
		for _, p := range parents {
			for _, child := range children(t, p) {
				if f := procStat(strconv.Itoa(child)); len(f) > 2 && f[2] == pgrp {
					out = append(out, child)
					next = append(next, child)
				}
			}
		}
		parents = next
	}
	return out
}

// TestTaskSignalsAsStock: the agent catches SIGHUP and its zygotes ignore
// it (TestHangupLeavesNoZombies), but a task's commands find the signal
// dispositions stock's module gives them: SIGHUP's as python found it,
// ignored under nohup.
func TestTaskSignalsAsStock(t *testing.T) {
	real := ansiblePython(t)
	nohup := filepath.Join(t.TempDir(), "python-nohup")
	if err := os.WriteFile(nohup, []byte("#!/bin/sh\ntrap '' HUP\nexec "+real+` "$@"`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := wrappers(t, job{"command", map[string]any{"_raw_params": "grep -E '^Sig(Ign|Blk)' /proc/self/status"}})[0]
	for _, py := range []string{real, nohup} {
		t.Run(filepath.Base(py), func(t *testing.T) {
			dir := t.TempDir()
			env := append(os.Environ(), "HOME="+dir)
			want := normJSON(t, stockRun(t, py, dir, env, w, "").Stdout)["stdout"]
			c := startAgent(t, agentEnv{Python: py, Dir: dir, Env: env})
			ctx := ctxT(t, 30*time.Second)
			for i := 0; i < 3; i++ { // the first task and a warm zygote's spares
				res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, w)})
				if err != nil {
					t.Fatal(err)
				}
				if got := normJSON(t, res.Stdout)["stdout"]; got != want {
					t.Errorf("task %d's command: %q, stock's %q", i, got, want)
				}
			}
			// The premise: nohup's python ignores SIGHUP. (What the test
			// itself ignores, such as signal 32 under CI, both sides
			// inherit alike.)
			_, mask, _ := strings.Cut(fmt.Sprint(want), "SigIgn:\t")
			ign, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			if py == nohup && (err != nil || ign&(1<<(syscall.SIGHUP-1)) == 0) {
				t.Errorf("stock's command under nohup: %q: SIGHUP not ignored (%v)", want, err)
			}
		})
	}
}

// TestTeardownHangsUpTerminals: a task on a terminal when the agent's
// channel ends is hung up at once, as sshd hangs up a session's terminal
// when its connection drops; the agent does not first wait (up to 0.5 s)
// for its zygote, which waits for that task.
func TestTeardownHangsUpTerminals(t *testing.T) {
	skipIfHangupIgnored(t)
	c := startAgent(t, agentEnv{})
	// TestTeardownLeavesRunningTasks has a sleep of its own.
	sleeper := startSleepTask(t, c, fmt.Sprintf("sleep 3600.%d", os.Getpid()+1), &interp.PTY{})
	pidfd, err := unix.PidfdOpen(sleeper, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	// A pidfd polls readable once its process has exited.
	if n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, 5000); n != 1 {
		t.Fatalf("the task's sleep still runs 5 s after the agent left (%v)", err)
	}
	t.Logf("the agent left %v after close, its task on a terminal hung up", took)
	if took >= 500*time.Millisecond {
		t.Errorf("the agent left %v after close: it waited for its zygote's wait on the task, which it should have hung up first", took)
	}
}

// skipIfHangupIgnored skips t where this process was started with SIGHUP
// ignored (nohup): the agent and its tasks keep it ignored, as python
// would, so no hangup ends them.
func skipIfHangupIgnored(t *testing.T) {
	t.Helper()
	if signal.Ignored(syscall.SIGHUP) {
		t.Skip("SIGHUP is ignored here (nohup)")
	}
}
