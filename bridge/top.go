package bridge

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// RenderTop writes one screen of `ansible-bridge top`: the daemon, then
// per target its connection, round trip, bytes and invocations per route,
// its interpreters, and the invocations in flight, cut to width columns.
func RenderTop(w io.Writer, st Status, width int, now time.Time) {
	line := func(format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		if r := []rune(s); len(r) > width {
			s = string(r[:width])
		}
		fmt.Fprintln(w, s)
	}
	line("ansible-bridge  pid %d  up %s  %d invocations, %d in flight  %s",
		st.PID, st.Uptime, st.Invocations, len(st.InFlight), now.Format("15:04:05"))
	line("")
	line("%-32s %5s %8s %9s %9s %9s %9s  %s", "TARGET", "CONNS", "RTT", "WIRE IN", "WIRE OUT", "SHIM IN", "SHIM OUT", "INVOCATIONS BY ROUTE")
	for _, t := range st.Targets {
		line("%-32s %5d %8s %9s %9s %9s %9s  %s", t.Target, t.Connections, millis(t.RTTMillis),
			humanBytes(t.WireIn), humanBytes(t.WireOut), humanBytes(t.BytesIn), humanBytes(t.BytesOut), routeCounts(t.Routes))
	}
	if len(st.Targets) == 0 {
		line("(no targets yet)")
	}
	line("")
	line("%-32s %-24s %-10s %7s %8s %9s %6s", "INTERPRETERS OF", "PYTHON", "USER", "PID", "AGE", "REQUESTS", "BUSY")
	for _, t := range st.Targets {
		for _, in := range t.Interpreters {
			line("%-32s %-24s %-10s %7d %8s %9d %6d", t.Target, clip(in.Python, 24), clip(in.User, 10), in.PID,
				(time.Duration(in.AgeSecs) * time.Second).String(), in.Requests, in.InFlight)
		}
	}
	line("")
	line("%-7s %-5s %-32s %-8s %9s  %s", "ID", "PROG", "IN FLIGHT ON", "ROUTE", "ELAPSED", "COMMAND")
	for _, iv := range st.InFlight {
		line("%-7d %-5s %-32s %-8s %9s  %s", iv.ID, iv.Prog, iv.Target, iv.Route, millis(iv.ElapsedMS), iv.Command)
	}
}

// clip shortens s to n runes, marking the cut, so columns stay aligned.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

func millis(ms float64) string {
	switch {
	case ms <= 0:
		return "-"
	case ms < 10:
		return fmt.Sprintf("%.2fms", ms)
	case ms < 10000:
		return fmt.Sprintf("%.0fms", ms)
	}
	return fmt.Sprintf("%.1fs", ms/1000)
}

func humanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
}

// routeCounts writes per-route counts as "name=N", sorted.
func routeCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
