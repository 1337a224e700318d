package bridge

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
)

// ansibleMkdir is the command Ansible sends to make a task's temp dir.
func ansibleMkdir(base, name string) string {
	dir := base + "/" + name
	return `/bin/sh -c '( umask 77 && mkdir -p "` + "` echo " + base + " `" + `"&& mkdir "` + "` echo " + dir + " `" + `" && echo ` + name + `="` + "` echo " + dir + " `" + `" ) && sleep 0'`
}

func TestHousekeeping(t *testing.T) {
	h := newHarness(t, 0)
	base := filepath.Join(t.TempDir(), ".ansible", "tmp")
	ssh := func(cmd string) result {
		t.Helper()
		return h.run("ssh", h.sshArgs("127.0.0.1", cmd), "")
	}
	execs := func() int32 { return h.ts.execs.Load() }

	// echo ~: the second answer comes from the cache.
	first := ssh(`/bin/sh -c 'echo ~ && sleep 0'`)
	n := execs()
	second := ssh(`/bin/sh -c 'echo ~ && sleep 0'`)
	if first.code != 0 || second != first || execs() != n {
		t.Fatalf("echo ~: first %+v second %+v, execs %d→%d", first, second, n, execs())
	}

	h.learnTransfers()

	// A base that cannot be made: mkdir's own error and status, as stock.
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o600)
	r := ssh(ansibleMkdir(blocker+"/tmp", "ansible-tmp-0"))
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "mkdir: cannot create directory") {
		t.Fatalf("mkdir under a file: %+v", r)
	}

	// The first mkdir under a base runs on the target as Ansible sent it
	// (one exec, modes 0700 as under umask 77): only a mkdir in base
	// tells that the login user may write there. Every later one is held.
	n = execs()
	r = ssh(ansibleMkdir(base, "ansible-tmp-1"))
	if r.code != 0 || r.stdout != "ansible-tmp-1="+base+"/ansible-tmp-1\n" || execs() != n+1 {
		t.Fatalf("first mkdir: %+v (execs %d→%d)", r, n, execs())
	}
	for _, d := range []string{base, base + "/ansible-tmp-1"} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want a 0700 dir", d, fi, err)
		}
	}
	n = execs()
	held := base + "/ansible-tmp-2"
	r = ssh(ansibleMkdir(base, "ansible-tmp-2"))
	if r.code != 0 || r.stdout != "ansible-tmp-2="+held+"\n" || execs() != n {
		t.Fatalf("held mkdir: %+v (execs %d→%d)", r, n, execs())
	}
	if _, err := os.Stat(held); err == nil {
		t.Fatal("held temp dir exists on the target")
	}

	// An upload into the held dir and chmod u+x stay in the bridge.
	local := filepath.Join(t.TempDir(), "wrapper")
	os.WriteFile(local, []byte("print('hi')\n"), 0o600)
	r = h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "put "+local+" "+held+"/AnsiballZ_x.py\n")
	if r.code != 0 {
		t.Fatalf("put: %+v", r)
	}
	r = ssh(`/bin/sh -c 'chmod u+x ` + held + `/ ` + held + `/AnsiballZ_x.py && sleep 0'`)
	if r.code != 0 || execs() != n {
		t.Fatalf("chmod: %+v", r)
	}
	if _, err := os.Stat(held); err == nil {
		t.Fatal("held temp dir written early")
	}

	// A command naming the dir finds it on disk, with the modes Ansible set.
	r = ssh(`/bin/sh -c 'cat ` + held + `/AnsiballZ_x.py && sleep 0'`)
	if r.code != 0 || r.stdout != "print('hi')\n" {
		t.Fatalf("cat after writeWith: %+v", r)
	}
	for p, mode := range map[string]os.FileMode{held: 0o700, held + "/AnsiballZ_x.py": 0o700} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != mode {
			t.Fatalf("%s: %v mode %v, want %o", p, err, fi, mode)
		}
	}

	// rm of a held dir costs nothing; of a written one, it runs.
	held3 := base + "/ansible-tmp-3"
	ssh(ansibleMkdir(base, "ansible-tmp-3"))
	n = execs()
	if r := ssh(`/bin/sh -c 'rm -f -r ` + held3 + `/ > /dev/null 2>&1 && sleep 0'`); r.code != 0 || execs() != n {
		t.Fatalf("rm held: %+v", r)
	}
	if r := ssh(`/bin/sh -c 'rm -f -r ` + held + `/ > /dev/null 2>&1 && sleep 0'`); r.code != 0 || execs() != n+1 {
		t.Fatalf("rm written: %+v", r)
	}
	if _, err := os.Stat(held); err == nil {
		t.Fatal("rm left the dir")
	}

	// With the fast path off, nothing is answered by the bridge.
	n = execs()
	off := h.runEnv("ssh", h.sshArgs("127.0.0.1", `/bin/sh -c 'echo ~ && sleep 0'`), "", FastPathEnv+"=0")
	if off.stdout != first.stdout || execs() != n+1 {
		t.Fatalf("fast path off: %+v", off)
	}
	if strings.TrimSpace(first.stdout) == "" {
		t.Fatalf("echo ~ gave %q", first.stdout)
	}
}

// readThen is a reader that runs then once its data is read, before it
// reports the end: another invocation acting while an upload streams.
type readThen struct {
	r    io.Reader
	then func()
}

func (r *readThen) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err == io.EOF && r.then != nil {
		r.then()
		r.then = nil
	}
	return n, err
}

// TestHoldRacesMaterialize: when a concurrent run's passthrough command
// writes a held dir to the target while an upload into it is still being
// read, the upload goes to the target too (it was kept in memory only,
// and the module run found no file: concurrent runs without pipelining
// failed).
func TestHoldRacesMaterialize(t *testing.T) {
	var h housekeeping
	h.addTemp("/home/u/.ansible/tmp", "/home/u/.ansible/tmp/ansible-tmp-1")
	st, name := h.lookup("/home/u/.ansible/tmp/ansible-tmp-1/AnsiballZ_ping.py")
	if st == nil || name != "AnsiballZ_ping.py" {
		t.Fatalf("lookup: %v %q", st, name)
	}
	upload := &readThen{r: strings.NewReader("wrapper"), then: func() {
		st.mu.Lock()
		st.onTarget = true // as writeWith leaves it
		st.mu.Unlock()
	}}
	held, n, err := st.hold(name, upload, -1, 0o600)
	var read errNotHeld
	if held || !errors.As(err, &read) || string(read.prefix) != "wrapper" || n != 7 {
		t.Fatalf("hold = %v, %d, %v (prefix %q); want not held, with the 7 bytes read to write to the target", held, n, err, read.prefix)
	}
	if _, ok := st.file(name); ok {
		t.Error("the upload is kept in memory of a dir already on the target")
	}
}

// TestMaterializeAfterModuleRun: a held dir that a concurrent module run
// has already made on the target (the interpreter writes the dir it runs
// from) is written there without failing on the existing dir.
func TestMaterializeAfterModuleRun(t *testing.T) {
	h := newHarness(t, 0)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("ssh: %+v", r)
	}
	tg := h.srv.targets.all()[0]
	c, sc, err := tg.useSFTP(context.Background(), nopPrompter{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	base := t.TempDir()
	dir := filepath.Join(base, "ansible-tmp-1")
	tg.house.addTemp(base, dir)
	st, name := tg.house.lookup(filepath.Join(dir, "AnsiballZ_ping.py"))
	if held, _, err := st.hold(name, strings.NewReader("wrapper"), 7, 0o700); !held || err != nil {
		t.Fatalf("hold: %v %v", held, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil { // the module run's
		t.Fatal(err)
	}
	if err := st.writeWith(sftpWriter{sc}); err != nil {
		t.Fatalf("writeWith over the dir a module run made: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != "wrapper" {
		t.Errorf("wrapper on the target: %q, %v", b, err)
	}
}

// TestModuleRunDoesNotDropLaterUpload: a module run writes the held dirs
// it needs; an upload into one of them after the run took what to write
// (by another fork of the same run) must not be dropped when the run marks the dir on the
// target (the other run's chmod then found no file).
func TestModuleRunDoesNotDropLaterUpload(t *testing.T) {
	var h housekeeping
	h.addTemp("/b", "/b/ansible-tmp-2")
	st, _ := h.lookup("/b/ansible-tmp-2/x")
	dirs, files, changes := st.onTargetSpec("")
	if len(dirs) != 1 || len(files) != 0 {
		t.Fatalf("spec of an empty held dir: %v %v", dirs, files)
	}
	if held, _, err := st.hold("AnsiballZ_command.py", strings.NewReader("w"), 1, 0o600); !held || err != nil {
		t.Fatalf("hold: %v %v", held, err)
	}
	st.written(changes)
	st.markOnTarget(changes, true) // the first run's module run is done
	if !st.held() {
		t.Fatal("dir marked on the target though an upload came after the run took it")
	}
	if f, ok := st.file("AnsiballZ_command.py"); !ok || string(f.data) != "w" {
		t.Fatal("the later upload was dropped")
	}
	if !st.chmodUX("AnsiballZ_command.py") {
		t.Error("chmod u+x of the held file not answered")
	}
	_, files, changes = st.onTargetSpec("")
	if len(files) != 1 || files[0].Mode != 0o700 {
		t.Fatalf("next run's spec: %+v", files)
	}
	st.written(changes)
	st.markOnTarget(changes, true)
	if st.held() {
		t.Error("dir still held after a run wrote it as it is")
	}
}

// TestRmWaitsForModuleWrite: a module run that took a held dir to write
// holds back its rm until the agent has written it, not until its module
// ends (an abandoned one, past a task timeout, may run on for ever); the
// dir then counts as written by the agent, so the rm reaches the target
// rather than only memory (it would leave the dir there, unlike stock).
func TestRmWaitsForModuleWrite(t *testing.T) {
	var h housekeeping
	h.addTemp("/b", "/b/ansible-tmp-3")
	st, _ := h.lookup("/b/ansible-tmp-3")
	if err := st.settled(context.Background()); err != nil {
		t.Fatalf("settled with no module run: %v", err)
	}
	_, _, changes := st.onTargetSpec("")
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := st.settled(done); err == nil {
		t.Fatal("settled while a module run is writing the dir")
	}
	if !st.writtenByAgent() {
		t.Error("a dir a module run is writing does not count as written by the agent")
	}
	st.written(changes) // the agent wrote it; the module runs on
	if err := st.settled(done); err != nil {
		t.Fatalf("settled once the dir is written, its module running: %v", err)
	}
	st.markOnTarget(changes, false) // the run failed: maybe written, maybe not
	if !st.held() {
		t.Error("a failed run marked the dir on the target")
	}
}

// TestNeededDirs: a module run writes the held dir its script is in and
// those its parameters name (decoded: \u escapes too), not a concurrent
// run's; parameters it cannot read mean every held dir.
func TestNeededDirs(t *testing.T) {
	wrapper := pingWrapper(t)
	tg := &target{}
	for _, d := range []string{"/b/own", "/b/src", "/b/\u00e9t\u00e9", "/b/other"} {
		tg.house.addTemp("/b", d)
	}
	params := `    ANSIBALLZ_PARAMS = '{"ANSIBLE_MODULE_ARGS": {"src": "/b/src/source", "dest": "/b/\\u00e9t\\u00e9/x", "_ansible_tmpdir": null}}'`
	wrapper = regexp.MustCompile(`(?m)^\s*ANSIBALLZ_PARAMS = '.*$`).ReplaceAllLiteralString(wrapper, params)
	names := func(dirs []*sharedTemp) []string {
		var out []string
		for _, d := range dirs {
			out = append(out, d.dir)
		}
		sort.Strings(out)
		return out
	}
	parse := func(src string) *ansiballz.Wrapper {
		w, err := ansiballz.Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	own, dirs := tg.neededDirs(ansibleCmd{script: "/b/own/AnsiballZ_ping.py"}, parse(wrapper))
	if own == nil || own.dir != "/b/own" {
		t.Errorf("own dir %v", own)
	}
	if got, want := names(dirs), []string{"/b/own", "/b/src", "/b/\u00e9t\u00e9"}; !slices.Equal(got, want) {
		t.Errorf("dirs %q, want %q", got, want)
	}
	_, dirs = tg.neededDirs(ansibleCmd{env: [][2]string{{"X", "/b/other/f"}}}, parse(wrapper))
	if got, want := names(dirs), []string{"/b/other", "/b/src", "/b/\u00e9t\u00e9"}; !slices.Equal(got, want) {
		t.Errorf("piped, with an env value naming a dir: dirs %q, want %q", got, want)
	}
	_, dirs = tg.neededDirs(ansibleCmd{}, parse(strings.Replace(wrapper, "ANSIBALLZ_PARAMS = '{", "ANSIBALLZ_PARAMS = '[", 1)))
	if len(dirs) != 4 {
		t.Errorf("unreadable parameters: %d dirs, want all 4", len(dirs))
	}
}
