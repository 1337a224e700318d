package bridge

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestListenPerSocket: two sockets in one directory have a lock each, so
// both get a daemon; a second daemon on the same socket is refused.
func TestListenPerSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sock")
	a, err := Listen(filepath.Join(dir, "a.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Listen(filepath.Join(dir, "b.sock"))
	if err != nil {
		t.Fatalf("second socket in the same directory: %v", err)
	}
	defer b.Close()
	if _, err := Listen(filepath.Join(dir, "a.sock")); !errors.Is(err, ErrRunning) {
		t.Fatalf("second daemon on a.sock: %v, want ErrRunning", err)
	}
}
