package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// TestTerminalPromptLikeOpenSSH: a prompt on the controlling terminal
// puts the same bytes there as OpenSSH's read_passphrase ("\r" first,
// "\n" after an answer read with echo off, also for an echoed prompt
// on a terminal whose echo was off already, as in ansible-runner's
// pty), and echo is off before a password prompt shows, so that an
// answer typed as soon as it shows (sshpass, expect) is not echoed back.
func TestTerminalPromptLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	common := []string{"-F", "/dev/null", "-o", "LogLevel=ERROR", "-p", suite.lab.Port}
	cases := []struct {
		name    string
		echoOff bool   // the terminal's echo off before ssh starts
		prompt  string // what the answer follows
		answer  string
		args    func(kh string) []string
	}{
		{"password", false, "Password: ", suite.lab.Password, func(string) []string {
			return append(common, "-o", "PubkeyAuthentication=no", "-o", "StrictHostKeyChecking=no",
				"-o", "UserKnownHostsFile=/dev/null", suite.lab.PWUser+"@127.0.0.1", "whoami")
		}},
		{"password, echo off already", true, "Password: ", suite.lab.Password, func(string) []string {
			return append(common, "-o", "PubkeyAuthentication=no", "-o", "StrictHostKeyChecking=no",
				"-o", "UserKnownHostsFile=/dev/null", suite.lab.PWUser+"@127.0.0.1", "whoami")
		}},
		{"host key, echo off already", true, "(yes/no/[fingerprint])? ", "yes", func(kh string) []string {
			return append(common, "-i", suite.lab.Key, "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=ask",
				"-o", "UserKnownHostsFile="+kh, suite.lab.User+"@127.0.0.1", "whoami")
		}},
		{"host key", false, "(yes/no/[fingerprint])? ", "yes", func(kh string) []string {
			return append(common, "-i", suite.lab.Key, "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=ask",
				"-o", "UserKnownHostsFile="+kh, suite.lab.User+"@127.0.0.1", "whoami")
		}},
	}
	d := newPrivateDaemon(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]string
			for i, ssh := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
				dir := t.TempDir()
				// A ControlPath, without which the bridge leaves it
				// to the real ssh; no ControlPersist: nothing stays.
				args := append([]string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + filepath.Join(dir, "cp")},
					tc.args(filepath.Join(dir, "known_hosts"))...)
				got[i] = ptySSH(t, ssh, args, d.env(), tc.echoOff, tc.prompt, tc.answer)
			}
			if got[1] != got[0] {
				t.Errorf("terminal through the shim: %q\nwith OpenSSH: %q", got[1], got[0])
			}
		})
	}
}

// ptySSH runs ssh with a new pty as its controlling terminal, answers
// prompt once, and returns all ssh wrote there. When the prompt shows,
// the terminal's echo must be off for an answer that is not echoed.
func ptySSH(t *testing.T, ssh string, args, env []string, echoOff bool, prompt, answer string) string {
	t.Helper()
	ptmx, pts, err := pty.Open()
	if err != nil {
		t.Skip("no pty:", err)
	}
	defer ptmx.Close()
	defer pts.Close()
	if echoOff {
		tio, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		tio.Lflag &^= unix.ECHO
		if err := unix.IoctlSetTermios(int(pts.Fd()), unix.TCSETS, tio); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ssh, args...)
	cmd.Env = append(cleanEnv(os.Environ()), append([]string{"HOME=" + suite.home, "PATH=" + suite.basePATH}, env...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	chunks := make(chan []byte)
	go func() {
		defer close(chunks)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				chunks <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return // EIO: no one has the terminal open
			}
		}
	}()
	var out bytes.Buffer
	answered := false
	for chunks != nil {
		select {
		case c, ok := <-chunks:
			if !ok {
				chunks = nil
				continue
			}
			out.Write(c)
			if !answered && strings.HasSuffix(out.String(), prompt) {
				answered = true
				tio, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(prompt, "Password") && tio.Lflag&unix.ECHO != 0 {
					t.Errorf("%s: echo still on when the password prompt showed", ssh)
				}
				if _, err := ptmx.Write([]byte(answer + "\n")); err != nil {
					t.Fatal(err)
				}
			}
		case err := <-exited:
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatalf("%s: %v", ssh, err)
			}
			if !answered {
				t.Errorf("%s exited (%v) before it prompted: %q", ssh, err, out.String())
			}
			// Its end of the terminal closed too: the reader ends on EIO.
			pts.Close()
			exited = nil
		}
	}
	return out.String()
}

// TestBackgroundJobLikeOpenSSH: `ssh host cmd &` from a shell with job
// control, its terminal on stdin: ssh's mux client hands the terminal to
// its master, in another session, so the job runs to its end; the shim,
// reading the terminal itself from a background group, was stopped
// (SIGTTIN: "Stopped"). It now hands such a job to the real ssh.
func TestBackgroundJobLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	d := newPrivateDaemon(t)
	var got [2]string
	for i, ssh := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
		dir, err := os.MkdirTemp("", "abbg-") // a socket path's length is bounded
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		t.Cleanup(func() { stopMasters(t, dir) })
		script := `set -m; "$@" 'sleep 0.3; echo job-done' & wait $!; echo "rc=$?"; kill -KILL %1 2>/dev/null; exit 0`
		args := []string{"-c", script, "bash", ssh, "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
			"-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-i", suite.lab.Key, "-p", suite.lab.Port,
			"-o", "ControlMaster=auto", "-o", "ControlPersist=30s", "-o", "ControlPath=" + dir + "/%C", suite.lab.User + "@127.0.0.1"}
		got[i] = strings.ReplaceAll(ptyRun(t, "bash", args, d.env()), ssh, "SSH")
	}
	if got[1] != got[0] {
		t.Errorf("through the shim: %q\nwith OpenSSH: %q", got[1], got[0])
	}
	if !strings.Contains(got[0], "job-done") {
		t.Errorf("OpenSSH's job did not finish: %q", got[0])
	}
}

// ptyRun runs name with a new pty as its controlling terminal and returns
// all written there until it and its children have closed it.
func ptyRun(t *testing.T, name string, args, env []string) string {
	t.Helper()
	ptmx, pts, err := pty.Open()
	if err != nil {
		t.Skip("no pty:", err)
	}
	defer ptmx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(cleanEnv(os.Environ()), append([]string{"HOME=" + suite.home, "PATH=" + suite.basePATH}, env...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	out, _ := io.ReadAll(ptmx) // EIO once no one has the terminal open
	_ = cmd.Wait()
	return string(out)
}

// TestProxyCommandTerminalLikeOpenSSH: ssh runs a ProxyCommand as its
// own child, so a bastion reached with "ssh -W" asks its password on the
// caller's terminal, and the command has the caller's umask. The daemon
// started it in its own session: no terminal, the bastion's prompt
// failed ("kex_exchange_identification: Connection closed by remote
// host"), and the daemon's umask. The shim now starts it.
func TestProxyCommandTerminalLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	d := newPrivateDaemon(t)
	for _, persist := range []string{"no", "30s"} {
		t.Run("ControlPersist "+persist, func(t *testing.T) {
			var got, seen [2]string
			for i, ssh := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
				dir := t.TempDir()
				record := filepath.Join(dir, "seen")
				// It records what it has, then is the bastion's "ssh -W",
				// which wants a password.
				proxy := `sh -c 'umask >` + record + `; (: </dev/tty) 2>/dev/null && echo terminal >>` + record +
					`; exec "$0" "$@"' ` + suite.realSSH + ` -F /dev/null -o LogLevel=ERROR -o PubkeyAuthentication=no` +
					` -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -p ` + suite.lab.Port +
					` -W %h:%p ` + suite.lab.PWUser + `@localhost`
				cp := []string{"-F", "/dev/null", "-o", "ControlMaster=auto", "-o", "ControlPath=" + filepath.Join(dir, "cp"),
					"-o", "ControlPersist=" + persist, "-p", suite.lab.Port}
				args := append([]string{"-c", `umask 077; exec "$0" "$@"`, ssh}, cp...)
				args = append(args, "-o", "LogLevel=ERROR", "-i", suite.lab.Key, "-o", "IdentitiesOnly=yes",
					"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ProxyCommand="+proxy,
					suite.lab.User+"@127.0.0.1", "whoami")
				got[i] = ptySSH(t, "/bin/sh", args, d.env(), false, "Password: ", suite.lab.Password)
				b, err := os.ReadFile(record)
				if err != nil {
					t.Fatal(err)
				}
				seen[i] = string(b)
				stop := exec.Command(ssh, append(cp, "-O", "exit", "127.0.0.1")...)
				stop.Env = append(os.Environ(), d.env()...)
				_ = stop.Run()
			}
			if got[1] != got[0] || seen[1] != seen[0] {
				t.Errorf("through the shim: %q, the proxy had %q\nwith OpenSSH: %q, the proxy had %q", got[1], seen[1], got[0], seen[0])
			}
			if seen[0] != "0077\nterminal\n" || !strings.Contains(got[0], suite.lab.User) {
				t.Errorf("OpenSSH's run: %q, the proxy had %q: the case tests nothing", got[0], seen[0])
			}
		})
	}
}
