package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSFTPBatchFallback: the real sftp runs a batch with any command
// but single-file put and get: a batch file before anything is read, a
// batch on stdin handed back whole for it to read again.
func TestSFTPBatchFallback(t *testing.T) {
	h := newHarness(t, 0)
	dir := t.TempDir()
	for _, tc := range []struct{ batch, reason string }{
		{"ls\n", `sftp: the batch command "ls"`},
		{"put -r d\n", "sftp: put -r"},
		{"get /etc/host* .\n", "sftp: get with a glob"},
		{"df -h .\nbye\n", `sftp: the batch command "df"`},
		{"frobnicate\n", `sftp: the batch command "invalid"`},
	} {
		r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), tc.batch)
		if r.fallback != tc.reason || r.replay != tc.batch || !r.via {
			t.Errorf("%q on stdin: %+v, want fallback %q with the batch handed back", tc.batch, r, tc.reason)
		}
		file := filepath.Join(dir, "batch")
		if err := os.WriteFile(file, []byte(tc.batch), 0o600); err != nil {
			t.Fatal(err)
		}
		r = h.run("sftp", append([]string{"-b", file}, h.sshArgs("127.0.0.1")...), "")
		if r.fallback != tc.reason || r.replay != "" || !r.via {
			t.Errorf("%q in a file: %+v, want fallback %q", tc.batch, r, tc.reason)
		}
	}
	if r := h.run("sftp", append([]string{"-r", "-b", "-"}, h.sshArgs("127.0.0.1")...), "put f\n"); r.fallback != "sftp -r" {
		t.Errorf("sftp -r: %+v", r)
	}
}

// TestSFTPBatchCommands: the batch commands other than put and get, as
// OpenSSH's sftp prints them, in a batch too large to hand back to the
// real sftp (served, and counted as a slow path).
func TestSFTPBatchCommands(t *testing.T) {
	h := newHarness(t, 0)
	dir := t.TempDir()
	local := filepath.Join(dir, "local")
	if err := os.Mkdir(local, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "f"), []byte("data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(dir, "remote")
	batch := strings.Join([]string{
		"# a comment",
		"mkdir " + remote,
		"cd " + remote,
		"pwd",
		"lcd " + local,
		"lpwd",
		"lmkdir sub",
		"put f",
		"rename f g",
		"chmod 640 g",
		"ln -s g s",
		"symlink g s2",
		"ln g h",
		"ls",
		"get g got",
		"rm h",
		"version",
		"progress",
		"mkdir d",
		"rmdir d",
		"bye",
		"pwd",
	}, "\n") + "\n"
	padding := strings.Repeat("#"+strings.Repeat("x", 1000)+"\n", maxReplay/1000+1)
	r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), padding+batch)
	if r.code != 0 {
		t.Fatalf("sftp: %+v", r)
	}
	for _, want := range []string{"Remote working directory: " + remote + "\n", "Local working directory: " + local + "\n", "SFTP protocol version 3\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Count(r.stdout, "Remote working directory") != 1 {
		t.Errorf("the batch went on after bye:\n%s", r.stdout)
	}
	assertFile(t, filepath.Join(remote, "g"), []byte("data\n"), 0o640)
	assertFile(t, filepath.Join(local, "got"), []byte("data\n"), 0o640)
	if l, err := os.Readlink(filepath.Join(remote, "s")); err != nil || l != "g" {
		t.Errorf("symlink s: %q %v", l, err)
	}
	for _, gone := range []string{"h", "d", "f"} {
		if _, err := os.Lstat(filepath.Join(remote, gone)); err == nil {
			t.Errorf("%s is still there", gone)
		}
	}
	if st, err := os.Stat(filepath.Join(local, "sub")); err != nil || !st.IsDir() {
		t.Errorf("lmkdir: %v", err)
	}

	// Errors end the batch with status 1, each worded as sftp words it.
	for _, tc := range []struct{ cmd, stderr string }{
		{"cd /nonexistent", "Can't change directory"},
		{"cd " + filepath.Join(remote, "g"), "is not a directory"},
		{"lcd /nonexistent", "Couldn't change local directory"},
		{"mkdir " + remote, "remote mkdir"},
		{"rmdir /nonexistent", "remote rmdir"},
		{"rm /nonexistent", "Couldn't delete file"},
		{"rename /nonexistent/a /nonexistent/b", "Couldn't rename file"},
		{"chmod 600 /nonexistent", "Couldn't setstat"},
		{"ln /nonexistent/a /nonexistent/b", "Couldn't link file"},
		{"lmkdir " + local, "Couldn't create local directory"},
		{"rename g", "You must specify 2 path(s)"},
		{"frobnicate", "Invalid command."},
		{"ls /nonexistent", "nonexistent"},
	} {
		r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), padding+"cd "+remote+"\n"+tc.cmd+"\n")
		if r.code != 1 || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("%s: %+v, want stderr with %q", tc.cmd, r, tc.stderr)
		}
	}
	if n := h.routes()["sftp"]; n < 2 {
		t.Errorf("routes %v", h.routes())
	}
}

// TestSCPRecursive: scp -r both ways.
func TestSCPRecursive(t *testing.T) {
	h := newHarness(t, 0)
	dir := t.TempDir()
	src := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "f"), []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	up := filepath.Join(dir, "up")
	if r := h.run("scp", h.sshArgs("-r", src, "127.0.0.1:"+up), ""); r.code != 0 {
		t.Fatalf("scp -r up: %+v", r)
	}
	assertFile(t, filepath.Join(up, "sub", "f"), []byte("data\n"), 0o644)
	down := filepath.Join(dir, "down")
	if r := h.run("scp", h.sshArgs("-r", "127.0.0.1:"+up, down), ""); r.code != 0 {
		t.Fatalf("scp -r down: %+v", r)
	}
	assertFile(t, filepath.Join(down, "sub", "f"), []byte("data\n"), 0o644)
	// Without -r a directory is refused, as scp refuses it.
	if r := h.run("scp", h.sshArgs(src, "127.0.0.1:"+up), ""); r.code != 1 || !strings.Contains(r.stderr, "not a regular file") {
		t.Fatalf("scp dir without -r: %+v", r)
	}
	if r := h.run("scp", h.sshArgs("127.0.0.1:"+up, down), ""); r.code != 1 || !strings.Contains(r.stderr, "not a regular file") {
		t.Fatalf("scp remote dir without -r: %+v", r)
	}
	// A remote glob is the real scp's: the server side expands it.
	if r := h.run("scp", h.sshArgs("127.0.0.1:"+up+"/s*", down), ""); r.fallback != "scp: a remote glob" || !r.via {
		t.Fatalf("scp remote glob: %+v", r)
	}
}

// TestCtl: ansible-bridge's own requests (status, status --json, errors)
// and what top and the debug view show of the same state.
func TestCtl(t *testing.T) {
	wrapper := pingWrapper(t)
	h := newHarness(t, 0)
	py := targetPython(t)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", `/bin/sh -c '`+py+` && sleep 0'`), wrapper); r.code != 0 {
		t.Fatalf("module: %+v", r)
	}
	h.learnTransfers()
	base := filepath.Join(t.TempDir(), "tmp")
	h.run("ssh", h.sshArgs("127.0.0.1", ansibleMkdir(base, "ansible-tmp-1")), "")
	h.run("ssh", h.sshArgs("127.0.0.1", ansibleMkdir(base, "ansible-tmp-2")), "")
	r := h.run("ctl", []string{"status", "--json"}, "")
	var st Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Targets) != 1 || len(st.Targets[0].Interpreters) != 1 {
		t.Fatalf("status --json: %v %+v", err, r)
	}
	r = h.run("ctl", []string{"status"}, "")
	if r.code != 0 || !strings.Contains(r.stdout, "module=1") {
		t.Fatalf("status: %+v", r)
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{nil, 2, "empty control request"},
		{[]string{"frobnicate"}, 2, "unknown control request"},
		{[]string{"mount"}, 2, "usage"},
	} {
		if r := h.run("ctl", tc.args, ""); r.code != tc.code || !strings.Contains(r.stderr, tc.err) {
			t.Errorf("ctl %q: %+v", tc.args, r)
		}
	}
	if r := h.run("frobnicate", nil, ""); r.fallback == "" {
		t.Errorf("unknown program: %+v", r)
	}

	var top bytes.Buffer
	RenderTop(&top, h.srv.Status(), 100, time.Now())
	if !strings.Contains(top.String(), st.Targets[0].Target) || !strings.Contains(top.String(), py) {
		t.Errorf("top:\n%s", top.String())
	}

	src := mountSource{h.srv}
	if b, err := src.Status(); err != nil || !json.Valid(b) {
		t.Errorf("debug view status: %v", err)
	}
	if src.Journal() == nil {
		t.Error("debug view: no journal")
	}
	label := st.Targets[0].Target
	if dirs := src.TempDirs(label); len(dirs) != 2 || dirs[0].OnTarget {
		t.Errorf("debug view temp dirs %+v", dirs)
	}
	if src.TempDirs("nobody@nowhere:22") != nil {
		t.Error("temp dirs of an unknown target")
	}
	// Files on the target are read through the interpreter.
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, []byte("remote\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := src.ReadRemote(context.Background(), label, f); err != nil || string(b) != "remote\n" {
		t.Errorf("ReadRemote: %q %v", b, err)
	}
	if _, err := src.ReadRemote(context.Background(), "nobody@nowhere:22", f); err == nil {
		t.Error("ReadRemote of an unknown target")
	}
}
