package fakessh

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindRealAfterShimDir: the real program is the first on PATH after
// the directory the shim was run from, so that a user's wrapper before
// the shims, which execs the shim by its path, is not run again (a loop),
// and one after them is what the fallback runs.
func TestFindRealAfterShimDir(t *testing.T) {
	root := t.TempDir()
	dir := func(name string) string {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	shims, other, wrap, after, real := dir("shims"), dir("other"), dir("wrap"), dir("after"), dir("real")
	for _, d := range []string{shims, other} {
		if err := os.WriteFile(filepath.Join(d, FrontBinary), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(FrontBinary, filepath.Join(d, "ssh")); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{wrap, after, real} {
		if err := os.WriteFile(filepath.Join(d, "ssh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The shims' directory by another name: a link to it.
	linked := filepath.Join(root, "linked")
	if err := os.Symlink(shims, linked); err != nil {
		t.Fatal(err)
	}
	path := func(dirs ...string) string { return strings.Join(dirs, string(os.PathListSeparator)) }
	tests := []struct {
		name, argv0, path, want string
	}{
		{"wrapper before the shims", filepath.Join(shims, "ssh"), path(wrap, shims, real), filepath.Join(real, "ssh")},
		{"wrapper after the shims", filepath.Join(shims, "ssh"), path(shims, after, real), filepath.Join(after, "ssh")},
		{"wrappers either side", filepath.Join(shims, "ssh"), path(wrap, shims, after, real), filepath.Join(after, "ssh")},
		{"the shims' directory by another name", filepath.Join(linked, "ssh"), path(wrap, shims+"/", real), filepath.Join(real, "ssh")},
		{"on PATH by another name", filepath.Join(shims, "ssh"), path(wrap, linked, real), filepath.Join(real, "ssh")},
		{"bare argv[0]", "ssh", path(wrap, shims, real), filepath.Join(real, "ssh")},
		{"bare argv[0], first shim directory", "ssh", path(wrap, other, after, shims, real), filepath.Join(after, "ssh")},
		{"the daemon", "/usr/local/bin/ansible-bridge", path(wrap, shims, real), filepath.Join(real, "ssh")},
		// ssh_executable naming a shim elsewhere: the whole PATH, as before.
		{"shim directory not on PATH", filepath.Join(other, "ssh"), path(wrap, shims, real), filepath.Join(wrap, "ssh")},
		{"no shims on PATH", "ssh", path(wrap, real), filepath.Join(wrap, "ssh")},
		// PATH=/usr/bin:SHIMS with ssh_executable naming the shim.
		{"nothing after the shims", filepath.Join(shims, "ssh"), path(real, shims), filepath.Join(real, "ssh")},
		{"none at all", filepath.Join(shims, "ssh"), path(shims, other), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindRealIn("ssh", tc.argv0, tc.path)
			if tc.want == "" {
				if err == nil {
					t.Errorf("found %s, want none", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("FindRealIn = %q, %v; want %q", got, err, tc.want)
			}
		})
	}

	t.Run("ANSIBLE_BRIDGE_REAL_SSH", func(t *testing.T) {
		t.Setenv("PATH", path(wrap, shims, real))
		t.Setenv("ANSIBLE_BRIDGE_REAL_SSH", filepath.Join(wrap, "ssh"))
		if got, err := FindReal("ssh"); err != nil || got != filepath.Join(wrap, "ssh") {
			t.Errorf("FindReal = %q, %v; want the override", got, err)
		}
	})
}
