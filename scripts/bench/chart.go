package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// chartSection is one table of the chart: the runs at one n and latency.
type chartSection struct {
	cfg     config
	results []result
}

// Chart geometry, in SVG user units (pixels).
const (
	chartW     = 880
	chartX0    = 190 // left edge of the bars
	chartPlotW = 470 // bar length of the axis maximum
	barH       = 14
	rowStep    = 20
	groupHead  = 18 // playbook label above its bars
	groupGap   = 8
)

// modeColor is the bar fill of each mode.
var modeColor = map[string]string{
	"stock-default":     "#aab4bf",
	"stock-pipelining":  "#6f7c8a",
	"bridge-default":    "#6baed6",
	"bridge-pipelining": "#2171b5",
	"floor-default":     "#dedede",
	"floor-pipelining":  "#bdbdbd",
}

// writeChartFile writes the chart to path.
func writeChartFile(path string, sections []chartSection) error {
	var b bytes.Buffer
	if err := writeChart(&b, sections); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

// writeChart writes a horizontal bar chart of wall time per playbook and
// mode as a standalone SVG document: one block per section, each with its
// own axis. On every stock and bridge bar a black tick marks the floor of
// the same pipelining setting; on bridge bars a dashed red tick marks
// floorTarget × that floor.
func writeChart(w io.Writer, sections []chartSection) error {
	var body strings.Builder
	y := 30.0
	text := func(x, y float64, attrs, s string) {
		fmt.Fprintf(&body, `<text x="%.1f" y="%.1f"%s>%s</text>`+"\n", x, y, attrs, esc(s))
	}
	text(10, 22, ` font-size="15" font-weight="bold"`, "ansible-bridge bench: wall time per playbook and mode (shorter is better)")

	// Legend.
	y += 8
	lx := 10.0
	for _, name := range modeNames() {
		fmt.Fprintf(&body, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/>`+"\n", lx, y-10, modeColor[name])
		text(lx+16, y, "", name)
		lx += 18 + 7*float64(len(name)) + 14
	}
	y += 18
	fmt.Fprintf(&body, `<line x1="16" y1="%.1f" x2="16" y2="%.1f" stroke="#000" stroke-width="2"/>`+"\n", y-12, y+2)
	text(24, y, "", "floor of the same mode (Ansible's own overhead)")
	fmt.Fprintf(&body, `<line x1="336" y1="%.1f" x2="336" y2="%.1f" stroke="#d62728" stroke-width="2" stroke-dasharray="3,2"/>`+"\n", y-12, y+2)
	text(344, y, "", fmt.Sprintf("%.1f × floor: the target for bridge rows", floorTarget))
	y += 16

	for _, sec := range sections {
		y += 20
		text(10, y, ` font-size="13" font-weight="bold"`,
			fmt.Sprintf("n=%d (loop items or separate tasks), relay RTT +%v", sec.cfg.n, 2*sec.cfg.latency))
		y += 10
		y = drawSection(&body, sec, y)
	}
	height := y + 16

	_, err := fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" viewBox="0 0 %d %.0f" font-family="sans-serif" font-size="11">
<rect x="0" y="0" width="%d" height="%.0f" fill="#fff"/>
%s</svg>
`, chartW, height, chartW, height, chartW, height, body.String())
	return err
}

// drawSection draws one section's axis, grid and bars from y down and
// returns the y below it.
func drawSection(body *strings.Builder, sec chartSection, y float64) float64 {
	// Scale: the longest bar or target tick.
	maxV := 0.0
	for _, r := range sec.results {
		if !r.ran {
			continue
		}
		maxV = math.Max(maxV, r.wall.Seconds())
		if f, ok := floorOf(r, sec.results); ok && r.mode.bridge {
			maxV = math.Max(maxV, floorTarget*f.Seconds())
		}
	}
	step := niceStep(maxV / 5)
	axisMax := step * math.Max(1, math.Ceil(maxV/step))
	xOf := func(v float64) float64 { return chartX0 + chartPlotW*v/axisMax }

	// Rows, laid out first so the grid can go behind the bars.
	var playbooks []string
	for _, r := range sec.results {
		if !slices.Contains(playbooks, r.playbook) {
			playbooks = append(playbooks, r.playbook)
		}
	}
	top := y
	rows := 0
	for _, pb := range playbooks {
		for _, r := range sec.results {
			if r.playbook == pb {
				rows++
			}
		}
	}
	bottom := top + float64(len(playbooks))*(groupHead+groupGap) + float64(rows)*rowStep

	// Grid and axis labels.
	for v := 0.0; v <= axisMax+step/2; v += step {
		x := xOf(v)
		fmt.Fprintf(body, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e6e6e6"/>`+"\n", x, top, x, bottom)
		fmt.Fprintf(body, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", x, bottom+14, esc(fmtSeconds(v)))
	}
	fmt.Fprintf(body, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#888"/>`+"\n", chartX0, top, chartX0, bottom)

	for _, pb := range playbooks {
		y += groupHead - 4
		fmt.Fprintf(body, `<text x="10" y="%.1f" font-weight="bold">%s</text>`+"\n", y, esc(pbLabel(pb, sec.cfg.n)))
		y += 4
		for _, r := range sec.results {
			if r.playbook != pb {
				continue
			}
			chartRow(body, r, sec, y, xOf)
			y += rowStep
		}
		y += groupGap
	}
	return bottom + 20
}

// chartRow draws one run's label, bar, floor ticks and value.
func chartRow(body *strings.Builder, r result, sec chartSection, y float64, xOf func(float64) float64) {
	fmt.Fprintf(body, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", chartX0-6, y+barH-3, esc(r.mode.name))
	if !r.ran {
		fmt.Fprintf(body, `<text x="%d" y="%.1f" fill="#d62728">%s</text>`+"\n", chartX0+6, y+barH-3,
			esc(truncate("FAIL: "+firstLine(r.err).Error(), 90)))
		return
	}
	wall := r.wall.Seconds()
	tip := fmt.Sprintf("%s / %s: %.2f s, %.2f turns/task", pbLabel(r.playbook, sec.cfg.n), r.mode.name, wall,
		float64(r.stats.Turns)/float64(sec.cfg.n))
	floor, hasFloor := floorOf(r, sec.results)
	if hasFloor {
		tip += fmt.Sprintf(", %.2f × floor", wall/floor.Seconds())
	}
	stroke := ""
	if r.err != nil {
		stroke = ` stroke="#d62728" stroke-width="2"`
		tip += "; FAIL: " + firstLine(r.err).Error()
	}
	fmt.Fprintf(body, `<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s"%s><title>%s</title></rect>`+"\n",
		chartX0, y, xOf(wall)-chartX0, barH, modeColor[r.mode.name], stroke, esc(tip))
	end := xOf(wall)
	if hasFloor {
		fx := xOf(floor.Seconds())
		fmt.Fprintf(body, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-width="2"/>`+"\n", fx, y-2, fx, y+barH+2)
		if r.mode.bridge {
			tx := xOf(targetOf(r.playbook) * floor.Seconds())
			fmt.Fprintf(body, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d62728" stroke-width="2" stroke-dasharray="3,2"/>`+"\n",
				tx, y-2, tx, y+barH+2)
			end = math.Max(end, tx)
		}
	}
	label := fmt.Sprintf("%.2f s", wall)
	if hasFloor {
		label += fmt.Sprintf(" · %.2f× floor", wall/floor.Seconds())
	}
	if !r.mode.floor {
		label += fmt.Sprintf(" · %.1f turns/task", float64(r.stats.Turns)/float64(sec.cfg.n))
	}
	fill := "#222"
	if r.err != nil {
		label = "FAIL " + label + ": " + truncate(firstLine(r.err).Error(), 40)
		fill = "#d62728"
	}
	fmt.Fprintf(body, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", end+5, y+barH-3, fill, esc(label))
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// fmtSeconds formats an axis value.
func fmtSeconds(v float64) string {
	if v == 0 {
		return "0"
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".") + " s"
}

// truncate cuts s to at most n runes.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// esc escapes text for XML character data and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
