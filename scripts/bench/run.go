package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/integration/relay"
)

// result is one (playbook, mode) run.
type result struct {
	playbook string
	mode     mode
	ran      bool // ansible-playbook ran; wall and stats are meaningful
	wall     time.Duration
	stats    relay.Stats
	err      error  // nil: verified ok
	log      string // ansible-playbook output
	sudo     int    // the target's sudo runs during the run (become playbook)
	// Bridge runs: module steps the persistent interpreters ran (routes
	// module and become), invocations counted as a slow path, and what
	// the interpreters spent checking their imports were fresh.
	bridgeCounts
}

// table is one set of runs: every selected (playbook, mode) at one n and
// latency.
type table struct {
	cfg     config // n and latency of this table
	results []result
}

// tools are the built binaries the modes need; nil/"" when not built.
type tools struct {
	bridge    *bridgeBin
	bridgeErr error
	floorDir  string
	floorErr  error
	// mitogenDir is Mitogen's strategy plugin directory.
	mitogenDir string
	mitogenErr error
}

// bench runs every selected (playbook, mode), the main table and then the
// -latency-run one, prints the report, writes -out and the chart, and
// reports whether any run failed.
func bench(ctx context.Context, cfg config) (failed bool, err error) {
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		return false, fmt.Errorf("ansible-playbook not found: %w (run scripts/setup.sh)", err)
	}
	dir, err := os.MkdirTemp("", "ab-bench-")
	if err != nil {
		return false, fmt.Errorf("scratch dir: %w", err)
	}
	defer func() {
		if failed || cfg.keep {
			fmt.Fprintf(os.Stderr, "bench: scratch directory kept: %s\n", dir)
			return
		}
		os.RemoveAll(dir)
	}()

	var tl tools
	if slices.ContainsFunc(cfg.modes, func(m mode) bool { return m.bridge }) {
		fmt.Fprintln(os.Stderr, "bench: building ansible-bridge and its shims")
		tl.bridge, tl.bridgeErr = buildBridge(ctx, cfg.root, dir)
		if tl.bridgeErr != nil {
			fmt.Fprintf(os.Stderr, "bench: bridge modes cannot run: %v\n", tl.bridgeErr)
		}
	}
	if slices.ContainsFunc(cfg.modes, func(m mode) bool { return m.mitogen }) {
		tl.mitogenDir, tl.mitogenErr = findMitogen(ctx, cfg.root)
		if tl.mitogenErr != nil {
			fmt.Fprintf(os.Stderr, "bench: mitogen cannot run: %v\n", tl.mitogenErr)
		}
	}
	if slices.ContainsFunc(cfg.modes, func(m mode) bool { return m.floor }) {
		fmt.Fprintln(os.Stderr, "bench: building the floor (scripts/floor)")
		tl.floorDir, tl.floorErr = buildFloor(ctx, cfg.root, dir)
		if tl.floorErr != nil {
			fmt.Fprintf(os.Stderr, "bench: floor modes cannot run: %v\n", tl.floorErr)
		}
	}

	if slices.Contains(cfg.playbooks, "become") {
		if err := installSudoWrapper(cfg.lab); err != nil {
			return false, fmt.Errorf("sudo wrapper: %w", err)
		}
	}
	tables := []*table{{cfg: cfg}}
	if cfg.latRun > 0 {
		lc := cfg
		lc.n, lc.latency, lc.repeat = cfg.latN, cfg.latRun, 1
		tables = append(tables, &table{cfg: lc})
	}
	for i, t := range tables {
		tdir := dir
		if i > 0 {
			tdir = filepath.Join(dir, fmt.Sprintf("latency-%v", t.cfg.latency))
			if err := os.Mkdir(tdir, 0o755); err != nil {
				return true, fmt.Errorf("scratch dir: %w", err)
			}
			fmt.Fprintf(os.Stderr, "bench: second table: n=%d, one-way latency %v (RTT +%v)\n", t.cfg.n, t.cfg.latency, 2*t.cfg.latency)
		}
		t.results, err = runTable(ctx, t.cfg, tdir, tl)
		if err != nil {
			return true, err
		}
	}

	for _, t := range tables {
		for _, r := range t.results {
			if r.err != nil {
				failed = true
				if r.log != "" {
					fmt.Fprintf(os.Stderr, "bench: %s / %s (n=%d, latency %v) failed: %v (log: %s)\n",
						r.playbook, r.mode.name, t.cfg.n, t.cfg.latency, r.err, r.log)
				}
			}
		}
	}
	var fleet []fleetResult
	if cfg.fleetHosts > 0 && ctx.Err() == nil {
		fleet = runFleet(ctx, cfg, dir, tl)
		failed = failed || slices.ContainsFunc(fleet, func(r fleetResult) bool { return r.err != nil })
	}
	var first []firstResult
	if cfg.firstRuns > 0 && ctx.Err() == nil {
		first = runFirst(ctx, cfg, dir, tl)
		failed = failed || slices.ContainsFunc(first, func(r firstResult) bool { return r.err != nil })
	}
	if ctx.Err() != nil {
		failed = true
	}
	version := ansibleVersion(ctx)
	report := renderReport(cfg, version, tables[0].results)
	for _, t := range tables[1:] {
		report += renderLatencyReport(t.cfg, t.results)
	}
	if len(fleet) > 0 {
		report += renderFleet(cfg, fleet)
	}
	if len(first) > 0 {
		report += renderFirst(cfg, first)
	}
	fmt.Print(report)
	if cfg.out != "" {
		if err := os.WriteFile(cfg.out, []byte(report), 0o644); err != nil {
			return true, fmt.Errorf("write -out: %w", err)
		}
		data, err := json.MarshalIndent(saveRuns(version, time.Now().Format("2006-01-02 15:04"), tables), "", "\t")
		if err == nil {
			err = os.WriteFile(savedPath(cfg.out), append(data, '\n'), 0o644)
		}
		if err != nil {
			return true, fmt.Errorf("write the runs' JSON: %w", err)
		}
	}
	if cfg.svg != "" {
		var sections []chartSection
		for _, t := range tables {
			sections = append(sections, chartSection{cfg: t.cfg, results: t.results})
		}
		if err := writeChartFile(cfg.svg, sections); err != nil {
			return true, err
		}
		fmt.Fprintf(os.Stderr, "bench: chart written to %s\n", cfg.svg)
	}
	if ctx.Err() != nil {
		return true, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return failed, nil
}

// runTable writes the playbooks for cfg.n into dir and runs every selected
// (playbook, mode) there, cfg.repeat times: for each playbook, round after
// round of every mode, so that a noisy stretch of the machine hits the
// modes alike. Each (playbook, mode) reports the run with the median wall
// time, or its first failure.
func runTable(ctx context.Context, cfg config, dir string, tl tools) ([]result, error) {
	books, err := writePlaybooks(dir, cfg.n)
	if err != nil {
		return nil, err
	}
	rounds := max(cfg.repeat, 1)
	var results []result
	for _, pb := range cfg.playbooks {
		runs := make([][]result, len(cfg.modes))
		for round := 0; round < rounds; round++ {
			for i, m := range cfg.modes {
				if ctx.Err() != nil {
					break
				}
				r := result{playbook: pb, mode: m, err: notRunnable(m, tl)}
				if r.err == nil {
					fmt.Fprintf(os.Stderr, "bench: %s / %s%s ... ", pbLabel(pb, cfg.n), m.name, roundLabel(round, rounds))
					r = runOne(ctx, cfg, dir, books[pb], pb, m, tl, round)
					fmt.Fprintln(os.Stderr, r.summary())
				}
				runs[i] = append(runs[i], r)
			}
		}
		for _, rs := range runs {
			if len(rs) > 0 {
				results = append(results, medianRun(rs))
			}
		}
	}
	return results, nil
}

// notRunnable says why mode m cannot run: its tool failed to build or
// was not found.
func notRunnable(m mode, tl tools) error {
	switch {
	case m.bridge && tl.bridge == nil:
		return fmt.Errorf("not run: %w", firstLine(tl.bridgeErr))
	case m.floor && tl.floorDir == "":
		return fmt.Errorf("not run: %w", firstLine(tl.floorErr))
	case m.mitogen && tl.mitogenDir == "":
		return fmt.Errorf("not run: %w", firstLine(tl.mitogenErr))
	}
	return nil
}

func roundLabel(round, rounds int) string {
	if rounds == 1 {
		return ""
	}
	return fmt.Sprintf(" (run %d of %d)", round+1, rounds)
}

// medianRun is the first failed run of rs, else the one with the median
// wall time (the lower middle one of an even count).
func medianRun(rs []result) result {
	for _, r := range rs {
		if r.err != nil {
			return r
		}
	}
	sorted := slices.Clone(rs)
	slices.SortStableFunc(sorted, func(a, b result) int { return cmp.Compare(a.wall, b.wall) })
	return sorted[(len(sorted)-1)/2]
}

// summary is the progress line for a finished run.
func (r result) summary() string {
	if r.err != nil {
		return fmt.Sprintf("FAIL after %.1fs: %v", r.wall.Seconds(), firstLine(r.err))
	}
	return fmt.Sprintf("ok, %.1fs", r.wall.Seconds())
}

// runOne runs one playbook in one mode, cold, through a fresh relay.
func runOne(ctx context.Context, cfg config, dir, book, pb string, m mode, tl tools, round int) result {
	bridge := tl.bridge
	res := result{playbook: pb, mode: m}
	tag := pb + "-" + m.name
	if round > 0 {
		tag += fmt.Sprintf("-%d", round+1)
	}
	res.log = filepath.Join(dir, tag+".log")

	// A fresh ControlPath directory per run, so a stock run starts without
	// a master; bridge runs get one too, so both see the same ssh args.
	cpDir := filepath.Join(dir, "cp-"+tag)
	if err := os.Mkdir(cpDir, 0o700); err != nil {
		res.err = fmt.Errorf("control path dir: %w", err)
		return res
	}
	if bridge != nil && m.bridge {
		_ = bridge.stop(ctx) // no daemon yet is fine
		if pb == "first" {
			// The first-task scenario times a run whose daemon is up.
			if err := bridge.startDaemon(ctx, cpDir); err != nil {
				res.err = err
				return res
			}
		}
	}

	rl, err := relay.Start(ctx, "127.0.0.1:0", cfg.lab.target(), cfg.latency)
	if err != nil {
		res.err = err
		return res
	}
	defer rl.Close()
	inv := filepath.Join(dir, "inventory-"+tag+".ini")
	if err := writeInventory(inv, cfg.lab, rl.Port(), cfg.python); err != nil {
		res.err = err
		return res
	}

	logf, err := os.Create(res.log)
	if err != nil {
		res.err = fmt.Errorf("log file: %w", err)
		return res
	}
	defer logf.Close()

	env := append(os.Environ(),
		"ANSIBLE_CONFIG="+filepath.Join(dir, "ansible.cfg"),
		"ANSIBLE_HOST_KEY_CHECKING=False",
		"ANSIBLE_NOCOLOR=1",
		"ANSIBLE_FORCE_COLOR=0",
		"ANSIBLE_SSH_CONTROL_PATH_DIR="+cpDir,
		"ANSIBLE_PIPELINING="+strconv.FormatBool(m.pipelining),
	)
	switch {
	case m.bridge:
		env = append(env,
			"PATH="+bridge.shims+string(os.PathListSeparator)+os.Getenv("PATH"),
			"ANSIBLE_BRIDGE_SOCKET="+bridge.socket,
		)
	case m.floor:
		env = append(env, "PATH="+tl.floorDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	case m.mitogen:
		env = append(env, "ANSIBLE_STRATEGY_PLUGINS="+tl.mitogenDir, "ANSIBLE_STRATEGY=mitogen_linear")
	}

	runCtx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, "ansible-playbook", "-i", inv, book)
	cmd.Dir = dir
	cmd.Env = env
	// Files, not pipes: a daemon or ssh master that inherits them must not
	// keep Wait from returning.
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second

	sudoBefore := sudoRuns(cfg.lab)
	start := time.Now()
	runErr := cmd.Run()
	res.wall = time.Since(start)
	res.ran = true
	res.sudo = sudoRuns(cfg.lab) - sudoBefore

	// Tear down what the run left, then close the relay, which waits for
	// its connections, so the counters are final.
	var teardownErr error
	if m.bridge {
		// For diagnosis (did the daemon serve, or did the shims fall back
		// to the real ssh?), best effort.
		st, _ := bridge.command(context.WithoutCancel(ctx), "status").CombinedOutput()
		_ = os.WriteFile(filepath.Join(dir, tag+".status"), st, 0o644)
		if js, err := bridge.command(context.WithoutCancel(ctx), "status", "--json").Output(); err == nil {
			res.bridgeCounts = routeCounts(js)
		}
		teardownErr = bridge.stop(context.WithoutCancel(ctx))
		// A shim that fell back to the real ssh may have left a master.
		_ = stopMasters(context.WithoutCancel(ctx), cpDir)
	} else {
		teardownErr = stopMasters(context.WithoutCancel(ctx), cpDir)
	}
	if err := rl.Close(); err != nil {
		teardownErr = errors.Join(teardownErr, err)
	}
	res.stats = rl.Stats()

	if err := logf.Sync(); err != nil {
		teardownErr = errors.Join(teardownErr, err)
	}
	out, err := os.ReadFile(res.log)
	if err != nil {
		res.err = fmt.Errorf("read log: %w", err)
		return res
	}
	switch {
	case runCtx.Err() != nil && ctx.Err() == nil:
		res.err = fmt.Errorf("timed out after %v", cfg.timeout)
	case ctx.Err() != nil:
		res.err = errors.New("interrupted")
	default:
		res.err = verify(runErr, string(out), pb, cfg.n)
	}
	if res.err == nil && teardownErr != nil {
		res.err = fmt.Errorf("teardown: %w", teardownErr)
	}
	return res
}

// recapRE matches the PLAY RECAP line of the bench host.
var recapRE = regexp.MustCompile(`(?m)^target\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)`)

// itemRE matches a successful loop item line of the default callback.
var itemRE = regexp.MustCompile(`(?m)^(ok|changed): \[target\] => \(item=\d+\)`)

// verify checks that a run succeeded: exit status 0, a recap with
// ok=<tasks> and nothing failed, unreachable or skipped, and for the loop
// one success line per item.
func verify(runErr error, out, pb string, n int) error {
	if runErr != nil {
		var ee *exec.ExitError
		if errors.As(runErr, &ee) {
			if m := recapRE.FindStringSubmatch(out); m != nil {
				return fmt.Errorf("ansible-playbook exit %d, recap ok=%s unreachable=%s failed=%s", ee.ExitCode(), m[1], m[3], m[4])
			}
			return fmt.Errorf("ansible-playbook exit %d", ee.ExitCode())
		}
		return fmt.Errorf("ansible-playbook: %w", runErr)
	}
	m := recapRE.FindStringSubmatch(out)
	if m == nil {
		return errors.New("no PLAY RECAP line for target")
	}
	num := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	wantOK := n
	switch pb {
	case "loop":
		wantOK = 1
	case "first", "job":
		wantOK = firstTasks
	}
	if ok, unreach, fail, skip := num(1), num(3), num(4), num(5); ok != wantOK || unreach != 0 || fail != 0 || skip != 0 {
		return fmt.Errorf("recap ok=%d unreachable=%d failed=%d skipped=%d, want ok=%d", ok, unreach, fail, skip, wantOK)
	}
	if pb == "loop" {
		if got := len(itemRE.FindAllString(out, -1)); got != n {
			return fmt.Errorf("%d of %d loop items reported ok", got, n)
		}
	}
	return nil
}

// firstLine returns err cut to its first line, for table cells.
func firstLine(err error) error {
	if err == nil {
		return nil
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return errors.New(s)
}

// bridgeCounts are what a bridge run's daemon counted.
type bridgeCounts struct {
	interp, slow int           // module steps in interpreters; slow-path invocations
	freshness    time.Duration // spent checking imports were unchanged
}

// routeCounts sums, over the targets of `ansible-bridge status --json`,
// the module steps run in interpreters, the slow-path invocations and
// the time the freshness checks took.
func routeCounts(statusJSON []byte) bridgeCounts {
	var st struct {
		Targets []struct {
			Routes    map[string]int `json:"routes"`
			Slow      map[string]int `json:"slow"`
			Freshness int64          `json:"freshness_us"`
		} `json:"targets"`
	}
	var c bridgeCounts
	if json.Unmarshal(statusJSON, &st) != nil {
		return c
	}
	for _, t := range st.Targets {
		c.interp += t.Routes["module"] + t.Routes["become"]
		for _, n := range t.Slow {
			c.slow += n
		}
		c.freshness += time.Duration(t.Freshness) * time.Microsecond
	}
	return c
}
