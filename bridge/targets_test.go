package bridge

import (
	"strings"
	"testing"
)

func targetNames(st Status) []string {
	var out []string
	for _, t := range st.Targets {
		out = append(out, t.Target)
	}
	return out
}

// TestTargetLabelsUnique checks that targets to the same user@host:port
// through another ControlPath (another connection) get distinct names
// that they keep, in status and in the debug mount.
func TestTargetLabelsUnique(t *testing.T) {
	h := newHarness(t, 0)
	base := "tester@127.0.0.1:" + h.port
	adhoc := h.sshArgsAt(h.cp+"-adhoc", "127.0.0.1", "true")
	if r := h.run("ssh", adhoc, ""); r.code != 0 {
		t.Fatalf("ad-hoc: %+v", r)
	}
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("playbook: %+v", r)
	}
	if r := h.run("ssh", adhoc, ""); r.code != 0 {
		t.Fatalf("ad-hoc again: %+v", r)
	}
	want := base + "," + base + "#2"
	if got := strings.Join(targetNames(h.srv.Status()), ","); got != want {
		t.Fatalf("status targets %q, want %q", got, want)
	}
	// The first one (the ad-hoc target, run twice) keeps the plain name.
	if st := h.srv.Status(); st.Targets[0].Routes[routeExec] != 2 || st.Targets[1].Routes[routeExec] != 1 {
		t.Fatalf("names moved between targets: %+v", st.Targets)
	}
	var mounted []string
	for _, tg := range (mountSource{h.srv}).Targets() {
		mounted = append(mounted, tg.Name)
	}
	if got := strings.Join(mounted, ","); got != want {
		t.Fatalf("mount targets %q, want %q", got, want)
	}
}

// TestTargetsNeverConnectedForgotten checks that a target whose dial
// failed leaves no row in status, and that a long user name (a target
// that did connect) is clipped there.
func TestTargetsNeverConnectedForgotten(t *testing.T) {
	h := newHarness(t, 0)
	long := strings.Repeat("h", 500_000)
	r := h.run("ssh", h.sshArgs(long, "true"), "")
	if r.code != 255 {
		t.Fatalf("dial to %d-character host: %+v", len(long), r.code)
	}
	// The shim has its exit status before the daemon finishes the
	// invocation's bookkeeping, which forgets the target.
	waitFor(t, "no target after a failed dial", func() bool { return len(h.srv.Status().Targets) == 0 })
	user := strings.Repeat("u", 10_000)
	args := h.sshArgs("127.0.0.1", "true")
	for i, a := range args {
		if a == `User="tester"` {
			args[i] = "User=" + user
		}
	}
	if r := h.run("ssh", args, ""); r.code != 0 {
		t.Fatalf("long user: %+v", r)
	}
	names := targetNames(h.srv.Status())
	if len(names) != 1 || len(names[0]) > 200 || !strings.HasSuffix(names[0], "@127.0.0.1:"+h.port) {
		t.Fatalf("status targets %q, want one clipped name", names)
	}
}
