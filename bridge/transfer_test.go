package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
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
		{"rename g", "You must specify two paths after a rename command."},
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

// TestTransferServedSet: the bridge copies a plain file onto a new file
// or over an existing regular one, written in place as OpenSSH writes it
// (through a symlink, keeping hard links and the mode); every other copy
// goes back to the real tool, over the bridge's connection.
func TestTransferServedSet(t *testing.T) {
	h := newHarness(t, 0)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(dir, "tree")
	if err := os.Mkdir(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, []byte("old content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(old, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(old, filepath.Join(dir, "hard")); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}

	// Served: in place through the symlink, the hard link seeing it too,
	// mode kept; both ways.
	for _, args := range [][]string{
		{src, "127.0.0.1:" + filepath.Join(dir, "link")},
		{"127.0.0.1:" + src, filepath.Join(dir, "hard")},
	} {
		if err := os.WriteFile(old, []byte("old content\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := h.run("scp", h.sshArgs(args...), ""); r.code != 0 || r.fallback != "" {
			t.Fatalf("scp %v: %+v", args, r)
		}
		assertFile(t, old, []byte("new\n"), 0o600)
		if l, err := os.Readlink(filepath.Join(dir, "link")); err != nil || l != old {
			t.Fatalf("the symlink was replaced: %q %v", l, err)
		}
		assertFile(t, filepath.Join(dir, "hard"), []byte("new\n"), 0o600)
	}
	// Served: a new file, in a directory named as the destination.
	if r := h.run("scp", h.sshArgs(src, "127.0.0.1:"+tree+"/"), ""); r.code != 0 || r.fallback != "" {
		t.Fatalf("scp into a directory: %+v", r)
	}
	assertFile(t, filepath.Join(tree, "src"), []byte("new\n"), 0o644)

	for _, tc := range []struct {
		name   string
		args   []string
		reason string
	}{
		{"-r", []string{"-r", tree, "127.0.0.1:" + dir + "/up"}, "scp -r"},
		{"-p", []string{"-p", src, "127.0.0.1:" + dir + "/p"}, "scp -p"},
		{"-O", []string{"-O", src, "127.0.0.1:" + dir + "/o"}, "scp -O"},
		{"-l", []string{"-l", "100", src, "127.0.0.1:" + dir + "/l"}, "scp -l"},
		{"several sources", []string{src, old, "127.0.0.1:" + tree}, "scp: several sources"},
		{"a local directory", []string{tree, "127.0.0.1:" + dir + "/d"}, "scp: a local source that is not a regular file"},
		{"a remote directory", []string{"127.0.0.1:" + tree, dir + "/d"}, "scp: a remote source that is not a regular file"},
		{"a missing directory", []string{src, "127.0.0.1:" + dir + "/no/such"}, "scp: a destination whose directory is not there"},
		{"a slash on a file", []string{src, "127.0.0.1:" + old + "/"}, "scp: a destination ending in / that is not a directory"},
		{"a fifo", []string{src, "127.0.0.1:" + fifo}, "scp: a destination that is not a regular file"},
		{"a local fifo", []string{"127.0.0.1:" + src, fifo}, "scp: a local destination that is not a regular file"},
		// Names that mean the opener's own files; a new one, so that a
		// regression writes nothing that matters.
		{"a local path in /dev", []string{"127.0.0.1:" + src, "/dev/shm/ansible-bridge-test-" + filepath.Base(dir)}, "scp: a local path in /dev"},
		{"the shim's stdout", []string{"127.0.0.1:" + src, "/proc/self/fd/1"}, "scp: a local path in /proc"},
		{"~user", []string{src, "127.0.0.1:~root/x"}, "scp: a remote path starting with ~"},
		{"a remote glob", []string{"127.0.0.1:" + dir + "/s*", tree}, "scp: a remote glob"},
	} {
		if r := h.run("scp", h.sshArgs(tc.args...), ""); r.fallback != tc.reason || !r.via {
			t.Errorf("%s: %+v, want it handed back: %q", tc.name, r, tc.reason)
		}
	}
	for _, tc := range []struct{ opts, batch, reason string }{
		{"-a", "get " + src + " " + dir + "/a\n", "sftp -a"},
		{"-N", "get " + src + " " + dir + "/n\n", "sftp -N"},
		{"", "reget " + src + " " + old + "\n", `sftp: the batch command "reget"`},
		{"", "put -p " + src + " " + dir + "/p\n", "sftp: put -p"},
		{"", "get " + dir + "\n", "sftp: get a remote source that is not a regular file"},
		{"", "put " + src + " ~/x\n", "sftp: put a remote path starting with ~"}, // sftp takes it as a name
	} {
		// Options are read before stdin, which the real sftp then reads;
		// a batch read is handed back.
		args, replay := []string{"-b", "-"}, tc.batch
		if tc.opts != "" {
			args, replay = append(args, tc.opts), ""
		}
		if r := h.run("sftp", append(args, h.sshArgs("127.0.0.1")...), tc.batch); r.fallback != tc.reason || r.replay != replay || !r.via {
			t.Errorf("sftp %s %q: %+v, want it handed back: %q", tc.opts, tc.batch, r, tc.reason)
		}
	}
	// A source that is not there, the tool's words, served.
	missing := filepath.Join(dir, "missing")
	if r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "get "+missing+" "+dir+"/m\n"); r.code != 1 || r.fallback != "" ||
		r.stderr != "File \""+missing+"\" not found.\r\n" {
		t.Errorf("sftp get of a missing file: %+v", r)
	}
	if r := h.run("scp", h.sshArgs("127.0.0.1:"+missing, dir+"/m"), ""); r.code != 1 || r.fallback != "" ||
		r.stderr != "scp: "+missing+": No such file or directory\r\n" {
		t.Errorf("scp of a missing file: %+v", r)
	}
	if r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1:"+dir)...), "get x\n"); r.fallback != "sftp host:path" {
		t.Errorf("sftp host:path: %+v", r)
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
	// The first made on the target (a base's first), the second held.
	if dirs := src.TempDirs(label); len(dirs) != 2 || !dirs[0].OnTarget || dirs[1].OnTarget {
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

// TestSFTPSignalled: sftp dies of SIGINT while it waits for its batch
// (killchild: exit 1, nothing printed, nothing run), and the daemon says
// so at once, though stdin stays open: the shim waits for that answer.
func TestSFTPSignalled(t *testing.T) {
	h := newHarness(t, 0)
	c := h.accepted("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...))
	if err := wire.Write(c, wire.Stdin, []byte("put ")); err != nil { // half a line, no EOF
		t.Fatal(err)
	}
	if err := wire.Write(c, wire.Signal, []byte("INT")); err != nil {
		t.Fatal(err)
	}
	f, err := wire.Read(c)
	switch {
	case err != nil:
		t.Fatalf("read: %v", err)
	case f.Type != wire.Exit:
		t.Fatalf("frame %q %q before the exit status; sftp prints nothing", f.Type, f.Payload)
	}
	if code, _ := wire.ExitCode(f.Payload); code != 1 {
		t.Fatalf("exit %d, want sftp's 1", code)
	}
}
