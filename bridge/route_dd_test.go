package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDDNotSFTPPolicy: sshd's sftp subsystem has a policy of its own
// (here read-only, as `internal-sftp -R`, and a umask other than the login
// shell's, as internal-sftp's) that a shell command's dd does not meet.
// Ansible's piped transfer gives what the real dd gives: content, mode
// under the login shell's umask, dd's own errors, with and without an
// interpreter up; a held temp dir reaches the target with those modes.
func TestDDNotSFTPPolicy(t *testing.T) {
	wrapper := pingWrapper(t)
	py := targetPython(t)
	h := newHarness(t, 0)
	h.ts.sftpReadOnly.Store(true)
	h.ts.loginUmask.Store("077")
	dir := t.TempDir()
	dd := func(dst, data string) result {
		t.Helper()
		return h.run("ssh", h.sshArgs("127.0.0.1", "dd of="+dst+" bs=65536"), data)
	}
	ssh := func(cmd string) result {
		t.Helper()
		return h.run("ssh", h.sshArgs("127.0.0.1", cmd), "")
	}

	// No interpreter up: dd runs in a session, as stock's.
	if r := dd(dir+"/a", "hello\n"); r.code != 0 || !strings.Contains(r.stderr, "records out") {
		t.Fatalf("dd: %+v", r)
	}
	assertFile(t, dir+"/a", []byte("hello\n"), 0o600)
	missing := dir + "/none/x"
	if r := dd(missing, "x"); r.code != 1 || !strings.HasPrefix(r.stderr, "dd: failed to open '"+missing+"': No such file or directory") {
		t.Fatalf("dd into a missing dir: %+v", r)
	}

	// A held temp dir, no interpreter up: the read-only sftp cannot
	// write it to the target, the login user's commands do.
	base0 := filepath.Join(dir, "tmp0")
	if r := ssh(ansibleMkdir(base0, "ansible-tmp-1")); r.code != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	if r := dd(base0+"/ansible-tmp-1/AnsiballZ_x.py", "pass\n"); r.code != 0 {
		t.Fatalf("dd into the temp dir: %+v", r)
	}
	held0 := base0 + "/ansible-tmp-2"
	if r := ssh(ansibleMkdir(base0, "ansible-tmp-2")); r.code != 0 {
		t.Fatalf("held mkdir: %+v", r)
	}
	if _, err := os.Stat(held0); err == nil {
		t.Fatal("the held dir is on the target")
	}
	if r := dd(held0+"/AnsiballZ_y.py", "pass\n"); r.code != 0 {
		t.Fatalf("dd into the held dir: %+v", r)
	}
	assertFile(t, held0+"/AnsiballZ_y.py", []byte("pass\n"), 0o600)
	if fi, err := os.Stat(held0); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v %v, want a 0700 dir", held0, fi, err)
	}

	// With the login user's interpreter up, it runs the dd: no session.
	if r := h.run("ssh", h.sshArgs("127.0.0.1", `/bin/sh -c '`+py+` && sleep 0'`), wrapper); r.code != 0 {
		t.Fatalf("ping: %+v", r)
	}
	execs := h.ts.execs.Load()
	if r := dd(dir+"/b", "world\n"); r.code != 0 || !strings.Contains(r.stderr, "6 bytes copied") {
		t.Fatalf("dd in the interpreter: %+v", r)
	}
	assertFile(t, dir+"/b", []byte("world\n"), 0o600)
	// An existing file keeps its mode: dd truncates it.
	if err := os.WriteFile(dir+"/c", []byte("old content\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if r := dd(dir+"/c", "new\n"); r.code != 0 {
		t.Fatalf("dd over a file: %+v", r)
	}
	assertFile(t, dir+"/c", []byte("new\n"), 0o640)
	if r := dd(missing, "x"); r.code != 1 || !strings.HasPrefix(r.stderr, "dd: failed to open '"+missing+"': No such file or directory") {
		t.Fatalf("dd in the interpreter into a missing dir: %+v", r)
	}

	// A held temp dir (the first under a base is made on the target, and
	// an upload into it teaches that uploads come through the bridge) is
	// written by the interpreter, with dd's mode under the login umask.
	base := filepath.Join(dir, ".ansible", "tmp")
	if r := ssh(ansibleMkdir(base, "ansible-tmp-1")); r.code != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	if r := dd(base+"/ansible-tmp-1/AnsiballZ_x.py", "pass\n"); r.code != 0 {
		t.Fatalf("dd into the temp dir: %+v", r)
	}
	held := base + "/ansible-tmp-2"
	if r := ssh(ansibleMkdir(base, "ansible-tmp-2")); r.code != 0 {
		t.Fatalf("held mkdir: %+v", r)
	}
	if r := dd(held+"/AnsiballZ_y.py", "print('hi')\n"); r.code != 0 || !strings.Contains(r.stderr, "records out") {
		t.Fatalf("dd into the held dir: %+v", r)
	}
	if _, err := os.Stat(held); err == nil {
		t.Fatal("the held dir is on the target")
	}
	if r := ssh("cat " + held + "/AnsiballZ_y.py"); r.code != 0 || r.stdout != "print('hi')\n" {
		t.Fatalf("cat of the held file: %+v", r)
	}
	assertFile(t, held+"/AnsiballZ_y.py", []byte("print('hi')\n"), 0o600)
	if fi, err := os.Stat(held); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v %v, want a 0700 dir", held, fi, err)
	}

	if n := h.ts.execs.Load() - execs; n != 2 {
		t.Errorf("%d execs after the interpreter started, want 2 (the first mkdir, cat)", n)
	}
	if n := h.routes()[routeDD]; n != 5 {
		t.Errorf("routes %v, want dd=5", h.routes())
	}
	st := h.srv.Status()
	if n := st.Targets[0].Slow[slowDDNoInterpreter]; n != 4 {
		t.Errorf("status slow %v: want the 4 dd runs without an interpreter counted", st.Targets[0].Slow)
	}
	if n := st.Targets[0].Slow[slowHeldBySession]; n != 1 {
		t.Errorf("status slow %v: want the held dir written by commands counted", st.Targets[0].Slow)
	}
}

// TestReadOnlySFTPNotHeld: once the target's sftp has refused an upload
// into a temp dir Ansible made there (read-only, as `internal-sftp -R`),
// no temp dir is held in memory, where sftp and scp uploads would
// succeed: they fail as stock's, and Ansible's smart transfer falls back
// to dd as it does with stock.
func TestReadOnlySFTPNotHeld(t *testing.T) {
	h := newHarness(t, 0)
	h.ts.sftpReadOnly.Store(true)
	base := filepath.Join(t.TempDir(), ".ansible", "tmp")
	local := filepath.Join(t.TempDir(), "AnsiballZ_x.py")
	if err := os.WriteFile(local, []byte("pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"ansible-tmp-1", "ansible-tmp-2"} {
		dir := base + "/" + name
		if r := h.run("ssh", h.sshArgs("127.0.0.1", ansibleMkdir(base, name)), ""); r.code != 0 {
			t.Fatalf("mkdir %d: %+v", i, r)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("mkdir %d: held, not on the target: %v", i, err)
		}
		r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "put "+local+" "+dir+"/AnsiballZ_x.py\n")
		if r.code != 1 || !strings.Contains(r.stderr, "Permission denied") {
			t.Fatalf("put %d: %+v", i, r)
		}
		// What Ansible's smart transfer falls back to.
		if r := h.run("ssh", h.sshArgs("127.0.0.1", "dd of="+dir+"/AnsiballZ_x.py bs=65536"), "pass\n"); r.code != 0 {
			t.Fatalf("dd %d: %+v", i, r)
		}
	}
	// An upload a writable sftp takes into such a dir is no refusal
	// (another connection: sftp starts once per connection).
	h.ts.sftpReadOnly.Store(false)
	cp := filepath.Join(t.TempDir(), "cp")
	if r := h.run("ssh", h.sshArgsAt(cp, "127.0.0.1", ansibleMkdir(base, "ansible-tmp-3")), ""); r.code != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgsAt(cp, "127.0.0.1")...), "put "+local+" "+base+"/ansible-tmp-3/AnsiballZ_y.py\n")
	if r.code != 0 {
		t.Fatalf("writable put: %+v", r)
	}
	assertFile(t, base+"/ansible-tmp-3/AnsiballZ_y.py", []byte("pass\n"), 0o600)
}
