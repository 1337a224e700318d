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

// Build compiles source (relative to the module root) into out with cc:
// static, or dynamic where the static C library is missing.
func Build(ctx context.Context, root, source, out string) error {
	var msgs []byte
	for _, static := range []bool{true, false} {
		args := []string{"-O2", "-Wall", "-Wextra", "-o", out, filepath.Join(root, source)}
		if static {
			args = append([]string{"-static"}, args...)
		}
		b, err := exec.CommandContext(ctx, "cc", args...).CombinedOutput()
		if err == nil {
			return nil
		}
		msgs = append(msgs, b...)
	}
	return fmt.Errorf("cc %s: %s", source, bytes.TrimSpace(msgs))
}
