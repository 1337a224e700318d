package sshclient

import (
	"os"
	"path/filepath"
	"testing"
)

func TestProcessOwn(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{"to-stdin": "/dev/stdin", "to-file": "key", "to-dir-fd": "/dev", "loop": "loop"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for p, want := range map[string]bool{
		"/dev/stdin": true, "/dev/fd/63": true, "/proc/self/fd/0": true, "/dev/tty": true, "/proc/1/environ": true,
		filepath.Join(dir, "to-stdin"):     true,
		filepath.Join(dir, "to-dir-fd/fd"): true, // a directory's symlink on the way
		filepath.Join(dir, "loop"):         true,
		"/dev/null":                        false,
		file:                               false,
		filepath.Join(dir, "to-file"):      false,
		filepath.Join(dir, "missing"):      false,
	} {
		if got := processOwn(p); got != want {
			t.Errorf("processOwn(%q) = %v, want %v", p, got, want)
		}
	}
}
