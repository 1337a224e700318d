package frontbuild

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// Source is the front's source, relative to the module root.
const Source = "fakessh/front/front.c"

// Build compiles the front from the module root into out with cc: static,
// or dynamic where the static C library is missing.
func Build(ctx context.Context, root, out string) error {
	var msgs []byte
	for _, static := range []string{"-static", ""} {
		args := []string{"-O2", "-Wall", "-Wextra", "-o", out, filepath.Join(root, Source)}
		if static != "" {
			args = append([]string{static}, args...)
		}
		b, err := exec.CommandContext(ctx, "cc", args...).CombinedOutput()
		if err == nil {
			return nil
		}
		msgs = append(msgs, b...)
	}
	return fmt.Errorf("cc %s: %s", Source, bytes.TrimSpace(msgs))
}
