package bridge

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/journal"
)

// pong is in the output of pingWrapper's module.
const pong = `{"ping": "it's`

// pingWrapper is a real AnsiballZ wrapper (ansible-core 2.14's ping).
func pingWrapper(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	b, err := os.ReadFile(filepath.Join("journal", "testdata", "AnsiballZ_ping.py"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// routes returns the route counts of the harness's one target.
func (h *harness) routes() map[string]int {
	h.t.Helper()
	st := h.srv.Status()
	if len(st.Targets) != 1 {
		h.t.Fatalf("%d targets, want 1", len(st.Targets))
	}
	return st.Targets[0].Routes
}

// TestModuleRoute drives the module route through the daemon as a shim
// would: a pipelined wrapper, then one uploaded into a held temp dir and
// run from there on a terminal (-tt), as Ansible does without pipelining.
// Both run in the target's persistent interpreter: the second costs no
// new exec on the server.
func TestModuleRoute(t *testing.T) {
	wrapper := pingWrapper(t)
	h := newHarness(t, 0)
	py := targetPython(t)
	pipelined := `/bin/sh -c '` + py + ` && sleep 0'`
	r := h.run("ssh", h.sshArgs("127.0.0.1", pipelined), wrapper)
	if r.code != 0 || !strings.Contains(r.stdout, pong) {
		t.Fatalf("pipelined ping: %+v", r)
	}
	if n := h.routes()["module"]; n != 1 {
		t.Fatalf("routes %v, want module=1", h.routes())
	}
	execs := h.ts.execs.Load()
	if r2 := h.run("ssh", h.sshArgs("127.0.0.1", pipelined), wrapper); r2.code != 0 || r2.stdout != r.stdout {
		t.Fatalf("second pipelined ping: %+v", r2)
	}
	if h.ts.execs.Load() != execs {
		t.Errorf("the second module run started %d execs, want none", h.ts.execs.Load()-execs)
	}

	base := filepath.Join(t.TempDir(), ".ansible", "tmp")
	ssh := func(cmd string, extra ...string) result {
		t.Helper()
		return h.run("ssh", h.sshArgs(append(extra, "127.0.0.1", cmd)...), "")
	}
	ssh(ansibleMkdir(base, "ansible-tmp-1"))
	held := base + "/ansible-tmp-1"
	local := filepath.Join(t.TempDir(), "AnsiballZ_ping.py")
	if err := os.WriteFile(local, []byte(wrapper), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := h.run("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "put "+local+" "+held+"/AnsiballZ_ping.py\n"); r.code != 0 {
		t.Fatalf("put: %+v", r)
	}
	ssh(`/bin/sh -c 'chmod u+x ` + held + `/ ` + held + `/AnsiballZ_ping.py && sleep 0'`)
	r = ssh(`/bin/sh -c '`+py+` `+held+`/AnsiballZ_ping.py && sleep 0'`, "-tt")
	if r.code != 0 || !strings.Contains(r.stdout, pong) || !strings.HasSuffix(r.stdout, "\r\n") {
		t.Fatalf("ping from the held dir on a terminal: %+v", r)
	}
	if n := h.routes()["module"]; n != 3 {
		t.Fatalf("routes %v, want module=3", h.routes())
	}
	// The journal shows each run's module and arguments, from the
	// wrapper the route took apart, and a pipelined one's stdin: their
	// values once the run is done, which the journal notes just after
	// the shim has its answer.
	views := h.srv.journal.Snapshot()
	running := func(v journal.EntryView) bool { return !v.Done }
	for deadline := time.Now().Add(10 * time.Second); slices.ContainsFunc(views, running) && time.Now().Before(deadline); views = h.srv.journal.Snapshot() {
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	var modules int
	for _, v := range views {
		if v.Route != routeModule {
			continue
		}
		modules++
		if v.ModuleName != "ansible.modules.ping" || !strings.Contains(string(v.ModuleArgs), `"data": "it's`) || v.NoLog {
			t.Errorf("journal entry %d: module %q args %s no_log %v", v.Seq, v.ModuleName, v.ModuleArgs, v.NoLog)
		}
		if piped := !strings.Contains(strings.Join(v.Argv, " "), "AnsiballZ_ping.py"); piped && (v.Stdin.Size != int64(len(wrapper)) || len(v.Stdin.Data) == 0 || !strings.HasPrefix(wrapper, string(v.Stdin.Data))) {
			t.Errorf("journal entry %d: stdin %d bytes of %d", v.Seq, len(v.Stdin.Data), v.Stdin.Size)
		}
	}
	if modules != 3 {
		t.Errorf("%d module runs in the journal, want 3", modules)
	}
	// The module ran from the dir on the target, as with stock.
	if _, err := os.Stat(held + "/AnsiballZ_ping.py"); err != nil {
		t.Errorf("held wrapper not on the target: %v", err)
	}

	// Python that is no wrapper runs through exec, and is not worth a
	// line in status.
	r = h.run("ssh", h.sshArgs("127.0.0.1", pipelined), "print('not a wrapper')\n")
	if r.code != 0 || r.stdout != "not a wrapper\n" {
		t.Fatalf("plain python on stdin: %+v", r)
	}
	if slow := h.srv.Status().Targets[0].Slow; len(slow) != 0 {
		t.Errorf("slow paths %v after plain python", slow)
	}

	// A wrapper of a format the bridge does not know (a newer
	// ansible-core, say) runs through exec as python would run it, and is
	// counted with the reason, which the daemon logs once per target.
	mutated := strings.Replace(wrapper, "    ZIPDATA = \"\"\"", "    ZIPDATA_V9 = \"\"\"", 1)
	for i := 0; i < 2; i++ {
		execs := h.ts.execs.Load()
		r = h.run("ssh", h.sshArgs("127.0.0.1", pipelined), mutated)
		if r.code != 1 || !strings.Contains(r.stderr, "NameError") || h.ts.execs.Load() != execs+1 {
			t.Fatalf("mutated wrapper: %+v, %d execs", r, h.ts.execs.Load()-execs)
		}
	}
	slow := h.srv.Status().Targets[0].Slow
	if len(slow) != 1 {
		t.Fatalf("slow paths %v, want one reason", slow)
	}
	for reason, n := range slow {
		if n != 2 || !strings.Contains(reason, "unrecognised module wrapper") || !strings.Contains(reason, "no zip literal") {
			t.Errorf("slow path %q counted %d times", reason, n)
		}
	}
	if logged := h.logged("slow path"); logged != 1 {
		t.Errorf("slow path logged %d times, want once", logged)
	}
}

// TestBecomeRoute: a sudo step runs in an interpreter started through
// Ansible's own wrapper once; the next step runs no sudo at all.
func TestBecomeRoute(t *testing.T) {
	wrapper := pingWrapper(t)
	// A sudo that becomes nobody new: it drops its options and runs the
	// command, so that the test needs neither root nor a sudoers rule.
	sudo := filepath.Join(t.TempDir(), "sudo")
	if err := os.WriteFile(sudo, []byte("#!/bin/sh\nwhile [ \"$1\" != /bin/sh ]; do shift; done\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	py := targetPython(t)
	h := newHarness(t, 0)
	cmd := `/bin/sh -c '` + sudo + ` -H -S -n  -u root /bin/sh -c '"'"'echo BECOME-SUCCESS-abcdefghijklmnopqrstuvwxyzabcdef ; ` + py + `'"'"' && sleep 0'`
	for i := 1; i <= 2; i++ {
		execs := h.ts.execs.Load()
		r := h.runStdinAfter("ssh", h.sshArgs("127.0.0.1", cmd), "BECOME-SUCCESS-", wrapper)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "BECOME-SUCCESS-abcdefghijklmnopqrstuvwxyzabcdef\n") || !strings.Contains(r.stdout, pong) {
			t.Fatalf("become step %d: %+v", i, r)
		}
		if n := h.routes()["become"]; n != i {
			t.Fatalf("step %d: routes %v, want become=%d", i, h.routes(), i)
		}
		if i == 2 && h.ts.execs.Load() != execs {
			t.Errorf("the second become step started %d execs, want none", h.ts.execs.Load()-execs)
		}
	}
}

// targetPython is the python the tests' target runs: the system's, not
// a pyenv shim.
func targetPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip(err)
	}
	return p
}

// TestTransfersLearned: a temp dir is held only once an upload into one
// has come through the bridge under the same view of Ansible's
// configuration; until then it is made on the target, and a wrapper
// uploaded through the bridge into it still runs in the interpreter.
func TestTransfersLearned(t *testing.T) {
	wrapper := pingWrapper(t)
	h := newHarness(t, 0)
	py := targetPython(t)
	base := filepath.Join(t.TempDir(), ".ansible", "tmp")
	cfg := filepath.Join(t.TempDir(), "ansible.cfg")
	if err := os.WriteFile(cfg, []byte("[ssh_connection]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "AnsiballZ_ping.py")
	if err := os.WriteFile(local, []byte(wrapper), 0o600); err != nil {
		t.Fatal(err)
	}
	// step is one module step without pipelining: mkdir, upload, run.
	step := func(name string, env ...string) (onTarget bool) {
		t.Helper()
		dir := base + "/" + name
		if r := h.runEnv("ssh", h.sshArgs("127.0.0.1", ansibleMkdir(base, name)), "", env...); r.code != 0 || r.stdout != name+"="+dir+"\n" {
			t.Fatalf("mkdir %s: %+v", name, r)
		}
		_, err := os.Stat(dir)
		onTarget = err == nil
		if r := h.runEnv("sftp", append([]string{"-b", "-"}, h.sshArgs("127.0.0.1")...), "put "+local+" "+dir+"/AnsiballZ_ping.py\n", env...); r.code != 0 {
			t.Fatalf("put: %+v", r)
		}
		before := h.routes()["module"]
		if r := h.runEnv("ssh", h.sshArgs("-tt", "127.0.0.1", `/bin/sh -c '`+py+` `+dir+`/AnsiballZ_ping.py && sleep 0'`), "", env...); r.code != 0 || !strings.Contains(r.stdout, pong) {
			t.Fatalf("ping: %+v", r)
		}
		if h.routes()["module"] != before+1 {
			t.Errorf("%s: routes %v: the module did not run in the interpreter", name, h.routes())
		}
		return onTarget
	}
	withCfg := "ANSIBLE_CONFIG=" + cfg
	for _, tc := range []struct {
		name     string
		env      []string
		onTarget bool
	}{
		{"ansible-tmp-1", nil, true},                // nothing learned yet
		{"ansible-tmp-2", nil, false},               // learned from the upload into 1
		{"ansible-tmp-3", []string{withCfg}, true},  // another configuration
		{"ansible-tmp-4", []string{withCfg}, false}, // learned for it too
		{"ansible-tmp-5", []string{withCfg}, true},  // ansible.cfg edited (below)
	} {
		if tc.name == "ansible-tmp-5" {
			if err := os.WriteFile(cfg, []byte("[ssh_connection]\nsftp_executable = /usr/bin/sftp\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if got := step(tc.name, tc.env...); got != tc.onTarget {
			t.Errorf("%s: made on the target %v, want %v", tc.name, got, tc.onTarget)
		}
	}
	if slow := h.srv.Status().Targets[0].Slow; len(slow) != 0 {
		t.Errorf("slow paths %v", slow)
	}

	// An upload that bypasses the bridge (the real sftp) teaches nothing,
	// and the module, which the bridge never saw, goes to the target and
	// is counted.
	cwd := h.cwd
	h.cwd = t.TempDir()
	t.Cleanup(func() { h.cwd = cwd })
	dir := base + "/ansible-tmp-6"
	if r := h.run("ssh", h.sshArgs("127.0.0.1", ansibleMkdir(base, "ansible-tmp-6")), ""); r.code != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	if err := os.WriteFile(dir+"/AnsiballZ_ping.py", []byte(wrapper), 0o700); err != nil {
		t.Fatalf("the dir is not on the target: %v", err)
	}
	if r := h.run("ssh", h.sshArgs("-tt", "127.0.0.1", `/bin/sh -c '`+py+` `+dir+`/AnsiballZ_ping.py && sleep 0'`), ""); r.code != 0 || !strings.Contains(r.stdout, pong) {
		t.Fatalf("ping: %+v", r)
	}
	slow := h.srv.Status().Targets[0].Slow
	if len(slow) != 1 || slow[slowTransfers] != 1 {
		t.Errorf("slow paths %v, want %q once", slow, slowTransfers)
	}
	if r := h.run("ssh", h.sshArgs("127.0.0.1", ansibleMkdir(base, "ansible-tmp-7")), ""); r.code != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	if _, err := os.Stat(base + "/ansible-tmp-7"); err != nil {
		t.Errorf("learned from an upload the bridge never saw: %v", err)
	}
}
