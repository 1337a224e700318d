package cbuild

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// The C sources, relative to the module root.
const (
	Front = "fakessh/front/front.c"
	Floor = "scripts/floor/c/floor.c"
)

// attempts are the compilers and link modes Build tries, best first.
var attempts = []struct {
	cc     string
	static bool
}{
	{"musl-gcc", true},
	{"cc", true},
	{"cc", false}, // no static C library here
}

// Build compiles source (relative to the module root) into out: with
// musl-gcc where it is installed, else cc; static, or dynamic where the
// static C library is missing.
func Build(ctx context.Context, root, source, out string) error {
	var msgs []byte
	for _, a := range attempts {
		if _, err := exec.LookPath(a.cc); err != nil {
			continue
		}
		args := []string{"-O2", "-Wall", "-Wextra", "-o", out, filepath.Join(root, source)}
		if a.static {
			args = append([]string{"-static"}, args...)
		}
		b, err := exec.CommandContext(ctx, a.cc, args...).CombinedOutput()
		if err == nil {
			return nil
		}
		msgs = append(msgs, fmt.Sprintf("%s: ", a.cc)...)
		msgs = append(msgs, b...)
	}
	return fmt.Errorf("building %s: %s", source, bytes.TrimSpace(msgs))
}
