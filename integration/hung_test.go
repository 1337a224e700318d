package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hangMaster makes a ControlPersist master (ssh with opts and the
// ControlPath in dir) on the lab's sshd and stops (SIGSTOP) sshd's
// processes of its connection, as a hung server: its listener still
// accepts logins. It returns the server's end of the connection, for
// pendingOpen, and those processes. They are killed when t ends.
func hangMaster(t *testing.T, sd side, d *privateDaemon, dir string, opts []string) (string, []int) {
	t.Helper()
	port, err := strconv.Atoi(suite.lab.Port)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() { stopMasters(t, dir) })
	// $PPID is the session's sshd process; its parent the connection's
	// monitor. $SSH_CLIENT names the master's end of the connection.
	out, err := sshCmd(ctx, sd, d, port, opts, `echo $PPID $SSH_CLIENT`).Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) != 4 {
		t.Fatalf("%s: master: %q, %v", sd, out, err)
	}
	sess, _ := strconv.Atoi(f[0])
	procs := []int{parentPid(sess), sess}
	if procs[0] <= 1 || sess <= 1 {
		t.Fatalf("%s: sshd session processes %v", sd, procs)
	}
	for _, p := range procs {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = syscall.Kill(p, syscall.SIGKILL)
			_ = syscall.Kill(p, syscall.SIGCONT)
		}
	})
	return fmt.Sprintf("src 127.0.0.1:%d dst %s:%s", port, f[1], f[2]), procs
}

// pendingOpen reports whether the hung server has unread data on the
// connection conn (hangMaster's): a session request waiting on it.
func pendingOpen(t *testing.T, conn string) bool {
	t.Helper()
	out, err := exec.Command("sh", "-c", "ss -tnH state established "+conn).Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	f := strings.Fields(string(out))
	return len(f) > 0 && f[0] != "0"
}

// TestHungServerLikeOpenSSH: with the target's sshd hung (its processes
// of the master's connection stopped) while a client's session request
// waits on the connection, -O check and -O stop answer at once, as ssh's
// master does; and a master with ServerAliveInterval times out, or the
// server's processes die, its mux client (a command's, a subsystem's)
// then saying so and logging in itself. The bridge's control requests
// and its connection's close waited behind the pending open, and it
// said nothing when the server ended the connection.
func TestHungServerLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	d := newPrivateDaemon(t)
	port, _ := strconv.Atoi(suite.lab.Port)
	type outcome struct {
		code   int
		stdout string
		stderr string
	}
	run := func(t *testing.T, sd side, opts []string, command string) outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := sshCmd(ctx, sd, d, port, opts, command)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("%s: ssh %v %q hangs", sd, opts, command)
		}
		pid := regexp.MustCompile(`pid=\d+`)
		return outcome{cmd.ProcessState.ExitCode(), stdout.String(), pid.ReplaceAllString(sshMessage(stderr.String()), "pid=N")}
	}
	mux := func(dir string, more ...string) []string {
		return append([]string{"-o", "ControlMaster=auto", "-o", "ControlPersist=60", "-o", "ControlPath=" + dir + "/cp"}, more...)
	}
	t.Run("control requests", func(t *testing.T) {
		got := map[side][]outcome{}
		for _, sd := range []side{stock, bridgeSide()} {
			dir := shortTempDir(t)
			conn, _ := hangMaster(t, sd, d, dir, mux(dir))
			ctx, cancel := context.WithCancel(context.Background())
			rider := sshCmd(ctx, sd, d, port, mux(dir), "echo rider")
			if err := rider.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cancel(); _ = rider.Wait() })
			waitFor(t, 20*time.Second, "the rider's session request to reach the hung server", func() bool { return pendingOpen(t, conn) })
			for _, c := range []string{"check", "stop"} {
				got[sd] = append(got[sd], run(t, sd, append(mux(dir), "-O", c), ""))
			}
		}
		t.Logf("OpenSSH: %+v", got[stock])
		if g, w := fmt.Sprint(got[bridgeSide()]), fmt.Sprint(got[stock]); g != w {
			t.Errorf("through the shim: %s\nwith OpenSSH: %s", g, w)
		}
	})
	// The riders: a command, and a subsystem (what sftp runs), the
	// subsystem's command line ssh's after its options.
	riders := []struct {
		name, command, stdout string
		opts                  []string
	}{
		{"command", "echo rider", "rider\n", nil},
		{"subsystem", "sftp", "", []string{"-s"}},
	}
	wantLoggedIn := func(t *testing.T, w outcome, stdout string) {
		t.Helper()
		if w.code != 0 || w.stdout != stdout || w.stderr != "mux_client_request_session: read from master failed: Broken pipe" {
			t.Errorf("OpenSSH's rider: %+v, want it logged in itself", w)
		}
	}
	for _, rd := range riders {
		t.Run("ServerAlive master times out/"+rd.name, func(t *testing.T) {
			got := map[side][]outcome{}
			for _, sd := range []side{stock, bridgeSide()} {
				dir := shortTempDir(t)
				hangMaster(t, sd, d, dir, mux(dir, "-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=2"))
				got[sd] = append(got[sd], run(t, sd, mux(dir, rd.opts...), rd.command), run(t, sd, append(mux(dir), "-O", "exit"), ""))
			}
			t.Logf("OpenSSH: %+v", got[stock])
			if g, w := fmt.Sprint(got[bridgeSide()]), fmt.Sprint(got[stock]); g != w {
				t.Errorf("through the shim: %s\nwith OpenSSH: %s", g, w)
			}
			wantLoggedIn(t, got[stock][0], rd.stdout)
		})
		t.Run("server gone/"+rd.name, func(t *testing.T) {
			got := map[side][]outcome{}
			for _, sd := range []side{stock, bridgeSide()} {
				dir := shortTempDir(t)
				conn, procs := hangMaster(t, sd, d, dir, mux(dir))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				rider := sshCmd(ctx, sd, d, port, mux(dir, rd.opts...), rd.command)
				var stdout, stderr bytes.Buffer
				rider.Stdout, rider.Stderr = &stdout, &stderr
				if err := rider.Start(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 20*time.Second, "the rider's session request to reach the hung server", func() bool { return pendingOpen(t, conn) })
				for _, p := range procs {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
				_ = rider.Wait()
				if ctx.Err() != nil {
					t.Fatalf("%s: the rider hangs", sd)
				}
				got[sd] = append(got[sd], outcome{rider.ProcessState.ExitCode(), stdout.String(), sshMessage(stderr.String())},
					run(t, sd, append(mux(dir), "-O", "exit"), ""))
			}
			t.Logf("OpenSSH: %+v", got[stock])
			if g, w := fmt.Sprint(got[bridgeSide()]), fmt.Sprint(got[stock]); g != w {
				t.Errorf("through the shim: %s\nwith OpenSSH: %s", g, w)
			}
			wantLoggedIn(t, got[stock][0], rd.stdout)
		})
	}
}

// shortTempDir is a temporary directory short enough for a socket path.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "abhung-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
