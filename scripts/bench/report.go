package main

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// floorTarget is the acceptance target: bridge wall ≤ floorTarget × the
// floor of the same pipelining setting (becomeFloorTarget for become).
const (
	floorTarget       = 1.5
	becomeFloorTarget = 1.7
)

// targetOf is the ÷ floor target of playbook pb.
func targetOf(pb string) float64 {
	if pb == "become" {
		return becomeFloorTarget
	}
	return floorTarget
}

// renderReport formats the results as markdown: conditions (version is
// ansibleVersion's), one row per run, and bridge ÷ stock ratios.
func renderReport(cfg config, version string, results []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## ansible-bridge bench\n\n")
	sshPath, err := exec.LookPath("ssh")
	if err != nil {
		sshPath = "none on PATH"
	}
	fmt.Fprintf(&b, "%s; %s; stock ssh: %s; %d CPUs; n=%d; relay one-way latency %v (RTT +%v) in front of sshd %s as %s; targets' python %s.\n\n",
		time.Now().Format("2006-01-02 15:04"), version, sshPath, runtime.NumCPU(), cfg.n,
		cfg.latency, 2*cfg.latency, cfg.lab.target(), cfg.lab.user, cfg.python)
	b.WriteString(resultRows(cfg, results))
	b.WriteString("\nin interpreters: the run's module steps the bridge ran in its persistent interpreters (routes module and become, from `ansible-bridge status --json`); freshness checks: what the interpreters spent, before those steps, checking that nothing they imported had changed, as a share of the run's wall time; slow: invocations it counted as a slow path.\n")
	b.WriteString("bytes: relayed payload, both directions; turns: client→server to server→client direction changes, " +
		"i.e. round trips on the wire (package integration/relay).\n")
	b.WriteString(floorNote)
	if cfg.repeat > 1 {
		fmt.Fprintf(&b, "Each row is the run with the median wall time of %d runs of that playbook and mode "+
			"(interleaved: round after round of every mode); its bytes and turns are that run's.\n", cfg.repeat)
	}

	if m := mitogenRows(cfg, results); m != "" {
		b.WriteString("\n### bridge ÷ Mitogen (lower is better)\n\n")
		fmt.Fprintf(&b, "Targets: bridge-pipelining ≤ %.2f × Mitogen, bridge-default ≤ %.2f × Mitogen, "+
			"and (bridge-pipelining − floor) ≤ %.1f × (Mitogen − floor) (✓ met, ✗ not).\n\n",
			mitogenTarget, mitogenDefaultTarget, mitogenAboveFloorTarget)
		b.WriteString("| playbook | Mitogen wall (s) | bridge-pipelining ÷ Mitogen | bridge-default ÷ Mitogen | " +
			"floor-pipelining ÷ Mitogen | above floor ÷ Mitogen's | Mitogen bytes/task | Mitogen turns/task |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
		b.WriteString(m)
		b.WriteString("\nfloor-pipelining ÷ Mitogen: Ansible's own time (the floor, which Mitogen's strategy partly skips) " +
			"against Mitogen's; where it is above the pipelining target, no ssh replacement can meet that target. " +
			"above floor ÷ Mitogen's: (bridge-pipelining − floor-pipelining) ÷ (Mitogen − floor-pipelining), " +
			"what each spends beyond Ansible's own time.\n")
	}
	ratios := ratioRows(cfg, results)
	if ratios != "" {
		b.WriteString("\n### bridge ÷ stock (lower is better)\n\n")
		b.WriteString("| playbook | bridge mode | wall ÷ stock-default | wall ÷ stock-pipelining | bytes ÷ stock-default | bytes ÷ stock-pipelining | above floor, same setting |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
		b.WriteString(ratios)
		b.WriteString("\nabove floor: (bridge − floor) ÷ (stock − floor) of the same pipelining setting: the part of stock's time beyond Ansible's own that the bridge still takes.\n")
	}
	return b.String()
}

// floorNote explains the floor rows and the ÷ floor column.
var floorNote = fmt.Sprintf("÷ floor: wall ÷ the floor run of the same playbook and pipelining setting "+
	"(floor-default for *-default, floor-pipelining for *-pipelining); on bridge rows ✓ means within the "+
	"target of %.1f × floor (%.1f × for become), ✗ beyond it. The floor runs answer Ansible from a canned-result ssh/sftp/scp "+
	"(scripts/floor) and use no network.\n", floorTarget, becomeFloorTarget)

// renderLatencyReport formats the -latency-run table.
func renderLatencyReport(cfg config, results []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## at RTT +%v (relay one-way latency %v), n=%d\n\n", 2*cfg.latency, cfg.latency, cfg.n)
	b.WriteString(resultRows(cfg, results))
	fmt.Fprintf(&b, "\nturns/task: round trips on the wire per task, each costing at least the added %v; "+
		"they include each connection's SSH handshake, spread over the %d tasks.\n", 2*cfg.latency, cfg.n)
	return b.String()
}

// resultRows is the markdown table with one row per run.
func resultRows(cfg config, results []result) string {
	var b strings.Builder
	b.WriteString("| playbook | mode | result | wall (s) | ÷ floor | TCP conns | bytes/task | turns/task |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		status := "ok"
		if r.err != nil {
			status = "**FAIL**: " + cell(firstLine(r.err).Error())
		}
		if !r.ran {
			fmt.Fprintf(&b, "| %s | %s | %s | — | — | — | — | — |\n", pbLabel(r.playbook, cfg.n), r.mode.name, status)
			continue
		}
		if r.playbook == "become" {
			status += fmt.Sprintf(", sudo ran %d×", r.sudo)
		}
		if r.mode.bridge && r.err == nil {
			status += fmt.Sprintf(", %d in interpreters", r.interp)
			if r.freshness > 0 {
				status += fmt.Sprintf(", freshness checks %.2f %%", 100*r.freshness.Seconds()/r.wall.Seconds())
			}
			if r.slow > 0 {
				status += fmt.Sprintf(", **%d slow**", r.slow)
			}
		}
		s := r.stats
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %s | %d | %.1f KiB | %.2f |\n",
			pbLabel(r.playbook, cfg.n), r.mode.name, status, r.wall.Seconds(), floorCell(r, results), s.Connections,
			float64(s.BytesUp+s.BytesDown)/float64(cfg.n)/1024, float64(s.Turns)/float64(cfg.n))
	}
	return b.String()
}

// findResult returns the run of playbook pb in the named mode, or nil.
func findResult(results []result, pb, name string) *result {
	for i := range results {
		if results[i].playbook == pb && results[i].mode.name == name {
			return &results[i]
		}
	}
	return nil
}

// floorOf returns the wall time of the floor of r's playbook and
// pipelining setting, and whether there is a good one. Floor runs have none.
func floorOf(r result, results []result) (time.Duration, bool) {
	if r.mode.floor {
		return 0, false
	}
	f := findResult(results, r.playbook, r.mode.floorName())
	if f == nil || f.err != nil || !f.ran || f.wall <= 0 {
		return 0, false
	}
	return f.wall, true
}

// floorCell is the ÷ floor cell of a run.
func floorCell(r result, results []result) string {
	if r.mode.floor {
		return "—"
	}
	f := findResult(results, r.playbook, r.mode.floorName())
	switch {
	case f == nil:
		return "—"
	case r.err != nil || f.err != nil || !f.ran:
		return "n/a (failed)"
	}
	fw, ok := floorOf(r, results)
	if !ok {
		return "—"
	}
	x := r.wall.Seconds() / fw.Seconds()
	if !r.mode.bridge {
		return fmt.Sprintf("%.2f", x)
	}
	return marked(x, targetOf(r.playbook))
}

// marked is ratio x with ✓ if it meets target (at most), ✗ if not.
func marked(x, target float64) string {
	if x > target {
		return fmt.Sprintf("%.2f ✗", x)
	}
	return fmt.Sprintf("%.2f ✓", x)
}

// ratioRows returns one table row per bridge run, comparing it with the
// stock runs of the same playbook.
func ratioRows(cfg config, results []result) string {
	find := func(pb, name string) *result { return findResult(results, pb, name) }
	ratio := func(a, b *result, v func(*result) float64) string {
		switch {
		case a == nil || b == nil:
			return "—"
		case a.err != nil || b.err != nil:
			return "n/a (failed)"
		case v(b) == 0:
			return "—"
		}
		return fmt.Sprintf("%.3f", v(a)/v(b))
	}
	wall := func(r *result) float64 { return r.wall.Seconds() }
	bytes := func(r *result) float64 { return float64(r.stats.BytesUp + r.stats.BytesDown) }

	var b strings.Builder
	for _, pb := range cfg.playbooks {
		sd, sp := find(pb, "stock-default"), find(pb, "stock-pipelining")
		for _, name := range []string{"bridge-default", "bridge-pipelining"} {
			br := find(pb, name)
			if br == nil {
				continue
			}
			setting := strings.TrimPrefix(name, "bridge-")
			fl, st := find(pb, "floor-"+setting), find(pb, "stock-"+setting)
			above := "—"
			if fl != nil && st != nil && fl.err == nil && st.err == nil && br.err == nil {
				if x, ok := aboveFloorRatio(br.wall.Seconds(), fl.wall.Seconds(), st.wall.Seconds()); ok {
					above = fmt.Sprintf("%.3f", x)
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", pbLabel(pb, cfg.n), name,
				ratio(br, sd, wall), ratio(br, sp, wall), ratio(br, sd, bytes), ratio(br, sp, bytes), above)
		}
	}
	return b.String()
}

// The bridge's targets against Mitogen (wall time, same playbook).
const (
	mitogenTarget           = 0.75 // bridge with pipelining
	mitogenDefaultTarget    = 1.25 // bridge with Ansible's defaults
	mitogenAboveFloorTarget = 0.6  // (bridge − floor) ÷ (Mitogen − floor), pipelining
)

// mitogenRows returns one row per playbook with a Mitogen run: the bridge
// modes' wall time ÷ Mitogen's.
func mitogenRows(cfg config, results []result) string {
	var b strings.Builder
	for _, pb := range cfg.playbooks {
		mg := findResult(results, pb, "mitogen")
		if mg == nil {
			continue
		}
		if mg.err != nil || !mg.ran || mg.wall <= 0 {
			fmt.Fprintf(&b, "| %s | n/a (failed) | — | — | — | — | — | — |\n", pbLabel(pb, cfg.n))
			continue
		}
		ratio := func(name string, target float64) string {
			br := findResult(results, pb, name)
			switch {
			case br == nil:
				return "—"
			case br.err != nil || !br.ran:
				return "n/a (failed)"
			}
			return marked(br.wall.Seconds()/mg.wall.Seconds(), target)
		}
		// Mitogen's mode pipelines, so its floor is floor-pipelining's.
		floorShare, above := "—", "—"
		if fw, ok := floorOf(*mg, results); ok {
			floorShare = fmt.Sprintf("%.2f", fw.Seconds()/mg.wall.Seconds())
			if br := findResult(results, pb, "bridge-pipelining"); br != nil && br.err == nil && br.ran {
				if x, ok := aboveFloorRatio(br.wall.Seconds(), fw.Seconds(), mg.wall.Seconds()); ok {
					above = marked(x, mitogenAboveFloorTarget)
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %.2f | %s | %s | %s | %s | %.1f KiB | %.2f |\n", pbLabel(pb, cfg.n), mg.wall.Seconds(),
			ratio("bridge-pipelining", mitogenTarget), ratio("bridge-default", mitogenDefaultTarget), floorShare, above,
			float64(mg.stats.BytesUp+mg.stats.BytesDown)/float64(cfg.n)/1024, float64(mg.stats.Turns)/float64(cfg.n))
	}
	return b.String()
}

// pbLabel describes a playbook for the table.
func pbLabel(pb string, n int) string {
	switch pb {
	case "loop":
		return fmt.Sprintf("%d-item loop", n)
	case "become":
		return fmt.Sprintf("%d become tasks", n)
	}
	return fmt.Sprintf("%d tasks", n)
}

// ansibleVersion returns e.g. "ansible-core 2.14.18".
func ansibleVersion(ctx context.Context) string {
	out, err := exec.CommandContext(context.WithoutCancel(ctx), "ansible-playbook", "--version").Output()
	if err != nil {
		return "ansible-core (version unknown)"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if i, j := strings.Index(first, "[core "), strings.LastIndex(first, "]"); i >= 0 && j > i {
		return "ansible-core " + first[i+len("[core "):j]
	}
	return strings.TrimSpace(first)
}

// cell makes text safe inside a markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
