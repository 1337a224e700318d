package cbuild

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// With musl-gcc installed (scripts/setup.sh installs it), the front must
// not carry glibc's start, whose cpuid probes Ansible would wait for at
// every ssh call.
func TestBuildLinksMusl(t *testing.T) {
	if _, err := exec.LookPath("musl-gcc"); err != nil {
		t.Skip("musl-gcc not installed (package musl-tools)")
	}
	out := filepath.Join(t.TempDir(), "front")
	if err := Build(context.Background(), "../..", Front, out); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// glibc's start reads its tunables from the environment; musl has none.
	if bytes.Contains(bin, []byte("GLIBC_TUNABLES")) {
		t.Fatalf("%s links glibc although musl-gcc is installed", Front)
	}
}
