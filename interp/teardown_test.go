package interp_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
	// A duration no other sleep here has, to find the task's by.
	sleep := fmt.Sprintf("sleep 3600.%d", os.Getpid())
	ws := wrappers(t, job{"command", map[string]any{"_raw_params": "true"}},
		job{"command", map[string]any{"_raw_params": sleep}})
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 60*time.Second)
	for i := 0; i < 3; i++ {
		if res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, ws[0])}); err != nil || res.ExitCode != 0 {
			t.Fatalf("task: %v %+v", err, res)
		}
	}
	go func() {
		_, _ = c.RunModule(context.Background(), interp.ModuleRequest{Wrapper: parsed(t, ws[1])})
	}()
	var sleeper int
	if !pollAgent(t, ctx, c, func() bool {
		out, _ := exec.Command("pgrep", "-x", "-f", sleep).Output()
		sleeper, _ = strconv.Atoi(strings.TrimSpace(string(out)))
		return sleeper != 0
	}) {
		t.Fatalf("no %q running 10 s after the task was sent", sleep)
	}
	t.Cleanup(func() { _ = syscall.Kill(sleeper, syscall.SIGKILL) })
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
