package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShimSkipsDaemonInit checks that the binary, invoked as ssh, runs the
// shim before the daemon's heavy packages initialize (package shimentry).
// ANSIBLE_BRIDGE_DISABLE=1 makes the shim exec the real ssh, after the
// Go runtime has printed what it initialized.
func TestShimSkipsDaemonInit(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not on PATH")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ansible-bridge")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	inits := func(argv0 string, args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1", "ANSIBLE_BRIDGE_DISABLE=1", "ANSIBLE_BRIDGE_ARGV0="+argv0)
		out, _ := cmd.CombinedOutput() // the real ssh may be missing; the trace comes first
		return string(out)
	}
	heavy := []string{"golang.org/x/crypto/ssh", "github.com/hanwen/go-fuse/v2/fuse", "github.com/pkg/sftp",
		"github.com/ansible-bridge/ansible-bridge/bridge"}
	shim := inits("ssh", "-V")
	if !strings.Contains(shim, "init github.com/ansible-bridge/ansible-bridge/fakessh ") {
		t.Fatalf("no init trace of fakessh in:\n%s", shim)
	}
	cli := inits("ansible-bridge", "version")
	for _, pkg := range heavy {
		if strings.Contains(shim, "init "+pkg+" ") {
			t.Errorf("the shim initialized %s", pkg)
		}
		// Guards the test itself: the CLI does initialize them.
		if !strings.Contains(cli, "init "+pkg+" ") {
			t.Errorf("the CLI did not initialize %s; is the trace format still \"init PKG @...\"?", pkg)
		}
	}
}
