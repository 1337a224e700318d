package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFreshness runs freshness.yml stock and through the bridge, without
// and with pipelining (sftp; the transfer method does not matter here),
// on 2.14 and the newest ansible-core, and on 2.14 with the csh shell
// plugin (ansible_shell_type=csh, whose module runs start with env): a
// library rewritten between tasks is seen by the next task, as is a
// startup hook (usercustomize.py) that appears and goes, and the file
// module's error paths give stock's results.
func TestFreshness(t *testing.T) {
	requireLab(t)
	tc := corpusCase{name: "freshness", check: checkFreshness, setup: setupFreshness}
	for _, v := range oldestAndNewest() {
		for _, m := range []mode{{false, "sftp"}, {true, "sftp"}} {
			t.Run(v.name+"/"+m.String(), func(t *testing.T) {
				runCompared(t, tc, runSpec{Playbook: tc.name + ".yml", Mode: m, AnsibleBin: v.bin}, nil)
			})
		}
	}
	csh := tc
	csh.setup = func(t *testing.T) map[string]map[string]any {
		hv := setupFreshness(t)
		hv["t"]["ansible_shell_type"] = "csh"
		return hv
	}
	t.Run("csh/"+mode{false, "sftp"}.String(), func(t *testing.T) {
		got, _ := runCompared(t, csh, runSpec{Playbook: tc.name + ".yml", Mode: mode{false, "sftp"}}, nil)
		if !strings.Contains(got.Stderr, "Error deleting remote temporary files") {
			t.Errorf("bridge run: no warning about the csh plugin's rm, which /bin/sh cannot parse (stderr:\n%s)", got.Stderr)
		}
	})
}

// setupFreshness picks the directory ab_zzstate goes to: one the target
// python (this machine's /usr/bin/python3) imports from, outside its
// standard library, and removes what the play leaves there.
func setupFreshness(t *testing.T) map[string]map[string]any {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c",
		`import sys; print([p for p in sys.path if p.startswith("/usr/local/lib/python3") and p.endswith("-packages")][0])`).Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Skipf("no /usr/local site directory on /usr/bin/python3's sys.path (%v)", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Skip(err)
	}
	clean := func() {
		pycs, _ := filepath.Glob(filepath.Join(dir, "__pycache__", "ab_zzstate.*"))
		hooks, _ := filepath.Glob(filepath.Join(dir, "__pycache__", "usercustomize.*"))
		for _, p := range append(append(pycs, hooks...), filepath.Join(dir, "ab_zzstate.py"), filepath.Join(dir, "usercustomize.py"), "/tmp/ab-freshness-hard") {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Errorf("cleanup: %v", err)
			}
		}
	}
	clean()
	t.Cleanup(clean)
	return map[string]map[string]any{"t": {"zz_dir": dir}}
}

func checkFreshness(t *testing.T, r *runResult) {
	wantExit(t, r, 0)
	wantStats(t, r, "t", map[string]int{"failures": 0, "ignored": 4})
	for task, want := range map[string]float64{"sees 1": 1, "sees 22": 22, "sees 333": 333} {
		if v := wantTask(t, r, "t", task, "ok", "")["value"]; v != want {
			t.Errorf("%s run: %s: value %v, want %v", r.Spec.Side, task, v, want)
		}
	}
	for task, want := range map[string]any{"sees 333": nil, "sees the hook": "ran", "sees no hook": nil} {
		if v := wantTask(t, r, "t", task, "ok", "")["hook"]; v != want {
			t.Errorf("%s run: %s: hook %v, want %v", r.Spec.Side, task, v, want)
		}
	}
	// The touch message: 2.14 goes on ": [Errno 2] No such file or
	// directory", 2.22 ends ".".
	for task, msg := range map[string]string{
		"sees none":                     "ab_zzstate not importable",
		"touch in a missing directory":  "Error, could not touch target",
		"state=file on a missing path":  "file (/nonexistent/x) is absent, cannot continue",
		"hard link to a missing source": "src does not exist",
	} {
		if m, _ := wantTask(t, r, "t", task, "failed", "")["msg"].(string); !strings.HasPrefix(m, msg) {
			t.Errorf("%s run: %s: msg %q, want it to start %q", r.Spec.Side, task, m, msg)
		}
	}
}
