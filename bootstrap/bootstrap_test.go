package bootstrap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/sirupsen/logrus"
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
			if fi, err := os.Stat(info.TmpDir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("tmpdir %s: %v %v", info.TmpDir, fi, err)
			}
			t.Logf("python %s pid %d tmp %s rtt %v", info.Python, info.PID, info.TmpDir, c.Stats().LastRTT)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(info.TmpDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("tmpdir %s still there after Close: %v", info.TmpDir, err)
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
