package integration

import (
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
	for _, m := range []mode{{false, "sftp"}, {false, "scp"}, {false, "smart"}} {
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
