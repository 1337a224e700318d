package fakessh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

// DialDaemon connects to the daemon socket at path, starting the daemon if
// none answers. Nothing is sent and no daemon is started unless the socket
// directory is ours and private and the daemon runs as our uid (see
// wire.Dial); an error wrapping wire.ErrUntrusted says which check failed.
// Concurrent shims (Ansible starts one per fork) serialise on a lock file
// so that exactly one of them starts the daemon; the others find it
// running once they get the lock.
func DialDaemon(ctx context.Context, path string) (net.Conn, error) {
	if err := wire.CheckSocketPath(path); err != nil {
		return nil, err
	}
	if err := wire.EnsurePrivateDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	c, err := wire.Dial(ctx, path)
	if err == nil || errors.Is(err, wire.ErrUntrusted) {
		return c, err
	}
	lock, err := os.OpenFile(wire.SideFile(path, "start.lock"), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open start lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if c, err := wire.Dial(ctx, path); err == nil || errors.Is(err, wire.ErrUntrusted) {
		return c, err
	}
	exited, err := startDaemon(path)
	if err != nil {
		return nil, err
	}
	return waitForDaemon(ctx, path, exited)
}

// ShimBinary is the name of the shim-only binary (fakessh/cmd), which
// installs next to the full ansible-bridge binary.
const ShimBinary = "ansible-bridge-shim"

// FrontBinary is the name of the shim's C front (fakessh/front), which
// `ansible-bridge shims` links to when it sits beside ShimBinary: it
// serves the daemon's plain invocations and execs ShimBinary for the rest.
const FrontBinary = "ansible-bridge-front"

// MasterStubEnv, set, makes FrontBinary the process standing for one
// ControlPersist master of the daemon's (bridge/masterstub.go), waiting
// on its socket to the daemon on fd 3.
const MasterStubEnv = "ANSIBLE_BRIDGE_MASTER_STUB"

// DaemonBinary returns the binary that runs the daemon: this one, or for
// the shim-only binary, ansible-bridge in its directory.
func DaemonBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own executable: %w", err)
	}
	if filepath.Base(self) == ShimBinary {
		return filepath.Join(filepath.Dir(self), "ansible-bridge"), nil
	}
	return self, nil
}

// startDaemon launches "ansible-bridge daemon" detached from the shim's
// session, so that it outlives the Ansible step that started it.
func startDaemon(path string) (<-chan error, error) {
	self, err := DaemonBinary()
	if err != nil {
		return nil, err
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	cmd := exec.Command(self, "daemon", "--socket", path, "--detached")
	cmd.Env = append(daemonEnv(os.Environ()), "ANSIBLE_BRIDGE_ARGV0=ansible-bridge")
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

// daemonEnv is the part of the shim's environment the daemon starts
// with. The daemon outlives this run and serves later ones: the rest
// (SSH_AUTH_SOCK, askpass, SendEnv's variables, a run's secrets) travels
// with each invocation instead (wire.HelloMsg.Env).
func daemonEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "HOME", k == "USER", k == "LOGNAME", k == "LANG", k == "TZ",
			k == "XDG_RUNTIME_DIR", k == "TMPDIR",
			strings.HasPrefix(k, "LC_"),
			strings.HasPrefix(k, "ANSIBLE_BRIDGE_"),
			// The Go runtime's knobs (GOMAXPROCS, GOGC, GOMEMLIMIT,
			// GODEBUG, GOTRACEBACK) and coverage (GOCOVERDIR).
			k == "GOMAXPROCS", k == "GOGC", k == "GOMEMLIMIT", k == "GODEBUG", k == "GOTRACEBACK", k == "GOCOVERDIR":
			out = append(out, kv)
		}
	}
	return out
}

// waitForDaemon polls the socket with a growing interval until the daemon
// answers, the daemon process dies, or ctx ends.
func waitForDaemon(ctx context.Context, path string, exited <-chan error) (net.Conn, error) {
	delay := 2 * time.Millisecond
	for {
		c, err := wire.Dial(ctx, path)
		if err == nil || errors.Is(err, wire.ErrUntrusted) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("daemon did not start: %w", ctx.Err())
		case err := <-exited:
			// It may have lost a race to another daemon that now serves.
			if c, derr := wire.Dial(ctx, path); derr == nil {
				return c, nil
			}
			return nil, fmt.Errorf("daemon exited at start: %v", err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}
