package fakessh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// DialDaemon connects to the daemon socket at path, starting the daemon if
// none answers. Concurrent shims (Ansible starts one per fork) serialise on
// a lock file so that exactly one of them starts the daemon; the others
// find it running once they get the lock.
func DialDaemon(ctx context.Context, path string) (net.Conn, error) {
	if c, err := dialUnix(ctx, path); err == nil {
		return c, nil
	}
	dir := filepath.Dir(path)
	if err := EnsurePrivateDir(dir); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "start.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open start lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if c, err := dialUnix(ctx, path); err == nil {
		return c, nil
	}
	exited, err := startDaemon(path)
	if err != nil {
		return nil, err
	}
	return waitForDaemon(ctx, path, exited)
}

func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// startDaemon launches "ansible-bridge daemon" detached from the shim's
// session, so that it outlives the Ansible step that started it.
func startDaemon(path string) (<-chan error, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	cmd := exec.Command(self, "daemon", "--socket", path, "--detached")
	cmd.Env = append(os.Environ(), "ANSIBLE_BRIDGE_ARGV0=ansible-bridge")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited, nil
}

// waitForDaemon polls the socket with a growing interval until the daemon
// answers, the daemon process dies, or ctx ends.
func waitForDaemon(ctx context.Context, path string, exited <-chan error) (net.Conn, error) {
	delay := 2 * time.Millisecond
	for {
		if c, err := dialUnix(ctx, path); err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("daemon did not start: %w", ctx.Err())
		case err := <-exited:
			// It may have lost a race to another daemon that now serves.
			if c, derr := dialUnix(ctx, path); derr == nil {
				return c, nil
			}
			return nil, fmt.Errorf("daemon exited at start: %v", err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}

// EnsurePrivateDir creates dir with mode 0700 if needed and refuses one
// that is not owned by us or is open to others.
func EnsurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create socket dir: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() {
		return fmt.Errorf("socket dir %s is not a directory", dir)
	}
	if int(st.Uid) != os.Getuid() {
		return fmt.Errorf("socket dir %s is owned by uid %d, not %d", dir, st.Uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return errors.New("socket dir " + dir + " is accessible by others (want 0700)")
	}
	return nil
}
