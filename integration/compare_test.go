package integration

import (
	"fmt"
	"strings"
	"testing"
)

// maxDiffs bounds how many differences one comparison reports.
const maxDiffs = 60

// compareRuns fails t unless got (the bridge run) and want (the stock run)
// are equivalent: exit status, recap, normalized task results, output files
// and normalized stderr.
func compareRuns(t *testing.T, got, want *runResult) {
	t.Helper()
	g, w := string(got.Spec.Side), string(want.Spec.Side)
	if g == w {
		g, w = g+"#2", w+"#1"
	}
	var diffs []string
	add := func(format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf(format, args...))
	}

	if got.ExitCode != want.ExitCode {
		add("exit status: %s %d, %s %d", g, got.ExitCode, w, want.ExitCode)
	}
	diffValues("stats", toAny(got.Doc.Stats), toAny(want.Doc.Stats), &diffs)

	ge, we := normalizeEvents(got.Doc.Events), normalizeEvents(want.Doc.Events)
	n := min(len(ge), len(we))
	for i := 0; i < n; i++ {
		a, b := ge[i], we[i]
		id := fmt.Sprintf("task %q host %s", a.Task, a.Host)
		if a.Play != b.Play || a.Task != b.Task || a.Host != b.Host {
			add("event %d: %s has %q/%q on %s, %s has %q/%q on %s",
				i, g, a.Play, a.Task, a.Host, w, b.Play, b.Task, b.Host)
			break
		}
		if a.Status != b.Status {
			add("%s: status %s, %s %s", id, a.Status, w, b.Status)
		}
		if a.Status == "unreachable" && b.Status == "unreachable" {
			// Compared by class (see sameUnreachable); tests log the
			// exact strings.
			ma, _ := a.Result["msg"].(string)
			mb, _ := b.Result["msg"].(string)
			if !sameUnreachable(ma, mb) {
				add("%s: UNREACHABLE messages of different classes:\n  %s: %q\n  %s: %q", id, g, ma, w, mb)
			}
			delete(a.Result, "msg")
			delete(b.Result, "msg")
		}
		diffValues(id, toAny(a.Result), toAny(b.Result), &diffs)
	}
	for _, e := range ge[n:] {
		add("task %q host %s: only in %s run (%s)", e.Task, e.Host, g, e.Status)
	}
	for _, e := range we[n:] {
		add("task %q host %s: only in %s run (%s)", e.Task, e.Host, w, e.Status)
	}

	for _, d := range diffFiles(got.Files, want.Files, g, w) {
		add("file %s", d)
	}

	if gs, ws := normalizeStderr(got.Stderr), normalizeStderr(want.Stderr); gs != ws {
		add("ansible-playbook stderr differs:\n--- %s\n%s\n--- %s\n%s", g, gs, w, ws)
	}

	if len(diffs) == 0 {
		return
	}
	extra := ""
	if len(diffs) > maxDiffs {
		extra = fmt.Sprintf("\n... and %d more", len(diffs)-maxDiffs)
		diffs = diffs[:maxDiffs]
	}
	t.Errorf("%s run differs from %s run (%s, %s); %s values first, %s values after \"want\":\n%s%s",
		g, w, got.Dir, want.Dir, g, w, strings.Join(diffs, "\n"), extra)
}

// toAny round-trips v through the decoded-JSON shapes diffValues expects.
func toAny(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return x
	case map[string]map[string]int:
		out := map[string]any{}
		for k, m := range x {
			inner := map[string]any{}
			for k2, n := range m {
				inner[k2] = float64(n)
			}
			out[k] = inner
		}
		return out
	}
	return v
}
