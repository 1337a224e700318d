package wire

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
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
