package fakessh_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"github.com/ansible-bridge/ansible-bridge/internal/cbuild"
)

// frontLab is the C front and the Go shim built side by side (as make
// build puts them), ssh/scp/sftp links to the front, and a socket the
// test answers as the daemon would.
type frontLab struct {
	bin  string // the links' directory
	ln   *net.UnixListener
	sock string
	env  []string
}

func newFrontLab(t *testing.T) *frontLab {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc): the front is not built here")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := cbuild.Build(ctx, root, cbuild.Front, filepath.Join(bin, fakessh.FrontBinary)); err != nil {
		t.Fatal(err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, fakessh.ShimBinary), "./fakessh/cmd/ansible-bridge-shim")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{"ssh", "scp", "sftp"} {
		if err := os.Symlink(fakessh.FrontBinary, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	sockDir := filepath.Join(dir, "run")
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "bridge.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir, wire.SocketEnv + "=" + sock, "SSH_ASKPASS_REQUIRE=never"}
	return &frontLab{bin: bin, ln: ln, sock: sock, env: env}
}

// run starts prog with argv and extra environment, stdin from in.
func (l *frontLab) run(t *testing.T, prog string, argv []string, env []string, in io.Reader) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(filepath.Join(l.bin, prog), argv...)
	cmd.Env = append(append([]string{}, l.env...), env...)
	cmd.Stdin = in
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out, &errb
}

// accept takes the next connection and its hello.
func (l *frontLab) accept(t *testing.T) (net.Conn, fakessh.Hello) {
	t.Helper()
	if err := l.ln.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	c, err := l.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f, err := wire.Read(c)
	if err != nil || f.Type != wire.Hello {
		t.Fatalf("hello: %v %q", err, f.Type)
	}
	var h fakessh.Hello
	if err := json.Unmarshal(f.Payload, &h); err != nil {
		t.Fatal(err)
	}
	return c, h
}

func send(t *testing.T, c net.Conn, typ wire.Type, p []byte) {
	t.Helper()
	if err := wire.Write(c, typ, p); err != nil {
		t.Fatal(err)
	}
}

// readStdin reads the shim's stdin frames up to their end.
func readStdin(t *testing.T, c net.Conn) []byte {
	t.Helper()
	var got []byte
	for {
		f, err := wire.Read(c)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == wire.StdinEOF {
			return got
		}
		if f.Type != wire.Stdin {
			t.Fatalf("frame %q before stdin's end", f.Type)
		}
		got = append(got, f.Payload...)
	}
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// TestFrontHelloAsGoShim: for the same command line, environment,
// directory and umask, the front's hello, once the daemon parses it,
// equals the Go shim's.
func TestFrontHelloAsGoShim(t *testing.T) {
	l := newFrontLab(t)
	cwd := t.TempDir()
	argv := []string{"-o", "ControlMaster=auto", "-o", "ControlPath=/tmp/cp/%C", "-tt", "abtest@127.0.0.1", `/bin/sh -c 'echo "~" && sleep 0'`}
	weird := []string{"QUOTE=a\"b\\c", "CTRL=x\x01\ty\r\nz", "UTF8=utf-8 é ✓ <>&", "PWD=" + cwd, "EMPTY="}
	// Duplicates too, which os/exec would merge: only the syscall passes them.
	weird = append(weird, "DUP=first", "NOEQUALS", "DUP=second")
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	hellos := map[bool]fakessh.Hello{}
	for _, front := range []bool{true, false} {
		env := append(append([]string{}, l.env...), weird...)
		path := filepath.Join(l.bin, "ssh")
		if !front {
			// The Go shim on its own: what the links pointed to before.
			path = filepath.Join(l.bin, fakessh.ShimBinary)
			env = append(env, "ANSIBLE_BRIDGE_ARGV0=ssh")
		}
		old := syscall.Umask(0o027)
		pid, err := syscall.ForkExec(path, append([]string{"ssh"}, argv...), &syscall.ProcAttr{
			Dir: cwd, Env: env, Files: []uintptr{null.Fd(), null.Fd(), os.Stderr.Fd()},
		})
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		c, h := l.accept(t)
		if h.PID != pid || h.Front != front {
			t.Errorf("front %v: pid %d (want %d), front %v", front, h.PID, pid, h.Front)
		}
		send(t, c, wire.Exit, wire.ExitPayload(0))
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
			t.Fatalf("front %v: %v, exit %d", front, err, ws.ExitStatus())
		}
		if front {
			if reason := h.Parse(); reason != "" {
				t.Fatalf("daemon-side parse: %s", reason)
			}
		}
		// What only the Go shim sets or needs.
		h.PID, h.Front = 0, false
		h.Env = slicesWithout(h.Env, "ANSIBLE_BRIDGE_ARGV0=ssh")
		hellos[front] = h
	}
	a, _ := json.Marshal(hellos[true])
	b, _ := json.Marshal(hellos[false])
	if !bytes.Equal(a, b) {
		t.Errorf("the front's hello differs from the Go shim's:\nfront: %s\nGo:    %s", a, b)
	}
	if hellos[true].Umask != 0o027 || hellos[true].Cwd != cwd {
		t.Errorf("umask %o, cwd %q", hellos[true].Umask, hellos[true].Cwd)
	}
}

func slicesWithout(s []string, drop string) []string {
	var out []string
	for _, v := range s {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}

// TestFrontStreams: output, exit status and stdin, piped whole or
// written while the daemon waits, pass as the Go shim passes them.
func TestFrontStreams(t *testing.T) {
	l := newFrontLab(t)
	input := bytes.Repeat([]byte("0123456789abcdef"), 40<<10) // 640 KiB: several frames
	for _, complete := range []bool{true, false} {
		t.Run(fmt.Sprintf("complete=%v", complete), func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd, out, errb := l.run(t, "ssh", []string{"host", "cat"}, nil, r)
			r.Close()
			if complete {
				go func() { _, _ = w.Write(input); w.Close() }()
			}
			c, _ := l.accept(t)
			send(t, c, wire.Accept, nil)
			if !complete {
				go func() { _, _ = w.Write(input); w.Close() }()
			}
			got := readStdin(t, c)
			if !bytes.Equal(got, input) {
				t.Errorf("stdin: %d bytes reached the daemon, want %d", len(got), len(input))
			}
			send(t, c, wire.Stdout, []byte("out\n"))
			send(t, c, wire.Stderr, []byte("err\n"))
			send(t, c, wire.Exit, wire.ExitPayload(3))
			if code := exitCode(t, cmd); code != 3 || out.String() != "out\n" || errb.String() != "err\n" {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errb)
			}
		})
	}
}

// TestFrontSignal: after the daemon accepts, SIGTERM is passed on and
// the front exits 255, as the Go shim and ssh do.
func TestFrontSignal(t *testing.T) {
	l := newFrontLab(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cmd, _, _ := l.run(t, "ssh", []string{"host", "sleep 60"}, nil, r)
	r.Close()
	c, _ := l.accept(t)
	send(t, c, wire.Accept, nil)
	// Stdin read back means the accept, and the signal watch, are done.
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if f, err := wire.Read(c); err != nil || f.Type != wire.Stdin {
		t.Fatalf("%v %q", err, f.Type)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	f, err := wire.Read(c)
	if err != nil || f.Type != wire.Signal || string(f.Payload) != "TERM" {
		t.Errorf("after SIGTERM: %v %q %q", err, f.Type, f.Payload)
	}
	if code := exitCode(t, cmd); code != fakessh.ExitSSHError {
		t.Errorf("exit %d after SIGTERM, want 255", code)
	}
}

// TestFrontLostDaemon: a daemon gone mid-call gives the Go shim's
// message and 255.
func TestFrontLostDaemon(t *testing.T) {
	l := newFrontLab(t)
	cmd, _, errb := l.run(t, "ssh", []string{"host", "true"}, nil, strings.NewReader(""))
	c, _ := l.accept(t)
	c.Close()
	if code := exitCode(t, cmd); code != 255 || errb.String() != "ansible-bridge: ssh: connection to the bridge daemon lost\r\n" {
		t.Errorf("exit %d, stderr %q", code, errb)
	}
}

// TestLostDaemonUnderSession: the daemon gone once it took the session
// on is, to the front and to the Go shim alike, ssh's mux client whose
// master died (mux.c, mux_client_request_session): the daemon's
// "Shared connection to HOST closed." line for a session on a terminal,
// nothing without one, and 255.
func TestLostDaemonUnderSession(t *testing.T) {
	l := newFrontLab(t)
	line := "Shared connection to 127.0.0.1 closed.\r\n"
	for _, bin := range []string{"ssh", fakessh.ShimBinary} {
		for _, want := range []string{line, ""} {
			t.Run(fmt.Sprintf("%s %q", bin, want), func(t *testing.T) {
				// The Go shim runs as ssh, as the front execs it.
				cmd := exec.Command(filepath.Join(l.bin, bin), "-tt", "host", "sleep", "9")
				cmd.Args[0] = "ssh"
				cmd.Env = l.env
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				cmd.Stdin = r
				var errb bytes.Buffer
				cmd.Stderr = &errb
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				r.Close()
				c, _ := l.accept(t)
				send(t, c, wire.Accept, nil)
				if want != "" {
					send(t, c, wire.OnSignal, []byte(want))
				}
				send(t, c, wire.Stdout, []byte("x"))
				c.Close()
				if code := exitCode(t, cmd); code != 255 || errb.String() != want {
					t.Errorf("exit %d, stderr %q, want 255 and %q", code, errb.String(), want)
				}
			})
		}
	}
}

// TestFrontHandsOver: what the front does not serve reaches the Go shim
// with the same command line, and mid-call with the conversation.
func TestFrontHandsOver(t *testing.T) {
	l := newFrontLab(t)
	dir := t.TempDir()
	// The "real" ssh a fallback execs: its arguments, then its stdin.
	real := filepath.Join(dir, "real-ssh")
	if err := os.WriteFile(real, []byte("#!/bin/sh\necho \"real: $*\"\nexec cat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	realEnv := "ANSIBLE_BRIDGE_REAL_SSH=" + real

	t.Run("disabled", func(t *testing.T) {
		cmd, out, _ := l.run(t, "ssh", []string{"host", "true"}, []string{realEnv, fakessh.DisableEnv + "=1"}, strings.NewReader("in"))
		if code := exitCode(t, cmd); code != 0 || out.String() != "real: host true\nin" {
			t.Errorf("exit %d, stdout %q", code, out)
		}
	})

	t.Run("daemon hands over", func(t *testing.T) {
		// -V is OpenSSH's, not the daemon's: the Go shim falls back on
		// its own, before it dials.
		cmd, out, _ := l.run(t, "ssh", []string{"-V"}, []string{realEnv}, strings.NewReader(""))
		c, h := l.accept(t)
		if reason := h.Parse(); reason == "" {
			t.Fatal("ssh -V parsed as served")
		}
		send(t, c, wire.Handover, nil)
		if code := exitCode(t, cmd); code != 0 || out.String() != "real: -V\n" {
			t.Errorf("exit %d, stdout %q", code, out)
		}
	})

	t.Run("prompt", func(t *testing.T) {
		askpass := filepath.Join(dir, "askpass")
		if err := os.WriteFile(askpass, []byte("#!/bin/sh\necho \"secret for $1\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd, out, _ := l.run(t, "ssh", []string{"host", "true"}, []string{"SSH_ASKPASS_REQUIRE=force", "SSH_ASKPASS=" + askpass}, strings.NewReader(""))
		c, h := l.accept(t)
		if !h.CanPrompt {
			t.Fatal("can_prompt false with SSH_ASKPASS_REQUIRE=force")
		}
		p, _ := json.Marshal(wire.PromptMsg{Text: "pw: "})
		send(t, c, wire.Prompt, p)
		f, err := wire.Read(c)
		if err != nil || f.Type != wire.PromptReply || string(f.Payload) != "secret for pw: " {
			t.Fatalf("reply: %v %q %q", err, f.Type, f.Payload)
		}
		send(t, c, wire.Stdout, []byte("after\n"))
		send(t, c, wire.Exit, wire.ExitPayload(7))
		if code := exitCode(t, cmd); code != 7 || out.String() != "after\n" {
			t.Errorf("exit %d, stdout %q", code, out)
		}
	})

	t.Run("proxy command", func(t *testing.T) {
		cmd, out, errb := l.run(t, "ssh", []string{"host", "true"}, nil, strings.NewReader(""))
		c, _ := l.accept(t)
		p, _ := json.Marshal(wire.ProxyMsg{Shell: "/bin/sh", Command: `exec sh -c 'echo "$PPID"; echo to-stderr >&2; read line; echo "got $line"; exec sleep 600 2>/dev/null'`})
		send(t, c, wire.ProxyCommand, p)
		f, fds, err := wire.ReadFDs(c.(*net.UnixConn))
		if err != nil || f.Type != wire.ProxyStarted || len(f.Payload) != 4 || len(fds) != 3 {
			t.Fatalf("reply: %v %q %q %v", err, f.Type, f.Payload, fds)
		}
		r, w, pidfd := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w"), fds[2]
		defer r.Close()
		defer w.Close()
		defer syscall.Close(pidfd)
		if _, err := w.WriteString("hello\n"); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewReader(r)
		ppid, _ := lines.ReadString('\n')
		got, _ := lines.ReadString('\n')
		// ssh's child: the shim's (the front became the Go shim in place).
		if want := fmt.Sprintf("%d\n", cmd.Process.Pid); ppid != want || got != "got hello\n" {
			t.Errorf("proxy said %q %q, want parent %q", ppid, got, want)
		}
		send(t, c, wire.Exit, wire.ExitPayload(0))
		if code := exitCode(t, cmd); code != 0 || out.Len() != 0 || errb.String() != "to-stderr\n" {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errb)
		}
		// It outlives the shim (ControlPersist), until the daemon hangs up.
		if err := unix.PidfdSendSignal(pidfd, syscall.SIGHUP, nil, 0); err != nil {
			t.Fatalf("proxy gone with the shim: %v", err)
		}
		if n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, 60_000); n != 1 || err != nil {
			t.Fatalf("proxy still running after SIGHUP: %d %v", n, err)
		}
	})

	t.Run("proxy command exec fails", func(t *testing.T) {
		cmd, _, errb := l.run(t, "ssh", []string{"host", "true"}, nil, strings.NewReader(""))
		c, _ := l.accept(t)
		p, _ := json.Marshal(wire.ProxyMsg{Shell: "/nonexistent/sh", Command: "exec true"})
		send(t, c, wire.ProxyCommand, p)
		f, fds, err := wire.ReadFDs(c.(*net.UnixConn))
		if err != nil || f.Type != wire.ProxyStarted || string(f.Payload) != "\x00\x00\x00\x00" || len(fds) != 2 {
			t.Fatalf("reply: %v %q %q %v", err, f.Type, f.Payload, fds)
		}
		r := os.NewFile(uintptr(fds[0]), "r")
		defer r.Close()
		syscall.Close(fds[1])
		if b, err := io.ReadAll(r); len(b) != 0 || err != nil {
			t.Errorf("proxy output %q, %v; want EOF", b, err)
		}
		send(t, c, wire.Exit, wire.ExitPayload(255))
		// What ssh's child prints (perror) before it exits 1.
		if code := exitCode(t, cmd); code != 255 || errb.String() != "/nonexistent/sh: No such file or directory\n" {
			t.Errorf("exit %d, stderr %q", code, errb)
		}
	})

	t.Run("fallback with the input", func(t *testing.T) {
		cmd, out, _ := l.run(t, "ssh", []string{"host", "cat"}, []string{realEnv}, strings.NewReader("piped input"))
		c, _ := l.accept(t)
		send(t, c, wire.Accept, nil)
		got := readStdin(t, c)
		send(t, c, wire.Replay, got)
		send(t, c, wire.Fallback, []byte("a test's reason"))
		if code := exitCode(t, cmd); code != 0 || out.String() != "real: host cat\npiped input" {
			t.Errorf("exit %d, stdout %q", code, out)
		}
	})
}

// TestFrontTerminal: a terminal that is not the controlling one (what
// Ansible gives ssh for prompts) is described in the hello; a raw
// terminal is left to the Go shim.
func TestFrontTerminal(t *testing.T) {
	l := newFrontLab(t)
	ptmx, pts, err := pty.Open()
	if err != nil {
		t.Skip("no pty:", err)
	}
	defer ptmx.Close()
	defer pts.Close()
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 100}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(l.bin, "ssh"), "-tt", "host", "true")
	cmd.Env = l.env
	cmd.Stdin = pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c, h := l.accept(t)
	if !h.Front || !h.StdinTTY || h.Rows != 40 || h.Cols != 100 {
		t.Errorf("front %v, stdin_tty %v, %dx%d", h.Front, h.StdinTTY, h.Rows, h.Cols)
	}
	send(t, c, wire.Accept, []byte("raw"))
	// The Go shim took it on and set the terminal raw: a key without a
	// line end reaches the daemon.
	if _, err := ptmx.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if f, err := wire.Read(c); err != nil || f.Type != wire.Stdin || string(f.Payload) != "y" {
		t.Fatalf("after a raw accept: %v %q %q", err, f.Type, f.Payload)
	}
	send(t, c, wire.Stdout, []byte("x"))
	send(t, c, wire.Exit, wire.ExitPayload(0))
	if code := exitCode(t, cmd); code != 0 || out.String() != "x" {
		t.Errorf("exit %d, stdout %q", code, out.String())
	}
}

// TestFrontDaemonStopsReading: a daemon that stops taking stdin (its
// command exited) still gets its exit status through, as with the Go
// shim, whose pump just stops.
func TestFrontDaemonStopsReading(t *testing.T) {
	l := newFrontLab(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	go func() { _, _ = w.Write(bytes.Repeat([]byte("y"), 2<<20)) }()
	cmd, out, errb := l.run(t, "ssh", []string{"host", "true"}, nil, r)
	r.Close()
	c, _ := l.accept(t)
	if err := c.(*net.UnixConn).CloseRead(); err != nil {
		t.Fatal(err)
	}
	send(t, c, wire.Accept, nil)
	send(t, c, wire.Stdout, []byte("out"))
	send(t, c, wire.Exit, wire.ExitPayload(5))
	if code := exitCode(t, cmd); code != 5 || out.String() != "out" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
}

// TestWrapperLoop: a wrapper on PATH that runs the shim by its path (the
// shims' directory not on PATH) is what a fallback finds first; run
// again, the shim skips it, so the call ends in the real ssh after it
// with the wrapper run twice, or fails at once, naming the loop, where
// nothing follows. A wrapper that passes other arguments is caught too:
// one that execs the shim as the same call, one that runs it as its
// child once fallbacks nest past maxFallbackDepth. The wrapper refuses
// past 20 runs: a loop fails.
func TestWrapperLoop(t *testing.T) {
	l := newFrontLab(t)
	dir := t.TempDir()
	realDir, wrapDir, childDir := filepath.Join(dir, "real"), filepath.Join(dir, "wrap"), filepath.Join(dir, "child")
	rewriteDir, rewriteChildDir := filepath.Join(dir, "rewrite"), filepath.Join(dir, "rewrite-child")
	count := filepath.Join(dir, "runs")
	// A ProxyCommand's ssh -W: the real ssh runs ssh (the wrapper) as its
	// child, which must be served as any call, not taken for a loop.
	scripts := map[string]string{
		realDir: "#!/bin/sh\necho \"real: $*\"\nif [ \"$1\" = proxy ]; then ssh -W h:22 jump; fi\n",
		wrapDir: fmt.Sprintf("#!/bin/sh\nn=0; [ -f %[1]s ] && read n <%[1]s; n=$((n+1)); echo $n >%[1]s\n"+
			"if [ $n -gt 20 ]; then echo \"wrapper: run $n times: a loop\" >&2; exit 99; fi\nexec %[2]s \"$@\"\n", count, filepath.Join(l.bin, "ssh")),
	}
	// The same wrapper running the shim as its child.
	scripts[childDir] = strings.Replace(scripts[wrapDir], "exec ", "", 1)
	// Both, passing an option more each time.
	scripts[rewriteDir] = strings.Replace(scripts[wrapDir], `"$@"`, `-oBatchMode=yes "$@"`, 1)
	scripts[rewriteChildDir] = strings.Replace(scripts[childDir], `"$@"`, `-oBatchMode=yes "$@"`, 1)
	for d, s := range scripts {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "ssh"), []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := func(dirs ...string) string { return "PATH=" + strings.Join(dirs, string(os.PathListSeparator)) }
	disabled := fakessh.DisableEnv + "=1"
	for _, tc := range []struct {
		name     string
		argv     []string
		env      []string
		handover bool // the daemon hands the call over
		code     int
		stdout   string
		stderr   []string
		runs     string
	}{
		{"ssh -V", []string{"-V"}, []string{path(wrapDir, realDir)}, true, 0, "real: -V\n", nil, "2"},
		{"the wrapper runs the shim", []string{"host", "true"}, []string{path(childDir, realDir), disabled}, false, 0, "real: host true\n", nil, "2"},
		{"ProxyCommand", []string{"proxy"}, []string{path(wrapDir, realDir), disabled}, false, 0, "real: proxy\nreal: -W h:22 jump\n", nil, "4"},
		{"nothing after the wrapper", []string{"-V"}, []string{path(wrapDir), disabled}, false, 255, "",
			[]string{"fallback loop", wrapDir, "ANSIBLE_BRIDGE_REAL_SSH"}, "2"},
		{"ANSIBLE_BRIDGE_REAL_SSH names the wrapper", []string{"-V"}, []string{path(wrapDir, realDir), disabled, "ANSIBLE_BRIDGE_REAL_SSH=" + filepath.Join(wrapDir, "ssh")}, false, 255, "",
			[]string{"fallback loop", "ANSIBLE_BRIDGE_REAL_SSH=" + filepath.Join(wrapDir, "ssh")}, "2"},
		{"a wrapper execs the shim with more arguments", []string{"host", "true"}, []string{path(rewriteDir, realDir), disabled}, false, 0,
			"real: -oBatchMode=yes -oBatchMode=yes host true\n", nil, "2"},
		{"a wrapper runs the shim with more arguments", []string{"host", "true"}, []string{path(rewriteChildDir, realDir), disabled}, false, 255, "",
			[]string{"fallback loop", "9 fallbacks nested", "ANSIBLE_BRIDGE_REAL_SSH"}, "10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.Remove(count); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			// The first directory on the case's PATH holds its wrapper.
			wrapper := filepath.Join(filepath.SplitList(strings.TrimPrefix(tc.env[0], "PATH="))[0], "ssh")
			cmd := exec.Command(wrapper, tc.argv...)
			cmd.Env = append(append([]string{}, l.env...), tc.env...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tc.handover {
				c, _ := l.accept(t)
				send(t, c, wire.Handover, nil)
				defer c.Close()
			}
			code := exitCode(t, cmd)
			if code != tc.code || out.String() != tc.stdout {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q", code, out.String(), errb.String(), tc.code, tc.stdout)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errb.String(), s) {
					t.Errorf("stderr %q does not name %q", errb.String(), s)
				}
			}
			if b, _ := os.ReadFile(count); strings.TrimSpace(string(b)) != tc.runs {
				t.Errorf("the wrapper ran %s times, want %s", strings.TrimSpace(string(b)), tc.runs)
			}
		})
	}
}
