package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// testLogger sends logs to t.Log.
func testLogger(t *testing.T) logrus.FieldLogger {
	t.Helper()
	l := logrus.New()
	l.SetOutput(tWriter{t})
	l.SetLevel(logrus.DebugLevel)
	return l
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// pythons lists the Python 3 interpreters on this machine.
func pythons(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"/usr/bin/python3", "/usr/bin/python3.[0-9]*", "/root/.pyenv/versions/*/bin/python3"} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if strings.HasSuffix(p, "-config") {
				continue
			}
			if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 {
		t.Skip("no python3 on this machine")
	}
	return out
}

func start(t *testing.T, r Runner, python string) *interp.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Start(ctx, r, python, testLogger(t))
	if err != nil {
		t.Fatalf("Start(%s): %v", python, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestStartEveryPython(t *testing.T) {
	for _, py := range pythons(t) {
		t.Run(py, func(t *testing.T) {
			t.Parallel()
			c := start(t, LocalRunner{}, py)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			info := c.Info()
			if info.PID == 0 || info.TmpDir == "" || info.Python == "" {
				t.Fatalf("incomplete info %+v", info)
			}
			if fi, err := os.Stat(info.TmpDir); err != nil || !fi.IsDir() {
				t.Fatalf("tmpdir %s: %v %v", info.TmpDir, fi, err)
			}
			t.Logf("python %s pid %d tmp %s rtt %v", info.Python, info.PID, info.TmpDir, c.Stats().LastRTT)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestStartEnvPython(t *testing.T) {
	c := start(t, LocalRunner{}, "/usr/bin/env FOO=bar python3")
	var out strings.Builder
	code, err := c.Exec(context.Background(), interp.ExecRequest{Command: "echo $FOO", Stdout: &out})
	if err != nil || code != 0 || out.String() != "bar\n" {
		t.Fatalf("Exec = %d, %v, %q", code, err, out.String())
	}
}

func TestStartMissingPython(t *testing.T) {
	for _, py := range []string{"/usr/bin/python3-nonexistent", "/nonexistent/bin/python"} {
		t.Run(py, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := Start(ctx, LocalRunner{}, py, testLogger(t))
			if err == nil {
				t.Fatal("Start succeeded")
			}
			if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "not found") || !strings.Contains(err.Error(), py) {
				t.Fatalf("error %q: want ErrFailed naming %s and 'not found'", err, py)
			}
			t.Log(err)
		})
	}
}

func TestCommandIsShellSafe(t *testing.T) {
	for _, py := range []string{"/usr/bin/python3", "/usr/bin/env FOO=bar python3"} {
		cmd := Command(py)
		if strings.ContainsAny(cmd, "\n!$`\\*?[]{}~#&|<>") && !strings.Contains(py, "$") {
			t.Errorf("Command(%q) = %q has shell-special characters", py, cmd)
		}
		if len(cmd) > 1024 {
			t.Errorf("Command(%q) is %d bytes", py, len(cmd))
		}
	}
}

// smallPipeRunner is LocalRunner with a 4 KiB stdin pipe (F_SETPIPE_SZ)
// whose writes are split into chunk-byte pieces, so the first stage sees
// short reads everywhere.
type smallPipeRunner struct{ chunk int }

func (s smallPipeRunner) Start(ctx context.Context, command string) (interp.Conn, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return interp.Conn{}, err
	}
	if _, err := unix.FcntlInt(pw.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
		return interp.Conn{}, fmt.Errorf("F_SETPIPE_SZ: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Stdin = pr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return interp.Conn{}, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return interp.Conn{}, err
	}
	if err := cmd.Start(); err != nil {
		return interp.Conn{}, err
	}
	pr.Close()
	wait := func(ctx context.Context) error {
		stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
		defer stop()
		return cmd.Wait()
	}
	return interp.Conn{Stdin: chunkWriter{pw, s.chunk}, Stdout: stdout, Stderr: stderr, Wait: wait}, nil
}

type chunkWriter struct {
	w     io.WriteCloser
	chunk int
}

func (c chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(c.chunk, len(p))
		m, err := c.w.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

func (c chunkWriter) Close() error { return c.w.Close() }

func TestStartSmallPipe(t *testing.T) {
	if len(Payload()) <= 4096 {
		t.Fatalf("payload is %d bytes: the test needs more than the pipe holds", len(Payload()))
	}
	for _, chunk := range []int{1, 7, 4096} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			for _, py := range pythons(t) {
				c := start(t, smallPipeRunner{chunk: chunk}, py)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := c.Ping(ctx); err != nil {
					t.Fatal(err)
				}
				// Bulk data after the bootstrap goes through the same small pipe.
				big := strings.Repeat("x", 200<<10)
				var out strings.Builder
				code, err := c.Exec(ctx, interp.ExecRequest{Command: "wc -c", Stdin: strings.NewReader(big), Stdout: &out})
				cancel()
				if err != nil || code != 0 || strings.TrimSpace(out.String()) != fmt.Sprint(len(big)) {
					t.Fatalf("%s: wc -c = %d, %v, %q", py, code, err, out.String())
				}
				if chunk == 1 {
					break // one python is enough at 1 byte a write
				}
			}
		})
	}
}

// noisyRunner is LocalRunner behind a login shell that prints a banner
// (and bytes that look like a frame) before running the command.
type noisyRunner struct{ LocalRunner }

func (n noisyRunner) Start(ctx context.Context, command string) (interp.Conn, error) {
	return n.LocalRunner.Start(ctx, `echo "Welcome to the target"; printf '\000\000\000\005\003\000\000\000\000'; echo; `+command)
}

func TestStartSkipsLoginNoise(t *testing.T) {
	c := start(t, noisyRunner{}, "/usr/bin/python3")
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}
