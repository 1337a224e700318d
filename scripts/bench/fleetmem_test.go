package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStatusField(t *testing.T) {
	status := "Name:\tpython3\nUid:\t1001\t1001\t1001\t1001\nVmRSS:\t   20480 kB\n"
	if n, ok := statusField(status, "VmRSS:"); !ok || n != 20480 {
		t.Errorf("VmRSS: %d %v, want 20480", n, ok)
	}
	if n, ok := statusField(status, "Uid:"); !ok || n != 1001 {
		t.Errorf("Uid: %d %v, want the real uid 1001", n, ok)
	}
	if _, ok := statusField(status, "VmHWM:"); ok {
		t.Error("a missing line was found")
	}
}

// The per-target figures are the growth from idle to peak over the
// number of targets; modes without a daemon show only the target side.
func TestRenderFleetMemory(t *testing.T) {
	var bridge, mitogen mode
	for _, m := range allModes() {
		switch m.name {
		case "bridge-pipelining":
			bridge = m
		case "mitogen":
			mitogen = m
		}
	}
	rs := []fleetResult{
		{mode: bridge, ran: true, mem: fleetMemory{
			idle:          daemonSample{pid: 7, rssKiB: 10 << 10, heapKiB: 2 << 10, heapInUseKiB: 3 << 10, stacksKiB: 512, runtimeKiB: 4 << 10, fds: 12, goroutines: 20},
			peak:          daemonSample{rssKiB: 110 << 10, fds: 212, goroutines: 1420},
			after:         daemonSample{pid: 7, rssKiB: 11 << 10, heapKiB: 3 << 10, heapInUseKiB: 4<<10 + 512, stacksKiB: 1024, runtimeKiB: 5 << 10},
			again:         daemonSample{pid: 7, rssKiB: 11<<10 + 512, heapKiB: 3 << 10},
			targetPeakKiB: 3000 << 10,
		}},
		{mode: mitogen, ran: true, mem: fleetMemory{targetPeakKiB: 2000 << 10}},
	}
	got := renderFleetMemory(config{fleetHosts: 100}, rs)
	for _, want := range []string{
		"| bridge-pipelining | 10.0 / 110.0 / 11.0 / 11.5 | 2.0 / 3.0 / 3.0 | 1024 | 2.0 | 14.0 | 30.0 |",
		"| mitogen | — | — | — | — | — | 20.0 |",
		"bridge-pipelining kept after close, beyond idle: heap in use +1.5 MiB (live +1.0), goroutine stacks +0.5 MiB, the runtime's span, cache and GC metadata +1.0 MiB",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

// TestRenderFleetBeyondFloor checks the fleet's ratios, those beyond the
// floor's run included.
func TestRenderFleetBeyondFloor(t *testing.T) {
	cfg := config{fleetHosts: 10, fleetTasks: 2}
	run := func(name string, wall, cpu float64) fleetResult {
		return fleetResult{mode: modeByName(t, name), ran: true, wall: time.Duration(wall * float64(time.Second)), cpu: time.Duration(cpu * float64(time.Second))}
	}
	got := renderFleet(cfg, []fleetResult{run("bridge-pipelining", 60, 50), run("mitogen", 100, 60), run("floor-pipelining", 20, 40)})
	for _, want := range []string{
		"Wall time, bridge-pipelining ÷ Mitogen: 0.60 ✓ (target ≤ 0.7)",
		"Controller CPU ÷ Mitogen's: 0.83 ✗ (target ≤ 0.8)",
		"(bridge − floor) ÷ (Mitogen − floor): wall 0.50, controller CPU 0.50.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("fleet report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "defaults") {
		t.Errorf("fleet report has a defaults line with no defaults run:\n%s", got)
	}

	got = renderFleet(cfg, []fleetResult{run("bridge-default", 90, 70), run("mitogen", 100, 60), run("floor-default", 40, 45),
		run("stock-default", 300, 120)})
	for _, want := range []string{
		"bridge-default ÷ Mitogen: 0.90; ÷ stock-default: 0.30. Controller CPU ÷ Mitogen's: 1.17; ÷ stock-default's: 0.58.",
		"(bridge-default − floor) ÷ (Mitogen − floor): wall 0.83, controller CPU 1.67.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("fleet report lacks %q:\n%s", want, got)
		}
	}
}

// TestFleetDefaultModes: the fleet runs Ansible's defaults only when asked.
func TestFleetDefaultModes(t *testing.T) {
	if slices.Contains(fleetModeNames(config{}), "bridge-default") {
		t.Error("the fleet runs bridge-default without -fleet-defaults")
	}
	got := fleetModeNames(config{fleetDefaults: true})
	for _, name := range slices.Concat(fleetModes, fleetDefaultModes) {
		if !slices.Contains(got, name) {
			t.Errorf("with -fleet-defaults the fleet lacks %s: %v", name, got)
		}
		modeByName(t, name) // a mode the bench knows
	}
}

// TestCgroupCPU reads a cgroup's CPU time as v1's cpuacct and v2's cpu
// controller write it, and the fleet table shows it per task.
func TestCgroupCPU(t *testing.T) {
	v1, v2 := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(v1, "cpuacct.usage"), []byte("2500000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v2, "cpu.stat"), []byte("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]time.Duration{v1: 2500 * time.Millisecond, v2: 1500 * time.Millisecond} {
		if got, ok := cgroupCPU(dir); !ok || got != want {
			t.Errorf("cgroupCPU(%s) = %v, %v; want %v", dir, got, ok, want)
		}
	}
	if _, ok := cgroupCPU(""); ok {
		t.Error("no cgroup read as counted")
	}
	if _, ok := cgroupCPU(t.TempDir()); ok {
		t.Error("a directory with no CPU file read as counted")
	}

	cfg := config{fleetHosts: 10, fleetTasks: 2}
	counted := fleetResult{mode: modeByName(t, "bridge-pipelining"), ran: true, wall: time.Second, targetCPU: 200 * time.Millisecond, targetCounted: true}
	uncounted := fleetResult{mode: modeByName(t, "mitogen"), ran: true, wall: time.Second}
	got := renderFleet(cfg, []fleetResult{counted, uncounted})
	for _, want := range []string{"| 10.0 | 0 | 0.0 KiB |", "| — | — | 0 | 0.0 KiB |"} {
		if !strings.Contains(got, want) {
			t.Errorf("fleet table lacks %q:\n%s", want, got)
		}
	}
}

// TestCheckCgroup: the lab's sshd must be in AB_TARGET_CGROUP for the
// bench to read its targets' CPU there.
func TestCheckCgroup(t *testing.T) {
	lab, cg := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(lab, "sshd.pid"), []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := labEnv{dir: lab, cgroup: cg}
	for procs, ok := range map[string]bool{"17\n4242\n": true, "17\n42420\n": false} {
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(procs), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := l.checkCgroup(); (err == nil) != ok {
			t.Errorf("cgroup.procs %q: checkCgroup() = %v, want ok %v", procs, err, ok)
		}
	}
	if err := (labEnv{dir: lab}).checkCgroup(); err != nil {
		t.Errorf("no cgroup: %v", err)
	}
}
