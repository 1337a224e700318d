package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A saved run: what -versions needs of one row of a bench table, written
// as JSON next to -out (bench-2.22.md → bench-2.22.json) so that runs of
// different ansible-core versions can be compared after the fact.
type savedRun struct {
	Playbook  string  `json:"playbook"`
	Mode      string  `json:"mode"`
	N         int     `json:"n"`
	LatencyMS float64 `json:"latency_ms"` // one-way, added by the relay
	OK        bool    `json:"ok"`
	WallS     float64 `json:"wall_s"`
	Bytes     int64   `json:"bytes"`
	Turns     int     `json:"turns"`
	Interp    int     `json:"interp"`
	Slow      int     `json:"slow"`
	Sudo      int     `json:"sudo"`
}

// savedBench is one bench invocation's tables.
type savedBench struct {
	Version string     `json:"version"` // e.g. "ansible-core 2.22.0b2"
	Date    string     `json:"date"`
	Runs    []savedRun `json:"runs"`
}

// saveRuns turns the tables into a savedBench.
func saveRuns(version, date string, tables []*table) savedBench {
	sb := savedBench{Version: version, Date: date}
	for _, t := range tables {
		for _, r := range t.results {
			if !r.ran {
				continue
			}
			sb.Runs = append(sb.Runs, savedRun{
				Playbook: r.playbook, Mode: r.mode.name, N: t.cfg.n,
				LatencyMS: float64(t.cfg.latency.Microseconds()) / 1000,
				OK:        r.err == nil, WallS: r.wall.Seconds(),
				Bytes: r.stats.BytesUp + r.stats.BytesDown, Turns: r.stats.Turns,
				Interp: r.interp, Slow: r.slow, Sudo: r.sudo,
			})
		}
	}
	return sb
}

// find returns the run of playbook pb in mode at the given latency, or nil.
func (sb savedBench) find(pb, mode string, latency bool) *savedRun {
	for i := range sb.Runs {
		r := &sb.Runs[i]
		if r.Playbook == pb && r.Mode == mode && (r.LatencyMS > 0) == latency && r.OK {
			return r
		}
	}
	return nil
}

// readSaved reads the JSON files a bench wrote, in the order given.
func readSaved(paths []string) ([]savedBench, error) {
	var out []savedBench
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		var sb savedBench
		if err := json.Unmarshal(data, &sb); err != nil {
			return nil, fmt.Errorf("parse %s: %w", p, err)
		}
		out = append(out, sb)
	}
	return out, nil
}

// Acceptance of the version matrix: on every version the bridge's ratio to
// stock is at most ratioSpread above the oldest version's, and at the
// latency table's RTT a bridge task costs at most maxBytesPerTask on the
// wire and maxTurnsPerTask round trips.
const (
	ratioSpread     = 0.10
	maxBytesPerTask = 4096
	maxTurnsPerTask = 1.2
)

// renderVersions compares bench runs of several ansible-core versions: per
// version and playbook the floor, stock and bridge wall times in both
// modes, the bridge ÷ stock ratio against the first file's (the reference,
// normally 2.14), the same ratio above Ansible's own floor, and the
// bridge's worst bytes and turns per task at the added latency.
func renderVersions(benches []savedBench) string {
	var b strings.Builder
	b.WriteString("## ansible-bridge bench across ansible-core versions\n\n")
	b.WriteString("Wall times in seconds (pipelining / Ansible's defaults). ")
	b.WriteString("÷ stock: bridge wall ÷ stock wall, same setting. ")
	b.WriteString("vs ref: that ratio ÷ the first version's (✓ at most ")
	fmt.Fprintf(&b, "%.0f %% above it; lower is better). above floor: (bridge − floor) ÷ (stock − floor), the part of stock's time beyond Ansible's own that the bridge still takes. ", ratioSpread*100)
	fmt.Fprintf(&b, "+RTT: the bridge's worst bytes and turns per task in the latency table (✓ ≤ %.0f KiB and ≤ %.1f).\n\n", float64(maxBytesPerTask)/1024, maxTurnsPerTask)
	b.WriteString("| ansible-core | playbook | floor | stock | bridge | Mitogen | ÷ stock | vs ref | above floor | +RTT bytes/task, turns/task |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	if len(benches) == 0 {
		return b.String()
	}
	ref := benches[0]
	for _, sb := range benches {
		for _, pb := range playbookOrder(sb) {
			wall := func(mode string) string {
				if r := sb.find(pb, mode, false); r != nil {
					return fmt.Sprintf("%.2f", r.WallS)
				}
				return "—"
			}
			pair := func(prefix string) string {
				return wall(prefix+"-pipelining") + " / " + wall(prefix+"-default")
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				strings.TrimPrefix(sb.Version, "ansible-core "), pbLabel(pb, runN(sb, pb)),
				pair("floor"), pair("stock"), pair("bridge"), wall("mitogen"),
				ratioPair(sb, pb, stockRatio), refPair(sb, ref, pb), ratioPair(sb, pb, aboveFloor), latencyCell(sb, pb))
		}
	}
	return b.String()
}

// playbookOrder lists the playbooks of a bench in the order they ran.
func playbookOrder(sb savedBench) []string {
	var pbs []string
	for _, r := range sb.Runs {
		if !slices.Contains(pbs, r.Playbook) {
			pbs = append(pbs, r.Playbook)
		}
	}
	return pbs
}

// runN is the main table's n for a playbook.
func runN(sb savedBench, pb string) int {
	for _, r := range sb.Runs {
		if r.Playbook == pb && r.LatencyMS == 0 {
			return r.N
		}
	}
	return 0
}

// stockRatio is bridge ÷ stock for one setting ("pipelining" or
// "default"); NaN when a run is missing.
func stockRatio(sb savedBench, pb, setting string) float64 {
	br, st := sb.find(pb, "bridge-"+setting, false), sb.find(pb, "stock-"+setting, false)
	if br == nil || st == nil || st.WallS == 0 {
		return math.NaN()
	}
	return br.WallS / st.WallS
}

// aboveFloor is (bridge − floor) ÷ (stock − floor) for one setting.
func aboveFloor(sb savedBench, pb, setting string) float64 {
	br, st, fl := sb.find(pb, "bridge-"+setting, false), sb.find(pb, "stock-"+setting, false), sb.find(pb, "floor-"+setting, false)
	if br == nil || st == nil || fl == nil {
		return math.NaN()
	}
	if x, ok := aboveFloorRatio(br.WallS, fl.WallS, st.WallS); ok {
		return x
	}
	return math.NaN()
}

// aboveFloorRatio is (bridge − floor) ÷ (stock − floor) of wall times in
// seconds: the part of stock's time beyond Ansible's own that the bridge
// still takes; not ok when stock took no longer than the floor.
func aboveFloorRatio(bridge, floor, stock float64) (float64, bool) {
	if stock <= floor {
		return 0, false
	}
	return (bridge - floor) / (stock - floor), true
}

func ratioPair(sb savedBench, pb string, f func(savedBench, string, string) float64) string {
	return fmt.Sprintf("%s / %s", num(f(sb, pb, "pipelining")), num(f(sb, pb, "default")))
}

// refPair is each setting's bridge ÷ stock relative to the reference
// version's, marked against ratioSpread: a lower ratio (the bridge saves
// more of stock's time than on the reference) passes.
func refPair(sb, ref savedBench, pb string) string {
	var parts []string
	for _, setting := range []string{"pipelining", "default"} {
		x := stockRatio(sb, pb, setting) / stockRatio(ref, pb, setting)
		switch {
		case math.IsNaN(x):
			parts = append(parts, "—")
		case x <= 1+ratioSpread:
			parts = append(parts, fmt.Sprintf("%.2f ✓", x))
		default:
			parts = append(parts, fmt.Sprintf("%.2f ✗", x))
		}
	}
	return strings.Join(parts, " / ")
}

// latencyCell is the worst bytes and turns per task of the bridge modes in
// the latency table.
func latencyCell(sb savedBench, pb string) string {
	var bytes, turns float64
	found := false
	for _, r := range sb.Runs {
		if r.Playbook != pb || r.LatencyMS == 0 || !strings.HasPrefix(r.Mode, "bridge-") || !r.OK || r.N == 0 {
			continue
		}
		found = true
		bytes = max(bytes, float64(r.Bytes)/float64(r.N))
		turns = max(turns, float64(r.Turns)/float64(r.N))
	}
	if !found {
		return "—"
	}
	mark := "✓"
	if bytes > maxBytesPerTask || turns > maxTurnsPerTask {
		mark = "✗"
	}
	return fmt.Sprintf("%.1f KiB, %.2f %s", bytes/1024, turns, mark)
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.3f", x)
}

// savedPath is where the runs' JSON goes for the markdown file out.
func savedPath(out string) string {
	return strings.TrimSuffix(out, filepath.Ext(out)) + ".json"
}

// compareVersions is -versions: it prints the table for the JSON files at
// paths (and writes it to out unless that is empty) and returns the exit
// status.
func compareVersions(paths []string, out string) int {
	if len(paths) == 0 {
		fmt.Fprintln(os.Stderr, "bench: -versions needs the JSON files of earlier runs (bench-2.14.json ...)")
		return 2
	}
	benches, err := readSaved(paths)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	report := renderVersions(benches)
	fmt.Print(report)
	if out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench: write -out:", err)
			return 1
		}
	}
	return 0
}
