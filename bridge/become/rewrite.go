package become

import (
	"fmt"
	"strings"
)

// WithInner returns cmd, the command w was parsed from, with Inner
// replaced by inner: the same tool, options, user, prompt, success marker
// and outer wrapping, around another command. The bridge starts become
// agents this way, so that the tool sees exactly the invocation Ansible
// would have made (and prompts exactly as Ansible expects).
func (w *Wrapper) WithInner(cmd, inner string) (string, error) {
	from, to := w.quoted(w.Inner), w.quoted(inner)
	if n := strings.Count(cmd, from); n != 1 {
		return "", fmt.Errorf("%w: the inner command occurs %d times in the wrapper", ErrUnsupported, n)
	}
	return strings.Replace(cmd, from, to, 1), nil
}

// quoted is inner as it appears in the full command: quoted once for the
// inner shell's -c, once more for su's -c, and once more (quotes
// escaped, as the outer pyQuote does to the whole body) for the outer
// shell.
func (w *Wrapper) quoted(inner string) string {
	q := pyQuote("echo " + w.Success + " ; " + inner)
	if w.Method.NestedShell {
		q = pyQuote(w.Shell + " -c " + q)
	}
	if w.Outer.Shell != "" {
		q = strings.ReplaceAll(q, "'", `'"'"'`)
	}
	return q
}
