package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What a fleet run costs in memory, file descriptors and goroutines: the
// daemon's before the run, at its peak and after its connections close;
// the target side's (the PSS of every process of the lab user: sshd's
// session processes, interpreters, modules) at its peak.

// daemonSample is the daemon's footprint at one moment.
type daemonSample struct {
	pid     int
	rssKiB  int64
	heapKiB int64 // live on the Go heap (status's memory.heap_live)
	// What else the runtime holds (status's memory): spans with objects,
	// goroutine stacks, and its span, cache and GC metadata.
	heapInUseKiB, stacksKiB, runtimeKiB int64
	fds                                 int
	goroutines                          int
	gcs, gcsForced                      uint32 // status's memory.gc_cycles and gc_forced
}

// fleetMemory is a fleet run's footprint.
type fleetMemory struct {
	idle, peak, after daemonSample // the daemon (bridge modes)
	again             daemonSample // after a second run on the same daemon
	targetPeakKiB     int64        // the lab user's processes' PSS, summed
}

// daemonStatus is the part of `ansible-bridge status --json` the bench reads.
type daemonStatus struct {
	PID        int `json:"pid"`
	Goroutines int `json:"goroutines"`
	Memory     struct {
		HeapLive  int64  `json:"heap_live"`
		HeapInUse int64  `json:"heap_in_use"`
		Stacks    int64  `json:"stacks"`
		Runtime   int64  `json:"runtime"`
		GCCycles  uint32 `json:"gc_cycles"`
		GCForced  uint32 `json:"gc_forced"`
	} `json:"memory"`
	Targets []struct {
		ControlPath string `json:"control_path"`
		Connections int    `json:"connections"`
	} `json:"targets"`
}

func (b *bridgeBin) status(ctx context.Context) (daemonStatus, error) {
	var st daemonStatus
	out, err := b.command(ctx, "status", "--json").Output()
	if err != nil {
		return st, fmt.Errorf("ansible-bridge status --json: %w", err)
	}
	return st, json.Unmarshal(out, &st)
}

// sample reads the daemon's footprint.
func (b *bridgeBin) sample(ctx context.Context) (daemonSample, error) {
	st, err := b.status(ctx)
	if err != nil {
		return daemonSample{}, err
	}
	m := st.Memory
	return daemonSample{pid: st.PID, rssKiB: procRSS(st.PID), heapKiB: m.HeapLive / 1024,
		heapInUseKiB: m.HeapInUse / 1024, stacksKiB: m.Stacks / 1024, runtimeKiB: m.Runtime / 1024,
		fds: procFDs(st.PID), goroutines: st.Goroutines, gcs: m.GCCycles, gcsForced: m.GCForced}, nil
}

// closeTargets asks the daemon to close every target's connections, as
// ssh -O exit on each ControlPath does, and waits until none is left and
// the goroutines are back to at most idle's (or 30 s have passed).
func (b *bridgeBin) closeTargets(ctx context.Context, idle daemonSample) error {
	st, err := b.status(ctx)
	if err != nil {
		return err
	}
	for _, t := range st.Targets {
		if t.Connections == 0 {
			continue // closed already (the warm-up's target): ssh -O exit would fail
		}
		cmd := exec.CommandContext(ctx, filepath.Join(b.shims, "ssh"), "-o", "ControlPath="+t.ControlPath, "-O", "exit", "fleet")
		cmd.Env = append(os.Environ(), "ANSIBLE_BRIDGE_SOCKET="+b.socket)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("ssh -O exit %s: %w: %s", t.ControlPath, err, strings.TrimSpace(string(out)))
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := b.status(ctx)
		if err != nil {
			return err
		}
		open := 0
		for _, t := range st.Targets {
			open += t.Connections
		}
		if open == 0 && st.Goroutines <= idle.goroutines {
			break
		}
		time.Sleep(200 * time.Millisecond) // polling a daemon the bench does not control
	}
	return nil
}

// settledRSS is the daemon's lowest RSS over the 5 s after its last
// connection closed: it returns freed memory to the system then and two
// of its once-a-second ticks later (Server.expireIdle).
func settledRSS(pid int) int64 {
	low := procRSS(pid)
	for i := 0; i < 10; i++ {
		time.Sleep(500 * time.Millisecond)
		low = min(low, procRSS(pid))
	}
	return low
}

// settledSample is the daemon's footprint once its connections have
// closed, with the lowest RSS settledRSS saw.
func (b *bridgeBin) settledSample(ctx context.Context, pid int) (daemonSample, error) {
	low := settledRSS(pid)
	s, err := b.sample(ctx)
	s.rssKiB = min(low, s.rssKiB)
	return s, err
}

// watchFleet samples the daemon (pid 0: none) every half second and
// uid's processes every 30 s until stop is called, which returns the
// peaks. The targets' PSS is sampled seldom because it is costly: the
// kernel walks every page table of every target process for it. At 200
// targets one sample took ~0.45 s of CPU: every half second, that was
// ~17 % of this machine's CPU (perf), taken from the run it measured,
// and more where a mode has more processes. The targets stay connected
// from their first task to the end, so their peak is a plateau; stop
// reads them once more, before their connections close, so a run
// shorter than 30 s is read too.
func watchFleet(ctx context.Context, b *bridgeBin, pid, uid int) (stop func() (daemonSample, int64)) {
	var mu sync.Mutex
	var peak daemonSample
	var targetPeak int64
	done := make(chan struct{})
	finished := make(chan struct{})
	look := func(withStatus, withTargets bool) {
		var s daemonSample
		if pid > 0 {
			s.rssKiB, s.fds = procRSS(pid), procFDs(pid)
			if withStatus {
				if st, err := b.status(ctx); err == nil {
					s.goroutines = st.Goroutines
				}
			}
		}
		var u int64
		if withTargets {
			u = userPSS(uid)
		}
		mu.Lock()
		peak.rssKiB, peak.fds, peak.goroutines = max(peak.rssKiB, s.rssKiB), max(peak.fds, s.fds), max(peak.goroutines, s.goroutines)
		targetPeak = max(targetPeak, u)
		mu.Unlock()
	}
	go func() {
		defer close(finished)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-tick.C:
				look(n%4 == 0, n%60 == 0) // status (a process) every 2 s, the targets every 30 s
			}
		}
	}()
	return func() (daemonSample, int64) {
		close(done)
		<-finished
		look(false, true)
		mu.Lock()
		defer mu.Unlock()
		return peak, targetPeak
	}
}

// labUID is the lab user's uid (-1 when unknown).
func labUID(name string) int {
	u, err := user.Lookup(name)
	if err != nil {
		return -1
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return -1
	}
	return uid
}

// procRSS is pid's resident set in KiB (0 when unreadable).
func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	kib, _ := statusField(string(b), "VmRSS:")
	return kib
}

// statusField is the first number on /proc/PID/status's line key.
func statusField(status, key string) (int64, bool) {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, err := strconv.ParseInt(f[0], 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// procFDs is the number of pid's open file descriptors.
func procFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(ents)
}

// userPSS sums the proportional set sizes of uid's processes, in KiB:
// pages a zygote's children share with it count once in all.
func userPSS(uid int) int64 {
	if uid < 0 {
		return 0
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var sum int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		if real, ok := statusField(string(b), "Uid:"); !ok || int(real) != uid {
			continue
		}
		if r, err := os.ReadFile("/proc/" + e.Name() + "/smaps_rollup"); err == nil {
			kib, _ := statusField(string(r), "Pss:")
			sum += kib
		}
	}
	return sum
}
