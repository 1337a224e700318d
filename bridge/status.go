package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
)

// StatusColumns defines the columns of `ansible-bridge status`, for its
// --help.
const StatusColumns = `columns, one row per target (user@host:port):
  CONNS     SSH connections open to the target now (more than one only when
            the server refuses another session: MaxSessions)
  DIALS     connections made since the daemon started (a redial after a
            dead connection, ControlPersist expiry or reset_connection counts)
  WIRE IN   bytes received from the target over its connections, SSH
            encryption and framing included
  WIRE OUT  bytes sent to the target likewise
  SHIM IN   bytes the shims sent to the daemon for the target (their stdin:
            uploads, pipelined modules)
  SHIM OUT  bytes the daemon sent back to the shims (stdout and stderr)
  ROUTES    invocations per route: cached (answered by the daemon), module and
            become (run in a persistent interpreter), exec (passthrough), dd,
            sftp and scp (file transfers), control (ssh -O), fallback (handed
            to the real binary), mux (sessions and -W of real ssh clients
            over the master's control socket: no invocations). Each
            invocation is in one route, the last that took it, whether it
            succeeded or not (a become step killed at sudo's password
            prompt: become)
then, per target, the invocations that took the slow path with the reason,
what the daemon handed to the real binary, by reason, and what else the
shims ran the real binary for since the daemon started (from the shim
log: the calls that never reached the daemon).
Above the table: the invocations of ssh, scp and sftp (status requests are
not counted), those in no target's row by outcome (fallback: handed to the
real binary before a target; not connected: their target never connected,
and is not kept; failed: ended before a route took it; control: ssh -O
without a master), so that invocations = routes but mux + those; and the
calls the C front handed to the Go shim, by why (prompt, fallback,
terminal, command line), each a Go program's start more.
`

// Status is the daemon's state as reported by `ansible-bridge status`.
type Status struct {
	PID    int    `json:"pid"`
	Uptime string `json:"uptime"`
	// Started is when the daemon started (the shim log's fallbacks that
	// status shows are those since).
	Started time.Time `json:"started"`
	// Invocations counts the shims' calls (ssh, scp, sftp) since the
	// daemon started, not control requests (status, top, stop, mount).
	// Each is counted once: in a target's routes (mux aside: sessions of
	// real ssh clients over a master's socket), or in NoTarget.
	Invocations uint64 `json:"invocations"`
	// NoTarget counts, by outcome, the invocations no target's row
	// shows: handed to the real binary before a target ("fallback": no
	// ControlPath, -V, an option the bridge does not serve, Ansible's
	// ControlPersist probe), of a target that never connected ("not
	// connected": a failed login, a refused connection; such a target is
	// not kept), ended before a route took it ("failed"), or a route that
	// needs no target ("control": ssh -O without a master).
	NoTarget map[string]uint64 `json:"no_target,omitempty"`
	// Fallbacks counts, by reason, the invocations the daemon handed to
	// the real binary (in a target's row or not); the shim log has these
	// too where the shim could write it, and those that never reached the
	// daemon.
	Fallbacks  map[string]uint64 `json:"fallbacks,omitempty"`
	Active     int64             `json:"active"`
	Goroutines int               `json:"goroutines"`
	// AcceptWaits counts the shims' connections the daemon did not
	// accept at once, for want of file descriptors (ulimit -n) or
	// memory: each waited until an invocation ended.
	AcceptWaits uint64 `json:"accept_waits"`
	// FrontHandovers counts, by why, the calls the C front handed to the
	// Go shim (prompts, fallbacks, raw terminals, command lines the
	// daemon leaves to it): each costs a Go program's start.
	FrontHandovers map[string]uint64  `json:"front_handovers,omitempty"`
	Memory         MemoryStatus       `json:"memory"`
	Targets        []TargetStatus     `json:"targets"`
	InFlight       []InvocationStatus `json:"in_flight"`
}

// MemoryStatus is the Go runtime's account of the daemon's memory, in
// bytes: what is live, and what its RSS holds besides (the bench reads it
// to tell retained objects from a heap not yet given back).
type MemoryStatus struct {
	HeapLive     uint64 `json:"heap_live"`     // reachable objects, and garbage not yet collected
	HeapInUse    uint64 `json:"heap_in_use"`   // spans holding objects
	HeapFree     uint64 `json:"heap_free"`     // spans free but kept from the system
	HeapReleased uint64 `json:"heap_released"` // spans given back
	Stacks       uint64 `json:"stacks"`
	Runtime      uint64 `json:"runtime"` // span, cache, GC and profiling metadata
	// Returned counts the times the daemon gave its freed memory back to
	// the system: twice each time its last connection closes (at once,
	// and when that connection's goroutines have ended).
	Returned uint64 `json:"returned"`
	// ZipsCached is how many decoded module zips the daemon holds (the
	// cache goes when the last connection closes).
	ZipsCached int `json:"zips_cached"`
	// GCCycles counts the garbage collections so far; GCForced those the
	// daemon asked for (to overwrite what dropped secrets left, and to
	// give memory back).
	GCCycles uint32 `json:"gc_cycles"`
	GCForced uint32 `json:"gc_forced"`
}

func readMemoryStatus() MemoryStatus {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return MemoryStatus{
		HeapLive: m.HeapAlloc, HeapInUse: m.HeapInuse,
		HeapFree: m.HeapIdle - m.HeapReleased, HeapReleased: m.HeapReleased,
		Stacks:     m.StackSys,
		Runtime:    m.MSpanSys + m.MCacheSys + m.GCSys + m.BuckHashSys + m.OtherSys,
		ZipsCached: interp.ZipsCached(),
		GCCycles:   m.NumGC, GCForced: m.NumForcedGC,
	}
}

// TargetStatus describes one target.
type TargetStatus struct {
	Target string `json:"target"`
	// ControlPath is the expanded ControlPath the target's invocations
	// share ("ssh -O exit" with it closes the target's connections).
	ControlPath string         `json:"control_path"`
	Connections int            `json:"connections"`
	Dials       int            `json:"dials"`
	Routes      map[string]int `json:"routes"` // invocations per route
	// Slow counts invocations that took the slow path, by reason.
	Slow     map[string]int `json:"slow,omitempty"`
	BytesIn  int64          `json:"bytes_in"`  // from the shims (their stdin)
	BytesOut int64          `json:"bytes_out"` // to the shims (stdout, stderr)
	// WireIn and WireOut are the bytes received from and sent to the
	// target over its connections, SSH's encryption and framing included.
	WireIn  int64 `json:"wire_in"`
	WireOut int64 `json:"wire_out"`
	// FreshnessMicros is what the interpreters spent checking, before
	// module tasks, that no file they imported had changed.
	FreshnessMicros int64 `json:"freshness_us"`
	// BecomePolicyChecks counts the round trips that asked a become
	// interpreter whether what its tool reads (sudoers, PAM, passwords,
	// groups) had changed, after something else ran on the target;
	// BecomePolicyRetired the interpreters retired for such a change.
	BecomePolicyChecks  int64               `json:"become_policy_checks,omitempty"`
	BecomePolicyRetired int64               `json:"become_policy_retired,omitempty"`
	RTTMillis           float64             `json:"rtt_ms"` // last keepalive round trip
	Interpreters        []InterpreterStatus `json:"interpreters"`
}

// InterpreterStatus describes one persistent interpreter.
type InterpreterStatus struct {
	Python   string  `json:"python"`
	User     string  `json:"user"`
	PID      int     `json:"pid"`
	AgeSecs  float64 `json:"age_s"`
	Requests int64   `json:"requests"`
	InFlight int     `json:"in_flight"`
}

// InvocationStatus describes an invocation being served.
type InvocationStatus struct {
	ID        uint64  `json:"id"`
	Prog      string  `json:"prog"`
	Target    string  `json:"target,omitempty"`
	Route     string  `json:"route,omitempty"`
	Command   string  `json:"command"`
	ElapsedMS float64 `json:"elapsed_ms"`
}

// Status returns a snapshot of the daemon's state.
func (s *Server) Status() Status {
	st := Status{
		PID:            os.Getpid(),
		Uptime:         time.Since(s.started).Round(time.Second).String(),
		Invocations:    s.invocations.Load(),
		Started:        s.started,
		Active:         s.active.Load(),
		Goroutines:     runtime.NumGoroutine(),
		AcceptWaits:    s.acceptWaits.Load(),
		FrontHandovers: s.handovers.snapshot(),
		Memory:         readMemoryStatus(),
	}
	st.Memory.Returned = s.returned.Load()
	targets, noTarget, fallbacks := s.targets.snapshot()
	if len(noTarget) > 0 {
		st.NoTarget = noTarget
	}
	if len(fallbacks) > 0 {
		st.Fallbacks = fallbacks
	}
	for _, t := range targets {
		t.mu.Lock()
		ts := TargetStatus{Target: t.label, ControlPath: t.key, Dials: t.dials, Routes: map[string]int{}}
		for _, c := range t.conns {
			if !c.dead {
				ts.Connections++
			}
		}
		for k, v := range t.routes {
			ts.Routes[k] = v
		}
		for k, v := range t.slow {
			if ts.Slow == nil {
				ts.Slow = map[string]int{}
			}
			ts.Slow[k] = v
		}
		t.mu.Unlock()
		ts.BytesIn, ts.BytesOut = t.bytesIn.Load(), t.bytesOut.Load()
		ts.WireIn, ts.WireOut = t.wire.In.Load(), t.wire.Out.Load()
		ts.FreshnessMicros = t.freshness.Load()
		ts.BecomePolicyChecks, ts.BecomePolicyRetired = t.policyChecks.Load(), t.policyRetired.Load()
		ts.RTTMillis = float64(t.rtt.Load()) / 1e6
		ts.Interpreters = t.interpreterStatus()
		st.Targets = append(st.Targets, ts)
	}
	sort.Slice(st.Targets, func(i, j int) bool { return st.Targets[i].Target < st.Targets[j].Target })
	s.inflight.Range(func(_, v any) bool {
		iv := v.(*invocation)
		if iv.hello.Prog == "ctl" {
			return true
		}
		target, route := iv.where()
		// What its journal entry shows: a no_log task's command line (its
		// environment values, raw's command) is not; without a journal
		// nothing tells, so the program's name only.
		iv.mu.Lock()
		e := iv.entry
		iv.mu.Unlock()
		argv := e.Argv()
		if argv == nil {
			argv = []string{iv.hello.Prog}
		}
		st.InFlight = append(st.InFlight, InvocationStatus{
			ID: iv.id, Prog: iv.hello.Prog, Target: target, Route: route,
			Command:   summarize(argv, 120),
			ElapsedMS: float64(time.Since(iv.started).Microseconds()) / 1000,
		})
		return true
	})
	sort.Slice(st.InFlight, func(i, j int) bool { return st.InFlight[i].ID < st.InFlight[j].ID })
	return st
}

// summarize shortens an argv for display: its last argument (the remote
// command, for ssh) or the whole line, cut to max runes.
func summarize(argv []string, max int) string {
	s := strings.Join(argv, " ")
	if len(argv) > 0 {
		s = argv[len(argv)-1]
	}
	r := []rune(strings.Join(strings.Fields(s), " "))
	if len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return string(r)
}

// serveCtl runs ansible-bridge's own subcommands: status [--json], stop.
func (s *Server) serveCtl(ctx context.Context, iv *invocation) int {
	args := iv.hello.Argv
	if len(args) == 0 {
		iv.errorf("ansible-bridge: empty control request")
		return 2
	}
	switch args[0] {
	case "status":
		st := s.Status()
		st.Active-- // not this request: status requests are not counted
		if len(args) > 1 && args[1] == "--json" {
			b, _ := json.MarshalIndent(st, "", "  ")
			_, _ = iv.stdout().Write(append(b, '\n'))
			return 0
		}
		writeStatus(iv, st)
		return 0
	case "mount":
		if len(args) != 2 {
			iv.errorf("usage: ansible-bridge mount DIR")
			return 2
		}
		dir := absDir(iv.hello.Cwd, args[1])
		if err := s.Mount(ctx, dir); err != nil {
			iv.errorf("ansible-bridge: mount %s: %v", dir, err)
			return 1
		}
		_, _ = fmt.Fprintf(iv.stdout(), "mounted on %s (until the daemon stops)\n", dir)
		return 0
	case "stop":
		_, _ = fmt.Fprintf(iv.stdout(), "stopping daemon pid %d\n", os.Getpid())
		iv.exit(0)
		s.Stop()
		return -1
	}
	iv.errorf("ansible-bridge: unknown control request %q", args[0])
	return 2
}

// countList is counts as "NAME N, ..." in order of name.
func countList(counts map[string]uint64) string {
	var out []string
	for name, n := range counts {
		out = append(out, fmt.Sprintf("%s %d", name, n))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func writeStatus(iv *invocation, st Status) {
	w := iv.stdout()
	fmt.Fprintf(w, "daemon pid %d, up %s, %d invocations of ssh, scp and sftp (status requests not counted; %d active)\n", st.PID, st.Uptime, st.Invocations, st.Active)
	if st.AcceptWaits > 0 {
		fmt.Fprintf(w, "%d shim connections waited for a file descriptor (raise ulimit -n)\n", st.AcceptWaits)
	}
	if len(st.FrontHandovers) > 0 {
		fmt.Fprintf(w, "calls the C front handed to the Go shim (a Go start, ~5 ms, each): %s\n", countList(st.FrontHandovers))
	}
	if len(st.NoTarget) > 0 {
		fmt.Fprintf(w, "invocations in no target's row: %s\n", countList(st.NoTarget))
	}
	reasons := slices.Sorted(maps.Keys(st.Fallbacks))
	for _, r := range reasons {
		fmt.Fprintf(w, "handed to the real binary by the daemon: %d× %s\n", st.Fallbacks[r], r)
	}
	if len(st.Targets) == 0 {
		fmt.Fprintln(w, "no targets")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tCONNS\tDIALS\tWIRE IN\tWIRE OUT\tSHIM IN\tSHIM OUT\tROUTES")
	for _, t := range st.Targets {
		var routes []string
		for r, n := range t.Routes {
			routes = append(routes, fmt.Sprintf("%s=%d", r, n))
		}
		sort.Strings(routes)
		state := fmt.Sprint(t.Connections)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Target, state, t.Dials, t.WireIn, t.WireOut, t.BytesIn, t.BytesOut, strings.Join(routes, " "))
	}
	tw.Flush()
	fmt.Fprintln(w, "(WIRE IN/OUT: bytes received from and sent to the target; SHIM IN/OUT: bytes the shims sent to and received from the daemon; ansible-bridge status --help)")
	for _, t := range st.Targets {
		var reasons []string
		for r := range t.Slow {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			fmt.Fprintf(w, "%s: %d slow (passthrough): %s\n", t.Target, t.Slow[r], r)
		}
	}
}
