package fakessh

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the shim small: Ansible starts it several times per task,
// so the heavy packages of the daemon must not leak into it.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	forbidden := []string{"golang.org/x/crypto", "github.com/hanwen/go-fuse", "github.com/sirupsen/logrus", "github.com/pkg/sftp"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("fakessh depends on %s", dep)
			}
		}
	}
}
