package interp_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
)

func TestFileOps(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	dir := t.TempDir()
	deep := filepath.Join(dir, "a", "b", "c")
	file := filepath.Join(deep, "f.txt")
	steps := []struct {
		name  string
		run   func() error
		check func() error
	}{
		{"mkdir -p", func() error { return c.Mkdir(ctx, deep, 0o751) }, func() error {
			fi, err := os.Stat(deep)
			if err == nil && fi.Mode().Perm() != 0o751 {
				return errors.New("mode " + fi.Mode().String())
			}
			return err
		}},
		{"mkdir existing", func() error { return c.Mkdir(ctx, deep, 0o700) }, nil},
		{"put", func() error { return c.PutFile(ctx, file, []byte("hello\x00world"), 0o640) }, func() error {
			b, err := os.ReadFile(file)
			if err == nil && string(b) != "hello\x00world" {
				return errors.New("content " + string(b))
			}
			ents, _ := os.ReadDir(deep)
			if len(ents) != 1 {
				return errors.New("temp files left behind")
			}
			return err
		}},
		{"get", func() error {
			b, err := c.GetFile(ctx, file)
			if err == nil && string(b) != "hello\x00world" {
				return errors.New("content " + string(b))
			}
			return err
		}, nil},
		{"stat", func() error {
			fi, err := c.Stat(ctx, file)
			if err != nil {
				return err
			}
			if fi.Size() != 11 || fi.Mode() != 0o640 || fi.IsDir() || fi.Name() != "f.txt" {
				return errors.New("stat " + fi.Mode().String())
			}
			return nil
		}, nil},
		{"chmod", func() error { return c.Chmod(ctx, file, 0o600) }, func() error {
			fi, err := os.Stat(file)
			if err == nil && fi.Mode().Perm() != 0o600 {
				return errors.New("mode " + fi.Mode().String())
			}
			return err
		}},
		{"stat dir", func() error {
			fi, err := c.Stat(ctx, deep)
			if err == nil && !fi.IsDir() {
				return errors.New("not a dir")
			}
			return err
		}, nil},
		{"remove tree", func() error { return c.RemoveAll(ctx, filepath.Join(dir, "a")) }, func() error {
			if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, fs.ErrNotExist) {
				return errors.New("still there")
			}
			return nil
		}},
		{"remove missing", func() error { return c.RemoveAll(ctx, filepath.Join(dir, "a")) }, nil},
		{"stat missing", func() error {
			_, err := c.Stat(ctx, file)
			if !errors.Is(err, fs.ErrNotExist) {
				return errors.New("want ErrNotExist, got " + errString(err))
			}
			return nil
		}, nil},
		{"get missing", func() error {
			_, err := c.GetFile(ctx, file)
			var pe *fs.PathError
			if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != file {
				return errors.New("want a PathError with ErrNotExist, got " + errString(err))
			}
			return nil
		}, nil},
		{"put into missing dir", func() error {
			if err := c.PutFile(ctx, file, nil, 0o600); !errors.Is(err, fs.ErrNotExist) {
				return errors.New("want ErrNotExist, got " + errString(err))
			}
			return nil
		}, nil},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if s.check != nil {
			if err := s.check(); err != nil {
				t.Fatalf("%s: check: %v", s.name, err)
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

func TestExec(t *testing.T) {
	dir := t.TempDir()
	c := startAgent(t, agentEnv{Dir: dir})
	big := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
	for _, tc := range []struct {
		name      string
		req       interp.ExecRequest
		code      int
		out, errs string
	}{
		{"echo", interp.ExecRequest{Command: "echo hi; echo err >&2"}, 0, "hi\n", "err\n"},
		{"exit code", interp.ExecRequest{Command: "exit 42"}, 42, "", ""},
		{"env", interp.ExecRequest{Command: `printf %s "$AB_X"`, Env: map[string]string{"AB_X": "y z"}}, 0, "y z", ""},
		{"cwd", interp.ExecRequest{Command: "pwd"}, 0, dir + "\n", ""},
		{"stdin", interp.ExecRequest{Command: "cat", Stdin: strings.NewReader(big)}, 0, big, ""},
		{"no stdin", interp.ExecRequest{Command: "cat"}, 0, "", ""},
		{"signal", interp.ExecRequest{Command: "kill -9 $$"}, 128 + 9, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var so, se bytes.Buffer
			tc.req.Stdout, tc.req.Stderr = &so, &se
			code, err := c.Exec(ctxT(t, 30*time.Second), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || so.String() != tc.out || se.String() != tc.errs {
				t.Fatalf("exit %d stdout %.100q stderr %q; want %d %.100q %q", code, so.String(), se.String(), tc.code, tc.out, tc.errs)
			}
		})
	}
}

// TestExecCancel: ending ctx kills the command's process group.
func TestExecCancel(t *testing.T) {
	dir := t.TempDir()
	c := startAgent(t, agentEnv{Dir: dir})
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var so bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, interp.ExecRequest{Command: "sleep 60 & echo $! > " + pidFile + "; echo started; wait", Stdout: &so})
		done <- err
	}()
	// Wait until the command runs: poll the agent (not a sleep).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.Stat(ctxT(t, 5*time.Second), pidFile); err == nil {
			b, _ := os.ReadFile(pidFile)
			if len(b) > 0 && b[len(b)-1] == '\n' {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("command did not start")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec after cancel: %v", err)
	}
	b, _ := os.ReadFile(pidFile)
	pid := strings.TrimSpace(string(b))
	// The agent handles the cancel before this ping's answer.
	if err := c.Ping(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			return // gone (or a zombie waiting for init)
		}
		if err := c.Ping(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("sleep %s survived the cancel", pid)
}

// TestRemoveAllNoWait: the removal gets no answer, yet a request sent
// after it finds the path gone, and a failure costs nothing but a log line.
func TestRemoveAllNoWait(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	dir := filepath.Join(t.TempDir(), "ansible-tmp-1")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	before := c.Stats()
	if err := c.RemoveAllNoWait(dir); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveAllNoWait("/proc/1/status"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat after RemoveAllNoWait: %v, want not exist", err)
	}
	if got := c.Stats().InFlight; got != 0 {
		t.Fatalf("%d requests still in flight", got)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("agent unwell after a failed removal: %v", err)
	}
	if after := c.Stats(); after.Requests != before.Requests+4 {
		t.Fatalf("requests %d → %d", before.Requests, after.Requests)
	}
}
