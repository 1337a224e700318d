package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The limit a fleet meets first in the daemon (issue 27): its file
// descriptors (ulimit -n), which bound the shims it serves at once.

// runSSH runs cmd and returns its stdout, its stderr as sshMessage has it
// (the port numbered N) and its exit status; -1 and the error as the
// message if it did not run to an exit. It calls nothing on t, so that
// goroutines may use it.
func runSSH(cmd *exec.Cmd) (stdout, message string, code int) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() < 0 {
		return out.String(), fmt.Sprintf("%v: %v", cmd.Args, err), -1
	}
	return out.String(), normalizePort(sshMessage(errb.String())), cmd.ProcessState.ExitCode()
}

// TestDaemonFDLimit: a daemon with few file descriptors (ulimit -n 96)
// serves a hundred shims at once as OpenSSH would run them: every one
// succeeds. Past its budget (inFlightBudget) the shims wait in the
// socket's queue until an invocation ends; without it, they failed with
// "Can't open user config file /dev/null: Too many open files" (and an
// accept failing for it ended the daemon). Status counts the waits.
func TestDaemonFDLimit(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	d := newPrivateDaemon(t)
	st := d.startDetached(t, "prlimit", "--nofile=96:96")
	cpDir := t.TempDir()
	ssh := func(command string) *exec.Cmd {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		port, _ := strconv.Atoi(suite.lab.Port)
		return sshCmd(ctx, bridge, d, port, []string{"-o", "ControlMaster=auto", "-o", "ControlPersist=60s",
			"-o", "ControlPath=" + filepath.Join(cpDir, "%C")}, command)
	}
	if out, msg, code := runSSH(ssh("echo first")); code != 0 || out != "first\n" {
		t.Fatalf("first invocation: exit %d, %q, %q", code, out, msg)
	}

	const shims = 100
	var wg sync.WaitGroup
	errs := make(chan string, shims)
	for i := range shims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("shim %d\n", i)
			// Each holds its descriptor for a while, so that they overlap.
			if out, msg, code := runSSH(ssh(fmt.Sprintf("sleep 2; echo shim %d", i))); code != 0 || out != want {
				errs <- fmt.Sprintf("shim %d: exit %d, stdout %q, message %q", i, code, out, msg)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	after := d.mustStatus(t)
	if after.PID != st.PID {
		t.Fatalf("daemon pid %d became %d", st.PID, after.PID)
	}
	if after.AcceptWaits == 0 {
		t.Errorf("status accept_waits 0: no shim waited, so this tested nothing")
	}
	t.Logf("%d shims waited to be accepted; daemon at the end: %v", after.AcceptWaits, sampleProc(t, st.PID))
}
