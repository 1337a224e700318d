package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// This file holds the checks of the corpus cases that bring their own
// modules or change or need a special target: monkeypatch and
// monkeypatch-at-import (custom modules in corpus/library), environment
// (/etc/environment) and nopython (the lab's chrooted user without python).

// --- monkeypatch ------------------------------------------------------------

// cleanState is what corpus/module_utils/ab_state.py reports for a fresh
// python.
func cleanState() map[string]any {
	return map[string]any{
		"os.getcwd":             float64(0),
		"json.dumps":            float64(0),
		"time.time":             float64(0),
		"time.monotonic":        float64(0),
		"builtins.ab_leak":      nil,
		"json.ab_leak":          nil,
		"AnsibleModule.ab_leak": nil,
		"sys.path leak":         false,
		"os.environ AB_LEAK":    nil,
		"registry":              []any{},
	}
}

// patchedState is what library/ab_patch.py reports after patching, run
// with tag.
func patchedState(tag string) map[string]any {
	s := cleanState()
	for _, k := range []string{"os.getcwd", "json.dumps", "time.time"} {
		s[k] = float64(1)
	}
	for _, k := range []string{"builtins.ab_leak", "json.ab_leak", "AnsibleModule.ab_leak", "os.environ AB_LEAK"} {
		s[k] = tag
	}
	s["sys.path leak"] = true
	s["registry"] = []any{tag}
	return s
}

// importedState is what library/ab_patch_at_import.py's main() should see:
// its own top level run once.
func importedState() map[string]any {
	s := cleanState()
	s["time.monotonic"] = float64(1)
	s["registry"] = []any{"import"}
	return s
}

// wantState fails t unless got (decoded JSON) equals want; what names got,
// hint says what a difference means.
func wantState(t *testing.T, r *runResult, what string, got any, want map[string]any, hint string) {
	t.Helper()
	var diffs []string
	diffValues(what, got, want, &diffs)
	if len(diffs) > 0 {
		t.Errorf("%s run: %s:\n%s\ngot %s", r.Spec.Side, hint, strings.Join(diffs, "\n"), short(got))
	}
}

// loopResults returns the item results of a loop task, wanting n of them.
func loopResults(t *testing.T, r *runResult, task string, n int) []map[string]any {
	t.Helper()
	items := asList(wantTask(t, r, "t", task, "ok", "")["results"])
	if len(items) != n {
		t.Errorf("%s run: %s: %d results, want %d", r.Spec.Side, task, len(items), n)
	}
	var out []map[string]any
	for _, it := range items {
		res, _ := it.(map[string]any)
		out = append(out, res)
	}
	return out
}

func checkMonkeypatch(t *testing.T, r *runResult) {
	wantExit(t, r, 0)
	wantStats(t, r, "t", map[string]int{"failures": 0, "ignored": 0, "unreachable": 0})
	check := func(task string, res map[string]any, tag string) {
		t.Helper()
		wantState(t, r, task+": before", res["before"], cleanState(),
			"ab_patch did not start from a clean python: an earlier task's patches leaked")
		wantState(t, r, task+": after", res["after"], patchedState(tag),
			"ab_patch's own patches are not as expected")
	}
	for task, tag := range map[string]string{
		"patch once":                "first",
		"patch again (same module)": "second",
		"patch under become":        "root",
	} {
		check(task, wantTask(t, r, "t", task, "ok", ""), tag)
	}
	for i, res := range loopResults(t, r, "patch in a loop", 3) {
		tag, _ := res["item"].(string)
		check(fmt.Sprintf("patch in a loop[%d]", i), res, tag)
	}
	for _, task := range []string{"probe (another module)", "probe under become", "probe after the command"} {
		wantState(t, r, task, wantTask(t, r, "t", task, "ok", "")["state"], cleanState(),
			"another module saw the patches ab_patch made")
	}
	wantTask(t, r, "t", "python's own view in a command", "ok", "posix json builtin_function_or_method")
}

func checkMonkeypatchAtImport(t *testing.T, r *runResult) {
	wantExit(t, r, 0)
	wantStats(t, r, "t", map[string]int{"failures": 0, "ignored": 0, "unreachable": 0})
	check := func(task string, res map[string]any) {
		t.Helper()
		wantState(t, r, task+": at_import", res["at_import"], cleanState(),
			"the module's top level did not start from a clean python (a python that imported the module before the task passed its side effects on)")
		wantState(t, r, task+": before", res["before"], importedState(),
			"main() does not see the module's top level run exactly once")
	}
	for _, task := range []string{"patch at import", "patch at import again", "patch at import under become"} {
		check(task, wantTask(t, r, "t", task, "ok", ""))
	}
	for i, res := range loopResults(t, r, "patch at import in a loop", 2) {
		check(fmt.Sprintf("patch at import in a loop[%d]", i), res)
	}
	wantState(t, r, "probe (another module)", wantTask(t, r, "t", "probe (another module)", "ok", "")["state"], cleanState(),
		"another module saw the patches ab_patch_at_import made")
}

// --- environment ------------------------------------------------------------

const etcEnvironment = "/etc/environment"

// probeLine matches the lines environment.yml adds to /etc/environment.
var probeLine = regexp.MustCompile(`(?m)^AB_ENV_PROBE=.*\n?`)

// setupEnvironment backs /etc/environment up (restored by t.Cleanup),
// removes any probe an interrupted run left in it, and gives host t a
// probe value unique to this test and process.
func setupEnvironment(t *testing.T) map[string]map[string]any {
	t.Helper()
	pam, err := os.ReadFile("/etc/pam.d/sshd")
	if err != nil || !pamEnvSession(pam) {
		t.Skipf("/etc/pam.d/sshd has no pam_env session module (%v): sshd does not read %s here", err, etcEnvironment)
	}
	orig, err := os.ReadFile(etcEnvironment)
	existed := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !existed {
			if err := os.Remove(etcEnvironment); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("removing %s: %v", etcEnvironment, err)
			}
			return
		}
		if err := os.WriteFile(etcEnvironment, orig, 0o644); err != nil {
			t.Errorf("restoring %s: %v", etcEnvironment, err)
		}
	})
	if clean := probeLine.ReplaceAll(orig, nil); existed && !bytes.Equal(clean, orig) {
		if err := os.WriteFile(etcEnvironment, clean, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	probe := fmt.Sprintf("ab-%.12s-%d", sha(t.Name()), os.Getpid())
	return map[string]map[string]any{"t": {"env_probe": probe}}
}

// pamEnvSession reports whether a PAM configuration has an active
// pam_env.so session line.
func pamEnvSession(conf []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(conf))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "session" && strings.Contains(sc.Text(), "pam_env.so") {
			return true
		}
	}
	return false
}

func checkEnvironment(t *testing.T, r *runResult) {
	probe, _ := r.Spec.HostVars["t"]["env_probe"].(string)
	if probe == "" {
		t.Fatalf("no env_probe in the host variables")
	}
	unset, seen := "[unset]", "["+probe+"]"
	wantExit(t, r, 0)
	wantStats(t, r, "t", map[string]int{"failures": 0, "unreachable": 0})
	// The login environment of a connection is fixed when it logs in: the
	// new line shows only on a new connection, and sudo drops it.
	wantTask(t, r, "t", "shell on the same connection", "ok", unset)
	wantPrintenv(t, r, "command on the same connection", "")
	wantRaw(t, r, "raw on the same connection", unset)
	wantTask(t, r, "t", "shell with become on the same connection", "ok", unset)
	wantTask(t, r, "t", "shell after reset", "ok", seen)
	wantPrintenv(t, r, "command after reset", probe)
	wantRaw(t, r, "raw after reset", seen)
	wantTask(t, r, "t", "shell with become after reset", "ok", unset)
	wantTask(t, r, "t", "shell after removal, same connection", "ok", seen)
	wantTask(t, r, "t", "shell after the second reset", "ok", unset)
}

// wantPrintenv checks a `command: printenv AB_ENV_PROBE` task (failed_when:
// false): rc 0 with the value, or rc 1 with no output when unset.
func wantPrintenv(t *testing.T, r *runResult, task, value string) {
	t.Helper()
	res := wantTask(t, r, "t", task, "ok", value)
	rc := float64(0)
	if value == "" {
		rc = 1
		if s, _ := res["stdout"].(string); s != "" {
			t.Errorf("%s run: task %q: stdout %q, want none", r.Spec.Side, task, s)
		}
	}
	if res["rc"] != rc {
		t.Errorf("%s run: task %q: rc %v, want %v", r.Spec.Side, task, res["rc"], rc)
	}
}

// wantRaw checks a raw task's stdout, which comes through a terminal (-tt).
func wantRaw(t *testing.T, r *runResult, task, stdout string) {
	t.Helper()
	res := wantTask(t, r, "t", task, "ok", "")
	if s, _ := res["stdout"].(string); s != stdout+"\r\n" {
		t.Errorf("%s run: task %q: stdout %q, want %q", r.Spec.Side, task, s, stdout+"\r\n")
	}
}

// --- nopython ---------------------------------------------------------------

// setupNoPython checks that the lab has its user without python, empties
// that user's home in the chroot, and gives hosts tn and tnd a known_hosts
// file that holds the lab's host key.
//
// The known host key keeps ssh's "Warning: Permanently added ..." notice
// (UserKnownHostsFile=/dev/null, as the other hosts have) out of the
// results: stock prints it on every run's first connection, which here
// lands in the first raw task's stderr, while the bridge prints it only
// when it dials, and it keeps its connection from one run to the next.
func setupNoPython(t *testing.T) map[string]map[string]any {
	t.Helper()
	name := suite.lab.NoPyUser
	u, err := user.Lookup(name)
	if err != nil {
		t.Skipf("lab user %s: %v: the lab predates the target without python; rerun scripts/lab.sh up", name, err)
	}
	root := labChroot(t, name)
	if root == "" {
		t.Skipf("%s has no ChrootDirectory for %s: the lab's sshd predates the target without python; rerun scripts/lab.sh up",
			filepath.Join(suite.lab.Dir, "sshd_config"), name)
	}
	for _, py := range []string{"usr/bin/python3", "usr/bin/python", "usr/local/bin/python3"} {
		if _, err := os.Lstat(filepath.Join(root, py)); err == nil {
			t.Fatalf("the chroot %s has %s", root, py)
		}
	}
	// Each run starts from an empty home, as the output directories do.
	home := filepath.Join(root, u.HomeDir)
	entries, err := os.ReadDir(home)
	if err != nil {
		t.Fatalf("%s's home in the chroot: %v (rerun scripts/lab.sh up)", name, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(home, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	args := "-o UserKnownHostsFile=" + labKnownHosts(t)
	return map[string]map[string]any{
		"tn":  {"ansible_ssh_common_args": args},
		"tnd": {"ansible_ssh_common_args": args},
	}
}

// labChroot returns the ChrootDirectory the lab's sshd_config gives user in
// a `Match User` block, or "".
func labChroot(t *testing.T, user string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(suite.lab.Dir, "sshd_config"))
	if err != nil {
		t.Fatalf("lab sshd_config: %v", err)
	}
	inMatch := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case strings.EqualFold(f[0], "Match"):
			inMatch = len(f) == 3 && strings.EqualFold(f[1], "User") && f[2] == user
		case inMatch && strings.EqualFold(f[0], "ChrootDirectory") && len(f) == 2:
			return f[1]
		}
	}
	return ""
}

// labKnownHosts writes (once per suite) a known_hosts file with the lab's
// host key for [127.0.0.1]:port and returns its path.
func labKnownHosts(t *testing.T) string {
	t.Helper()
	pub, err := os.ReadFile(filepath.Join(suite.lab.Dir, "ssh_host_ed25519_key.pub"))
	if err != nil {
		t.Fatalf("lab host key: %v", err)
	}
	f := strings.Fields(string(pub))
	if len(f) < 2 {
		t.Fatalf("lab host key: cannot parse %q", pub)
	}
	p := filepath.Join(suite.work, "known_hosts")
	line := fmt.Sprintf("[127.0.0.1]:%s %s %s\n", suite.lab.Port, f[0], f[1])
	if err := os.WriteFile(p, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// notFound is how dash, the chroot's /bin/sh, reports the missing python.
func notFound(python string) string {
	return "/bin/sh: 1: " + python + ": not found"
}

// wantModuleFailure checks a module task on a target without python: a
// MODULE FAILURE with the shell's exit status 127 and its message (from
// ansible-core 2.19, "The module interpreter … was not found.").
func wantModuleFailure(t *testing.T, r *runResult, host, task, python string) map[string]any {
	t.Helper()
	res := wantTask(t, r, host, task, "failed", "")
	if res["rc"] != float64(127) {
		t.Errorf("%s run: %s on %s: rc %v, want 127", r.Spec.Side, task, host, res["rc"])
	}
	wantMsg := "The module failed to execute correctly"
	if coreMinor(t, r) >= 19 {
		wantMsg = fmt.Sprintf("The module interpreter '%s' was not found.", python)
	}
	if msg, _ := res["msg"].(string); !strings.HasPrefix(msg, wantMsg) {
		t.Errorf("%s run: %s on %s: msg %q, want %q", r.Spec.Side, task, host, msg, wantMsg)
	}
	out, _ := res["module_stdout"].(string)
	errOut, _ := res["module_stderr"].(string)
	if !strings.Contains(out+errOut, notFound(python)) {
		t.Errorf("%s run: %s on %s: module stdout %q, stderr %q lack %q", r.Spec.Side, task, host, out, errOut, notFound(python))
	}
	return res
}

func checkNoPython(t *testing.T, r *runResult) {
	wantExit(t, r, 0)
	wantStats(t, r, "tn", map[string]int{"failures": 0, "ignored": 3, "unreachable": 0})
	wantStats(t, r, "tnd", map[string]int{"failures": 0, "ignored": 2, "unreachable": 0})
	for _, h := range []string{"tn", "tnd"} {
		wantTask(t, r, h, "raw", "ok", "hi\r\n")
	}
	res := wantTask(t, r, "tn", "raw with a pipe and a non-zero exit", "failed", "")
	if s, _ := res["stdout"].(string); res["rc"] != float64(3) || !strings.HasSuffix(s, "\r\nno-python\r\n") {
		t.Errorf("%s run: raw with a non-zero exit: rc %v, stdout %q; want 3 and the hostname then no-python", r.Spec.Side, res["rc"], s)
	}
	sc := wantTask(t, r, "tn", "script needs no python", "ok", "")
	if s, _ := sc["stdout"].(string); !strings.Contains(s, "arg=[two words]") {
		t.Errorf("%s run: script stdout %q lacks arg=[two words]", r.Spec.Side, s)
	}
	wantModuleFailure(t, r, "tn", "command needs python", "/usr/bin/python3")
	wantModuleFailure(t, r, "tn", "ping needs python", "/usr/bin/python3")
	if s, _ := wantTask(t, r, "tn", "raw after the failures", "ok", "")["stdout"].(string); !strings.HasPrefix(s, "still here\r\n") {
		t.Errorf("%s run: raw after the failures: stdout %q", r.Spec.Side, s)
	}
	// Discovery finds nothing, warns, and falls back to /usr/bin/python
	// (/usr/bin/python3 from 2.17, which dropped Python 2 targets; 2.19
	// also quotes the host).
	fallback, warning := "/usr/bin/python", "No python interpreters found for host tnd"
	if coreMinor(t, r) >= 17 {
		fallback = "/usr/bin/python3"
	}
	if coreMinor(t, r) >= 19 {
		warning = "No python interpreters found for host 'tnd'"
	}
	for _, task := range []string{"ping with discovery", "command after discovery"} {
		res := wantModuleFailure(t, r, "tnd", task, fallback)
		facts, _ := res["ansible_facts"].(map[string]any)
		if p := facts["discovered_interpreter_python"]; p != fallback {
			t.Errorf("%s run: %s: discovered interpreter %v, want %s", r.Spec.Side, task, p, fallback)
		}
	}
	ws := asList(r.event(t, "tnd", "ping with discovery").Result["warnings"])
	if len(ws) != 1 || !strings.HasPrefix(fmt.Sprint(ws[0]), warning) {
		t.Errorf("%s run: ping with discovery: warnings %v, want %q...", r.Spec.Side, ws, warning)
	}
}

// setupStartupEnv writes what startup-env.yml reads: a UTF-8 text file,
// a python module and a library, in a directory every user may read.
func setupStartupEnv(t *testing.T) map[string]map[string]any {
	t.Helper()
	// The same path for both runs: it is in the module's arguments.
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("ab-startenv-%.12s", sha(t.Name())))
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.MkdirAll(filepath.Join(dir, "pp"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A library the loader finds only on LD_LIBRARY_PATH: zlib, renamed.
	zlib, err := os.ReadFile("/lib/x86_64-linux-gnu/libz.so.1")
	if err != nil {
		t.Skipf("no zlib to load: %v", err)
	}
	for name, content := range map[string]string{"utf8.txt": "café\n", "pp/ab_startenv_pp.py": "VALUE = 'from PYTHONPATH'\n", "lib/libabstartenv.so.1": string(zlib)} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return map[string]map[string]any{"t": {"startenv_dir": dir}}
}

// checkStartupEnv: each task saw its environment as a fresh python does.
func checkStartupEnv(t *testing.T, r *runResult) {
	wantExit(t, r, 0)
	wantStats(t, r, "t", map[string]int{"failures": 0, "unreachable": 0})
	for task, want := range map[string]map[string]any{
		"no environment":            {"text": "café\n", "pp": "ModuleNotFoundError", "utf8_mode": float64(0)},
		"LC_ALL=C":                  {"text": "café\n", "utf8_mode": float64(1)},
		"PYTHONPATH":                {"pp": "from PYTHONPATH"},
		"TZ":                        {"tz": "JST"},
		"all three under become":    {"text": "café\n", "pp": "from PYTHONPATH", "tz": "JST", "utf8_mode": float64(1)},
		"no environment after them": {"pp": "ModuleNotFoundError"},
	} {
		res := wantTask(t, r, "t", task, "ok", "")
		for k, v := range want {
			if res[k] != v {
				t.Errorf("%s: %s = %v, want %v", task, k, res[k], v)
			}
		}
	}
}
