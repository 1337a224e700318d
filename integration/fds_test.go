package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestInheritedFDsLikeOpenSSH: a descriptor the caller leaks into ssh or
// sftp stays open exactly as long as OpenSSH's would hold it. ssh closes
// every descriptor above stderr first thing (closefrom in ssh.c); sftp
// keeps its own while it runs, and neither the ssh it starts nor a
// ControlPersist master holds them. Through the shims, the daemon the
// call starts must not hold them either: ansible-runner's pexpect waits
// for its pty's end, and a daemon holding that pty (leaked by sshpass)
// delayed a canceled job's end by pexpect's 5 s timeout (audit 15).
func TestInheritedFDsLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	cases := []struct {
		name   string
		prog   string
		goShim bool // the Go shim as ssh, not the C front
	}{
		{"ssh", "ssh", false},
		{"ssh/go-shim", "ssh", true},
		{"sftp", "sftp", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got [2]leakOutcome
			for j, sd := range []side{stock, bridgeSide()} {
				// No daemon runs on this socket yet: the call starts it.
				d := newPrivateDaemon(t)
				dir, err := os.MkdirTemp("", "abfd-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				t.Cleanup(func() { stopMasters(t, dir) })
				got[j] = leakInto(t, leakCmd(sd, d, c.prog, c.goShim, dir), c.prog == "ssh")
			}
			if got[1] != got[0] {
				t.Errorf("through the shim: %+v\nwith OpenSSH: %+v", got[1], got[0])
			}
			if want := c.prog == "ssh"; got[0].closedWhileRunning != want || !got[0].closedAfterExit || got[0].exit != 0 {
				t.Errorf("OpenSSH: %+v, want closed while running: %v, closed after the exit, exit 0", got[0], want)
			}
		})
	}
}

// leakOutcome is what became of the descriptor leakInto leaked.
type leakOutcome struct {
	closedWhileRunning bool // once the first line of output came
	closedAfterExit    bool
	exit               int
	stdout             string
}

// leakCmd is prog (ssh running cat, or sftp running a batch from stdin)
// to the lab with a ControlPersist master in dir.
func leakCmd(sd side, d *privateDaemon, prog string, goShim bool, dir string) *exec.Cmd {
	bin, path := "/usr/bin/"+prog, suite.basePATH
	var env []string
	if sd == bridge {
		bin, path = filepath.Join(suite.shims, prog), suite.shims+string(os.PathListSeparator)+suite.basePATH
		if goShim {
			bin = filepath.Join(filepath.Dir(suite.bin), "ansible-bridge-shim")
			env = append(env, "ANSIBLE_BRIDGE_ARGV0="+prog)
		}
	}
	port := "-p"
	if prog == "sftp" {
		port = "-P"
	}
	args := []string{"-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-i", suite.lab.Key, port, suite.lab.Port,
		"-o", "ControlMaster=auto", "-o", "ControlPersist=60s", "-o", "ControlPath=" + dir + "/%C"}
	if prog == "sftp" {
		args = append(args, "-b", "-", suite.lab.User+"@127.0.0.1")
	} else {
		args = append(args, suite.lab.User+"@127.0.0.1", "cat")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(os.Environ()), "PATH="+path, "HOME="+suite.home, "LANG=C.UTF-8")
	cmd.Env = append(append(cmd.Env, d.env()...), env...)
	return cmd
}

// leakInto runs cmd with a pipe's write end as its fd 3, gives it one
// line on stdin, and looks whether the pipe's reader sees its end once
// it exited and, if running (cmd runs until its stdin closes), once its
// first line of output came (it runs, logged in). A process's
// descriptors are closed before its parent's wait returns: nothing here
// waits for a close.
func leakInto(t *testing.T, cmd *exec.Cmd, running bool) leakOutcome {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{w}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Only a bound on a failing run.
	guard := time.AfterFunc(90*time.Second, func() { _ = cmd.Process.Kill() })
	defer guard.Stop()
	if _, err := io.WriteString(stdin, "pwd\n"); err != nil {
		t.Fatal(err)
	}
	var out leakOutcome
	br := bufio.NewReader(stdout)
	first := ""
	if running {
		if first, err = br.ReadString('\n'); err != nil {
			t.Fatalf("%s: no first line: %v", cmd.Path, err)
		}
		out.closedWhileRunning = pipeClosed(t, r)
	}
	stdin.Close()
	rest, _ := io.ReadAll(br)
	out.stdout = first + string(rest)
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		out.exit = ee.ExitCode()
	}
	out.closedAfterExit = pipeClosed(t, r)
	if !out.closedAfterExit {
		t.Logf("still holding the leaked pipe: %s", pipeHolders(t, r))
	}
	return out
}

// pipeClosed reports whether r is at its end (every write end closed),
// without waiting: a read that finds no data and a writer fails at once.
func pipeClosed(t *testing.T, r *os.File) bool {
	t.Helper()
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		var b [16]byte
		n, rerr = unix.Read(int(fd), b[:])
		return true
	}); err != nil {
		t.Fatal(err)
	}
	switch {
	case n > 0:
		t.Fatalf("read %d bytes from the leaked pipe", n)
	case errors.Is(rerr, unix.EAGAIN):
		return false
	case rerr != nil:
		t.Fatal(rerr)
	}
	return true
}

// pipeHolders lists the processes with r's pipe open, for the failure.
func pipeHolders(t *testing.T, r *os.File) string {
	t.Helper()
	self, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", r.Fd()))
	if err != nil {
		return err.Error()
	}
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if l, err := os.Readlink(fd); err == nil && l == self {
			pid := strings.Split(fd, "/")[2]
			if pid == strconv.Itoa(os.Getpid()) {
				continue
			}
			cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			out = append(out, pid+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return strings.Join(out, "; ")
}
