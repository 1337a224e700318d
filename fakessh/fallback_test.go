package fakessh

import (
	"errors"
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

// TestFallbackLoopDecision: a shim skips the candidate a fallback ran
// only when that candidate ran the shim again (the same program in the
// fallback's process, or with the same argv in a child of it), not for
// the ssh -W of a ProxyCommand or the ssh an scp runs, which inherit the
// mark.
func TestFallbackLoopDecision(t *testing.T) {
	argv := []string{"-o", "ControlPersist"}
	m := fallbackMark{prog: "ssh", pid: 100, digest: argvDigest(argv), depth: 2, tried: []string{"/w/ssh", "/x y/ssh"}}
	got, ok := parseFallbackMark(m.String())
	if !ok || got.prog != m.prog || got.pid != m.pid || got.digest != m.digest || got.depth != 2 || strings.Join(got.tried, "|") != "/w/ssh|/x y/ssh" {
		t.Fatalf("parseFallbackMark(%q) = %+v, %v", m.String(), got, ok)
	}
	for _, bad := range []string{"", "ssh", "ssh 100 abc", "ssh 100 abc 0", "ssh x abc 0 /w/ssh", "ssh 0 abc 0 /w/ssh",
		"ssh 100 abc 0 ", "ssh 100 abc -1 /w/ssh", "ssh 100 abc /w/ssh"} {
		if _, ok := parseFallbackMark(bad); ok {
			t.Errorf("parseFallbackMark(%q) accepted", bad)
		}
	}
	tests := []struct {
		name      string
		prog      string
		pid, ppid int
		argv      []string
		want      bool
	}{
		{"a wrapper execs the shim", "ssh", 100, 1, argv, true},
		{"a wrapper runs the shim", "ssh", 101, 100, argv, true},
		{"ProxyCommand's ssh -W", "ssh", 101, 100, []string{"-W", "h:22", "jump"}, false},
		{"the ssh the real scp runs", "scp", 101, 100, argv, false},
		{"unrelated", "ssh", 102, 101, argv, false},
		{"a wrapper execs the shim with other arguments", "ssh", 100, 1, []string{"-oControlPersist"}, true},
		{"a wrapper runs the shim with other arguments", "ssh", 101, 100, []string{"-oControlPersist"}, false},
	}
	for _, tc := range tests {
		if got := m.loopedBack(tc.prog, tc.pid, tc.ppid, tc.argv); got != tc.want {
			t.Errorf("%s: loopedBack = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFindRealSkipping: after a loop, the next candidate on PATH; with
// none left, or the override itself looping, an error naming the loop
// and the override.
func TestFindRealSkipping(t *testing.T) {
	root := t.TempDir()
	var dirs []string
	for _, name := range []string{"w1", "w2", "real"} {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "ssh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	w1, w2, real := filepath.Join(dirs[0], "ssh"), filepath.Join(dirs[1], "ssh"), filepath.Join(dirs[2], "ssh")
	t.Setenv("PATH", strings.Join(dirs, string(os.PathListSeparator)))
	t.Setenv("ANSIBLE_BRIDGE_REAL_SSH", "")
	for _, tc := range []struct {
		skip []string
		want string
	}{
		{nil, w1},
		{[]string{w1}, w2},
		{[]string{w1, w2}, real},
		{[]string{filepath.Join(root, "w1", ".", "ssh")}, w2}, // the same file by another name
	} {
		if got, err := findReal("ssh", tc.skip); err != nil || got != tc.want {
			t.Errorf("findReal(skip %q) = %q, %v; want %q", tc.skip, got, err, tc.want)
		}
	}
	_, err := findReal("ssh", []string{w1, w2, real})
	if !errors.Is(err, errLoop) || !strings.Contains(err.Error(), "ANSIBLE_BRIDGE_REAL_SSH") {
		t.Errorf("all looping: %v, want a loop naming ANSIBLE_BRIDGE_REAL_SSH", err)
	}
	t.Setenv("ANSIBLE_BRIDGE_REAL_SSH", w1)
	if got, err := findReal("ssh", []string{w1}); !errors.Is(err, errLoop) || !strings.Contains(err.Error(), "ANSIBLE_BRIDGE_REAL_SSH="+w1) {
		t.Errorf("the override looping: %q, %v; want a loop naming the override", got, err)
	}
}
