package integration

import (
	"bufio"
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
	t.Cleanup(func() { stopMasters(t, dir) })
	// $PPID is the session's sshd process; its parent the connection's
	// monitor. $SSH_CLIENT names the master's end of the connection. The
	// session stays open (read waits on the stdin t holds) while the
	// server is stopped: the close of a finished one could reach the
	// server after the stop, unread, and pass for a rider's request.
	ctx, cancel := context.WithCancel(context.Background())
	setup := sshCmd(ctx, sd, d, port, opts, `echo $PPID $SSH_CLIENT; read x`)
	stdin, err := setup.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := setup.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := setup.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cancel(); _ = setup.Wait() })
	timer := time.AfterFunc(time.Minute, cancel)
	out, err := bufio.NewReader(stdout).ReadString('\n')
	timer.Stop()
	f := strings.Fields(out)
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
// connection conn (hangMaster's): a rider's request waiting on it.
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
// then saying so and logging in itself (-W and -O forward say so too). The bridge's control requests
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
	// The riders: a command, a subsystem (what sftp asks for), a stdio
	// forward and a remote forward, with what OpenSSH's says: a
	// session's client logs in itself.
	const lost = "read from master failed: Broken pipe"
	riders := []struct {
		name, command string
		opts          []string
		want          outcome
	}{
		{"command", "echo rider", nil, outcome{0, "rider\n", "mux_client_request_session: " + lost}},
		{"subsystem", "sftp", []string{"-s"}, outcome{0, "", "mux_client_request_session: " + lost}},
		{"-W", "", []string{"-W", "127.0.0.1:" + suite.lab.Port}, outcome{0, "", "mux_client_request_stdio_fwd: " + lost}},
		{"-O forward -R", "", []string{"-O", "forward", "-R", "127.0.0.1:0:127.0.0.1:" + suite.lab.Port}, outcome{255, "", "muxclient: master forward request failed"}},
	}
	// exit is -O exit after the rider, its socket's directory named DIR.
	exit := func(t *testing.T, sd side, dir string) outcome {
		o := run(t, sd, append(mux(dir), "-O", "exit"), "")
		o.stderr = strings.ReplaceAll(o.stderr, dir, "DIR")
		return o
	}
	for _, rd := range riders {
		t.Run("ServerAlive master times out/"+rd.name, func(t *testing.T) {
			got := map[side][]outcome{}
			for _, sd := range []side{stock, bridgeSide()} {
				dir := shortTempDir(t)
				hangMaster(t, sd, d, dir, mux(dir, "-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=2"))
				got[sd] = append(got[sd], run(t, sd, mux(dir, rd.opts...), rd.command), exit(t, sd, dir))
			}
			t.Logf("OpenSSH: %+v", got[stock])
			if g, w := fmt.Sprint(got[bridgeSide()]), fmt.Sprint(got[stock]); g != w {
				t.Errorf("through the shim: %s\nwith OpenSSH: %s", g, w)
			}
			if w := got[stock][0]; w != rd.want {
				t.Errorf("OpenSSH's rider: %+v, want %+v", w, rd.want)
			}
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
				waitFor(t, 20*time.Second, "the rider's request to reach the hung server", func() bool { return pendingOpen(t, conn) })
				for _, p := range procs {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
				_ = rider.Wait()
				if ctx.Err() != nil {
					t.Fatalf("%s: the rider hangs", sd)
				}
				got[sd] = append(got[sd], outcome{rider.ProcessState.ExitCode(), stdout.String(), sshMessage(stderr.String())}, exit(t, sd, dir))
			}
			t.Logf("OpenSSH: %+v", got[stock])
			if g, w := fmt.Sprint(got[bridgeSide()]), fmt.Sprint(got[stock]); g != w {
				t.Errorf("through the shim: %s\nwith OpenSSH: %s", g, w)
			}
			if w := got[stock][0]; w != rd.want {
				t.Errorf("OpenSSH's rider: %+v, want %+v", w, rd.want)
			}
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
