package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// SocketEnv overrides the daemon socket path.
const SocketEnv = "ANSIBLE_BRIDGE_SOCKET"

// SocketPath returns the daemon socket path: $ANSIBLE_BRIDGE_SOCKET, else
// $XDG_RUNTIME_DIR/ansible-bridge/bridge.sock, else
// /tmp/ansible-bridge-UID/bridge.sock.
func SocketPath() string {
	if p := os.Getenv(SocketEnv); p != "" {
		return p
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "ansible-bridge", "bridge.sock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("ansible-bridge-%d", os.Getuid()), "bridge.sock")
}

// CheckSocketPath rejects a socket path that is not absolute: the shim
// and the daemon it starts (in /) would resolve it differently.
func CheckSocketPath(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("%s must be an absolute path, not %q", SocketEnv, p)
	}
	return nil
}

// SideFile returns the path of a file that belongs to the daemon serving
// sock (its lock, its log): next to the socket and named after it, so that
// two sockets in one directory have separate daemons, e.g.
// SideFile("/d/bridge.sock", "daemon.log") is "/d/bridge.daemon.log".
func SideFile(sock, name string) string {
	stem := strings.TrimSuffix(filepath.Base(sock), ".sock")
	return filepath.Join(filepath.Dir(sock), stem+"."+name)
}

// ErrUntrusted marks a socket directory or a peer that another user could
// control: nothing may be sent to it or written into it.
var ErrUntrusted = errors.New("untrusted")

// CheckPrivateDir verifies, without following a symlink, that dir is a
// directory owned by uid and closed to everyone else (0700 or stricter).
// Another user who created the directory first, or swapped it for a
// symlink, could otherwise listen on our socket path or plant files.
func CheckPrivateDir(dir string, uid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%w: socket dir %s is a symlink", ErrUntrusted, dir)
	case !ok || !fi.IsDir():
		return fmt.Errorf("%w: socket dir %s is not a directory", ErrUntrusted, dir)
	case int(st.Uid) != uid:
		return fmt.Errorf("%w: socket dir %s is owned by uid %d, not %d", ErrUntrusted, dir, st.Uid, uid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%w: socket dir %s has mode %04o (want 0700)", ErrUntrusted, dir, fi.Mode().Perm())
	}
	return nil
}

// EnsurePrivateDir creates dir (mode 0700, parents as needed) if it does
// not exist, then checks it as CheckPrivateDir does.
func EnsurePrivateDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("create socket dir: %w", err)
	}
	// Mkdir, not MkdirAll: an existing entry (perhaps a symlink someone
	// planted) is never used before the check below.
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create socket dir: %w", err)
	}
	return CheckPrivateDir(dir, os.Getuid())
}

// Dial connects to the daemon socket at path after checking its directory,
// and returns the connection only if the process listening on it runs as
// our uid (SO_PEERCRED): a socket planted by another user gets nothing,
// not even the Hello.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	return dialAs(ctx, path, os.Getuid())
}

func dialAs(ctx context.Context, path string, uid int) (net.Conn, error) {
	if err := CheckSocketPath(path); err != nil {
		return nil, err
	}
	if err := CheckPrivateDir(filepath.Dir(path), uid); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if err := CheckPeer(c, path, uid); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// CheckPeer checks that the daemon's end of c (named name in the error)
// runs as uid: for a dial, and for a connection the C front hands over.
func CheckPeer(c net.Conn, name string, uid int) error {
	peer, err := PeerUID(c)
	if err != nil {
		return fmt.Errorf("check daemon's uid: %w", err)
	}
	if peer != uid {
		return fmt.Errorf("%w: %s is served by uid %d, not %d", ErrUntrusted, name, peer, uid)
	}
	return nil
}

// PeerUID returns the uid of the process at the other end of a unix socket
// connection: for a client, the process that called listen.
func PeerUID(c net.Conn) (int, error) {
	cred, err := peerCred(c)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}

// PeerPID returns the pid, in this process's pid namespace, of the process
// at the other end of a unix socket connection (as of its connect or
// listen); 0 where that process is not visible here.
func PeerPID(c net.Conn) (int, error) {
	cred, err := peerCred(c)
	if err != nil {
		return -1, err
	}
	return int(cred.Pid), nil
}

func peerCred(c net.Conn) (*syscall.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	return cred, nil
}
