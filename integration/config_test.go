package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSSHExecutableOnly: the setup the README documents without touching
// PATH, ssh_executable pointing at the shim while Ansible runs the real
// sftp or scp from PATH, gives stock's results with no new warnings: the
// bridge sees that the uploads will not come through it and makes temp
// dirs on the target as Ansible asks.
func TestSSHExecutableOnly(t *testing.T) {
	requireLab(t)
	for _, m := range []mode{{false, "sftp"}, {false, "scp"}} {
		t.Run(m.String(), func(t *testing.T) {
			requireBridge(t)
			spec := runSpec{Playbook: "files.yml", Mode: m, Side: stock}
			want := runPlaybook(t, spec)
			spec.Env = []string{"ANSIBLE_SSH_EXECUTABLE=" + filepath.Join(suite.shims, "ssh")}
			got := runPlaybook(t, spec)
			if m.Transfer != "smart" { // Ansible's default; checkFiles knows the three others
				checkFiles(t, want)
				checkFiles(t, got)
			}
			if strings.Contains(got.Stderr, "transfer mechanism failed") {
				t.Errorf("transfer warnings with ssh_executable only:\n%s", got.Stderr)
			}
			compareRuns(t, got, want)
		})
	}
}

// TestAnsibleCfgExecutables: the README's setup without touching PATH,
// ansible.cfg naming the three shims, gives stock's results with every
// module step in the persistent interpreters, pipelining on or off: the
// daemon learns from the first upload that transfers come through it.
func TestAnsibleCfgExecutables(t *testing.T) {
	requireLab(t)
	for _, m := range []mode{{false, "smart"}, {true, "sftp"}} {
		t.Run(m.String(), func(t *testing.T) {
			requireBridge(t)
			spec := runSpec{Playbook: "files.yml", Mode: m, Side: stock}
			want := runPlaybook(t, spec)
			cfg := filepath.Join(t.TempDir(), "ansible.cfg")
			text := "[ssh_connection]\n"
			for _, prog := range []string{"ssh", "sftp", "scp"} {
				text += prog + "_executable = " + filepath.Join(suite.shims, prog) + "\n"
			}
			if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			spec.Env = []string{"ANSIBLE_CONFIG=" + cfg}
			before, slowBefore := routesNow(t)
			got := runPlaybook(t, spec)
			after, slowAfter := routesNow(t)
			if m.Transfer != "smart" {
				checkFiles(t, got)
			}
			compareRuns(t, got, want)
			delta := routeDelta(before, after)
			t.Logf("routes %v", delta)
			if d := routeDelta(slowBefore, slowAfter); len(d) != 0 {
				t.Errorf("slow paths: %v", d)
			}
			if delta["module"] == 0 || !m.Pipelining && delta["cached"] == 0 {
				t.Errorf("modules or housekeeping not served by the bridge: routes %v", delta)
			}
			// Passthrough is the first step's temp dir (mkdir, chmod, rm)
			// and the playbook's own commands: far fewer than the modules.
			if delta["exec"] >= delta["module"] {
				t.Errorf("more passthrough than module steps: routes %v", delta)
			}
		})
	}
}

// routeDelta is what grew from before to after.
func routeDelta(before, after map[string]int) map[string]int {
	d := map[string]int{}
	for k, n := range after {
		if n > before[k] {
			d[k] = n - before[k]
		}
	}
	return d
}
