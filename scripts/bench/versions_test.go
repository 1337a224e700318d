package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/integration/relay"
)

// loopRuns is a bench's loop rows with the given wall times (pipelining),
// and one bridge row at +20 ms with the given bytes and turns for 100 tasks.
func loopRuns(version string, floor, stock, bridge float64, bytes int64, turns int) savedBench {
	return savedBench{Version: "ansible-core " + version, Runs: []savedRun{
		{Playbook: "loop", Mode: "floor-pipelining", N: 100, OK: true, WallS: floor},
		{Playbook: "loop", Mode: "stock-pipelining", N: 100, OK: true, WallS: stock},
		{Playbook: "loop", Mode: "bridge-pipelining", N: 100, OK: true, WallS: bridge},
		{Playbook: "loop", Mode: "bridge-pipelining", N: 100, LatencyMS: 10, OK: true, WallS: 5, Bytes: bytes, Turns: turns},
	}}
}

func TestRenderVersions(t *testing.T) {
	// The bench figures of 2026-11-25: 2.22's ratio to stock is 1.38 × 2.14's
	// although its time above the floor is a smaller share of stock's.
	out := renderVersions([]savedBench{
		loopRuns("2.14.18", 0.73, 10.78, 1.39, 190000, 111),
		loopRuns("2.19.11", 1.25, 15.75, 2.05, 200000, 110),
		loopRuns("2.22.0b2", 2.16, 16.14, 2.88, 500000, 121),
		loopRuns("2.99", 0.73, 10.78, 1.00, 190000, 111),
	})
	t.Log(out)
	for _, want := range []string{
		"| 2.14.18 | 100-item loop | 0.73 / — | 10.78 / — | 1.39 / — | — | 0.129 / — | 1.00 ✓ / — | 0.066 / — | 1.9 KiB, 1.11 ✓ |",
		"| 2.19.11 | 100-item loop | 1.25 / — | 15.75 / — | 2.05 / — | — | 0.130 / — | 1.01 ✓ / — | 0.055 / — | 2.0 KiB, 1.10 ✓ |",
		"| 2.22.0b2 | 100-item loop | 2.16 / — | 16.14 / — | 2.88 / — | — | 0.178 / — | 1.38 ✗ / — | 0.052 / — | 4.9 KiB, 1.21 ✗ |",
		// A lower ratio than the reference's is no failure.
		"| 2.99 | 100-item loop | 0.73 / — | 10.78 / — | 1.00 / — | — | 0.093 / — | 0.72 ✓ / — | 0.027 / — | 1.9 KiB, 1.11 ✓ |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks the row\n%s", want)
		}
	}
}

// A bench's JSON holds what -versions reads back: ok runs with their n
// and latency; runs that did not run are left out.
func TestSavedRunsRoundTrip(t *testing.T) {
	tables := []*table{
		{cfg: config{n: 100}, results: []result{
			{playbook: "loop", mode: mode{name: "stock-pipelining"}, ran: true, wall: 10 * time.Second,
				stats: relay.Stats{BytesUp: 100, BytesDown: 28, Turns: 300}},
			{playbook: "loop", mode: mode{name: "mitogen"}, err: os.ErrNotExist},
		}},
		{cfg: config{n: 20, latency: 10 * time.Millisecond}, results: []result{
			{playbook: "loop", mode: mode{name: "bridge-pipelining"}, ran: true, wall: time.Second, err: os.ErrClosed},
		}},
	}
	sb := saveRuns("ansible-core 2.22.0b2", "2026-11-26 12:00", tables)
	if len(sb.Runs) != 2 {
		t.Fatalf("saved runs %+v, want the two that ran", sb.Runs)
	}
	path := savedPath(filepath.Join(t.TempDir(), "bench-2.22.md"))
	if filepath.Base(path) != "bench-2.22.json" {
		t.Fatalf("savedPath = %s", path)
	}
	data, err := json.Marshal(sb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := readSaved([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, []savedBench{sb}) {
		t.Fatalf("saved %+v, read back %+v", sb, back)
	}
	if r := sb.Runs[0]; !r.OK || r.N != 100 || r.Bytes != 128 || r.Turns != 300 || r.WallS != 10 {
		t.Errorf("stock run saved as %+v", r)
	}
	if r := sb.Runs[1]; r.OK || r.LatencyMS != 10 || r.N != 20 {
		t.Errorf("latency run saved as %+v", r)
	}
	if sb.find("loop", "bridge-pipelining", true) != nil {
		t.Error("a failed run is found as a result")
	}
	if _, err := readSaved([]string{filepath.Join(t.TempDir(), "missing.json")}); err == nil {
		t.Error("a missing file reads without error")
	}
}
