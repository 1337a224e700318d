package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheckPrivateDir(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	private := mk("private", 0o700)
	open := mk("open", 0o777)
	group := mk("group", 0o750)
	link := filepath.Join(base, "link")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	uid := os.Getuid()
	for _, tc := range []struct {
		dir       string
		uid       int
		untrusted bool
	}{
		{private, uid, false},
		{open, uid, true},
		{group, uid, true},
		{link, uid, true},
		{file, uid, true},
		{private, uid + 1, true},
	} {
		err := CheckPrivateDir(tc.dir, tc.uid)
		if got := errors.Is(err, ErrUntrusted); got != tc.untrusted {
			t.Errorf("CheckPrivateDir(%s, %d) = %v, want untrusted=%v", filepath.Base(tc.dir), tc.uid, err, tc.untrusted)
		}
	}
	if err := CheckPrivateDir(filepath.Join(base, "missing"), uid); err == nil || errors.Is(err, ErrUntrusted) {
		t.Errorf("missing dir: %v", err)
	}
}

func TestEnsurePrivateDirRefusesSymlink(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "ab")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := EnsurePrivateDir(link); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("EnsurePrivateDir(symlink) = %v", err)
	}
	fresh := filepath.Join(base, "a", "b")
	if err := EnsurePrivateDir(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o700 {
		t.Errorf("created with %v", fi.Mode())
	}
}

// TestDialChecksPeer: a daemon of our own uid is accepted; the same
// socket is refused when we expect another uid (as it would be if another
// user's process listened on it).
func TestDialChecksPeer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	if err := EnsurePrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bridge.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatalf("Dial own daemon: %v", err)
	}
	c.Close()
	if err := os.Chown(dir, os.Getuid()+1, -1); err != nil {
		t.Skipf("cannot chown (not root): %v", err)
	}
	// The directory check comes first and fails for the other uid's dir;
	// with it given to uid+1, the peer (us) is the mismatch.
	if _, err := dialAs(context.Background(), path, os.Getuid()+1); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "served by uid") {
		t.Fatalf("dial expecting uid+1: %v", err)
	}
}

func TestSideFile(t *testing.T) {
	if got := SideFile("/d/bridge.sock", "daemon.log"); got != "/d/bridge.daemon.log" {
		t.Errorf("got %s", got)
	}
	if SideFile("/d/a.sock", "daemon.lock") == SideFile("/d/b.sock", "daemon.lock") {
		t.Error("two sockets share a lock")
	}
}

func TestFrameWithFDs(t *testing.T) {
	a, b := unixPair(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := Write(a, Signal, []byte("INT")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFDs(a, ProxyStarted, []byte{0, 0, 0, 7}, []int{int(w.Fd())}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	f, fds, err := ReadFDs(b)
	if err != nil || f.Type != Signal || string(f.Payload) != "INT" || len(fds) != 0 {
		t.Fatalf("first frame: %v %q %q %v", err, f.Type, f.Payload, fds)
	}
	f, fds, err = ReadFDs(b)
	if err != nil || f.Type != ProxyStarted || len(f.Payload) != 4 || len(fds) != 1 {
		t.Fatalf("second frame: %v %q %q %v", err, f.Type, f.Payload, fds)
	}
	got := os.NewFile(uintptr(fds[0]), "passed")
	if _, err := got.WriteString("through"); err != nil {
		t.Fatal(err)
	}
	got.Close()
	if b, err := io.ReadAll(r); err != nil || string(b) != "through" {
		t.Fatalf("read %q, %v", b, err)
	}
	a.Close()
	if _, _, err := ReadFDs(b); err != io.EOF {
		t.Fatalf("at the end: %v, want EOF", err)
	}
}

func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}
