// Command bench measures stock Ansible against Ansible through
// ansible-bridge on the loopback lab, and prints a markdown table.
//
// Usage (from the module root):
//
//	eval "$(scripts/lab.sh env)"   # or: scripts/lab.sh up
//	go run ./scripts/bench -out bench.md -latency-run 10ms -latency-n 20   # what `make bench` runs
//	go run ./scripts/bench
//	go run ./scripts/bench -n 100 -latency 5ms -modes stock,bridge-pipelining -out bench.md
//
// # What it runs
//
// Two generated playbooks against the lab's sshd as $AB_USER, both with
// gather_facts: false and the targets' python (-python, default
// /usr/bin/python3):
//
//   - loop: one `command: hostname` task looping over range(n);
//   - tasks: n separate `command: hostname` tasks.
//
// Each runs in each selected mode, in one invocation:
//
//   - stock-default: the real ssh, pipelining off (Ansible's default);
//   - stock-pipelining: the real ssh, ANSIBLE_PIPELINING=True;
//   - bridge-default: the ssh/scp/sftp shims first on PATH, pipelining off;
//   - bridge-pipelining: the shims, ANSIBLE_PIPELINING=True;
//   - floor-default, floor-pipelining: Ansible's own overhead. scripts/floor
//     (built into the scratch directory, linked as ssh, scp and sftp) is
//     first on PATH and answers each of Ansible's calls at once with the
//     canned result OpenSSH and the target would give. No fake ssh can be
//     faster; the acceptance target is bridge wall ≤ 1.5 × the floor of the
//     same pipelining setting.
//   - mitogen: Mitogen's mitogen_linear strategy (the peer tarball,
//     unpacked by scripts/ansible-versions.sh mitogen) with the real ssh,
//     the incumbent the bridge is measured against: a "bridge ÷ Mitogen"
//     table follows the main one (targets: pipelining ≤ 0.75 ×, Ansible's
//     defaults ≤ 1.25 ×, and with pipelining the time beyond the floor
//     ≤ 0.6 × Mitogen's).
//
// Every run starts cold. A stock run gets a fresh ControlPath directory and
// its ControlPersist master is stopped afterwards; a bridge run uses a
// private daemon (ANSIBLE_BRIDGE_SOCKET in the scratch directory) that is
// stopped before and after it. The bridge binary is built from the module
// root; if that or the shims fail, the bridge rows say so and the stock
// rows still run (likewise for the floor).
//
// # What it measures
//
// Ansible reaches sshd through an in-process relay (package
// integration/relay), a fresh one per run, that can add one-way latency
// (-latency; the round trip grows by twice it). Per run the table shows the
// wall time of ansible-playbook, the TCP connections opened, payload bytes
// (both directions) per task and request/response turns per task, as the
// relay counts them (a floor run uses no network, so those are 0), and the
// wall time ÷ the floor of the same pipelining setting. A run counts as ok only if ansible-playbook exits 0,
// the recap shows ok=<tasks> with nothing failed or unreachable, and, for
// the loop, every item reports; otherwise its row is marked FAIL with the
// reason, its log is kept, and bench exits 1.
//
// With -repeat N (make bench uses 3) each playbook runs N rounds of every
// mode, and each row is the run with the median wall time: one run of a
// few seconds moves by several per cent between runs on a shared machine.
//
// With -latency-run D, a second, smaller table (-latency-n tasks) follows,
// with the relay adding one-way latency D (RTT +2D), to show round trips
// per task where they cost. `make bench` uses 10ms (RTT +20ms), n=20.
//
// # Fleet
//
// With -fleet N (make bench uses 50), N targets at once: the lab's sshd at
// 127.0.0.2 and up (a relay on each address), forks=N, -fleet-tasks
// `command: hostname` tasks each, in stock-pipelining, mitogen,
// bridge-pipelining and floor-pipelining (Ansible's own cost at that
// scale). The table gives wall time, the controller's CPU time
// (ansible-playbook, every process it waited for, and the bridge daemon)
// per task, TCP connections per target, and what the bridge and Mitogen
// spend beyond the floor. -fleet-latency D puts the
// fleet behind a WAN: each relay adds one-way latency D (RTT +2D).
//
// # First task
//
// With -first N (make bench uses 5), the first task of a run with no
// connection yet, N times per mode, timed between two controller-side
// set_fact tasks (first.go): the connection, login, interpreter start and
// module run that every new run pays once.
//
// # Versions
//
// With -out FILE.md the runs are also saved as FILE.json. `go run
// ./scripts/bench -versions [-out F.md] bench-2.14.json bench-2.22.json ...`
// compares such files from different ansible-core versions (versions.go):
// floor, stock, bridge and Mitogen per version, the bridge ÷ stock ratio
// against the first file's, the same ratio above Ansible's own floor, and
// the bridge's bytes and turns per task at the added latency. `make bench`
// with more than one version writes it to bench-versions.md.
//
// # Chart
//
// With -out FILE.md (or -svg), bench also writes an SVG bar chart of the
// wall times (FILE.svg next to the markdown): one bar per run, the floor of
// the same mode marked on each stock and bridge bar, and the 1.5 × floor
// target on the bridge bars.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// config is what the flags and the lab environment select.
type config struct {
	n         int
	latency   time.Duration
	latRun    time.Duration // one-way latency of the second table; 0: none
	latN      int           // tasks per playbook in the second table
	svg       string        // chart file; "" with out set: out with .svg
	modes     []mode
	playbooks []string
	out       string
	timeout   time.Duration
	keep      bool
	repeat    int // runs per (playbook, mode) in the main table; the median is reported
	// The fleet scenario: fleetHosts targets at once (0: off), fleetTasks
	// tasks each, fleetForks forks (0: fleetHosts).
	fleetHosts, fleetTasks, fleetForks int
	// fleetLatency is the one-way delay each fleet target's relay adds.
	fleetLatency time.Duration
	// fleetDefaults adds the fleet's runs with Ansible's defaults.
	fleetDefaults bool
	// firstRuns is the runs per mode of the first-task scenario (0: off).
	firstRuns int
	// python is the targets' interpreter (ansible_python_interpreter).
	python string

	lab  labEnv
	root string // module root, where `go build .` makes the binary
}

// forks is Ansible's forks in the fleet scenario.
func (c config) forks() int {
	if c.fleetForks > 0 {
		return c.fleetForks
	}
	return c.fleetHosts
}

func main() {
	var cfg config
	flag.IntVar(&cfg.n, "n", 100, "tasks per playbook (loop items, or separate tasks)")
	flag.DurationVar(&cfg.latency, "latency", 0, "one-way `delay` added by the relay in each direction (RTT grows by twice this)")
	flag.DurationVar(&cfg.latRun, "latency-run", 0, "after the main table, run a second one with this one-way `delay` (0: none)")
	flag.IntVar(&cfg.latN, "latency-n", 20, "tasks per playbook in the -latency-run table")
	modes := flag.String("modes", "all", "comma-separated `modes`: "+strings.Join(modeNames(), ", ")+"; or stock, bridge, floor, all")
	playbooks := flag.String("playbooks", "loop,tasks,become", "comma-separated `playbooks`: loop, tasks, become")
	flag.StringVar(&cfg.out, "out", "", "also write the markdown table to this `file` (and the chart next to it, as .svg)")
	flag.StringVar(&cfg.svg, "svg", "", "write the SVG chart to this `file` (default: -out with .svg)")
	flag.DurationVar(&cfg.timeout, "timeout", 15*time.Minute, "kill a single ansible-playbook run after this long")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the scratch directory (it is always kept when a run fails)")
	flag.IntVar(&cfg.fleetHosts, "fleet", 0, "after the tables, run the fleet scenario with this many `targets` (127.0.0.2 on; 0: off) in modes "+strings.Join(fleetModes, ", "))
	flag.IntVar(&cfg.fleetTasks, "fleet-tasks", 20, "tasks per target in the fleet scenario")
	flag.IntVar(&cfg.fleetForks, "fleet-forks", 0, "Ansible's forks in the fleet scenario (0: as many as targets)")
	flag.BoolVar(&cfg.fleetDefaults, "fleet-defaults", false, "also run the fleet scenario with Ansible's defaults, in modes "+strings.Join(fleetDefaultModes, ", ")+" (as -modes selects)")
	flag.DurationVar(&cfg.fleetLatency, "fleet-latency", 0, "one-way `delay` each fleet target's relay adds in each direction (a WAN fleet; 0: none)")
	flag.IntVar(&cfg.firstRuns, "first", 0, "after the tables, time the first task of a cold run this many `times` per mode (0: off) in modes "+strings.Join(firstModes, ", "))
	flag.StringVar(&cfg.python, "python", "/usr/bin/python3", "the targets' python (ansible_python_interpreter): the lab's pythons are in $AB_PYTHONS")
	flag.IntVar(&cfg.repeat, "repeat", 1, "runs of each playbook and mode in the main table, interleaved; the table shows the run with the median wall time")
	versions := flag.Bool("versions", false, "compare the `JSON` files earlier runs wrote next to -out (the arguments; the first is the reference, normally 2.14) across ansible-core versions, print the table (and write it to -out), and exit")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./scripts/bench [flags]\n\n"+
			"Needs the loopback lab: eval \"$(scripts/lab.sh env)\" (after scripts/lab.sh up).\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *versions {
		os.Exit(compareVersions(flag.Args(), cfg.out))
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	var err error
	if cfg.modes, err = parseModes(*modes); err == nil {
		cfg.playbooks, err = parsePlaybooks(*playbooks)
	}
	if err == nil && cfg.n < 1 {
		err = errors.New("-n must be at least 1")
	}
	if err == nil && cfg.repeat < 1 {
		err = errors.New("-repeat must be at least 1")
	}
	if err == nil && (cfg.latency < 0 || cfg.latRun < 0) {
		err = errors.New("-latency and -latency-run must not be negative")
	}
	if err == nil && cfg.latRun > 0 && cfg.latN < 1 {
		err = errors.New("-latency-n must be at least 1")
	}
	if cfg.svg == "" && cfg.out != "" {
		cfg.svg = strings.TrimSuffix(cfg.out, filepath.Ext(cfg.out)) + ".svg"
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if cfg.lab, err = labFromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := cfg.lab.checkCgroup(); err != nil {
		// An sshd restarted outside lab.sh (TestSSHDFaults restarts it)
		// runs elsewhere: its cgroup would read zero.
		fmt.Fprintf(os.Stderr, "bench: %v: no target CPU in the fleet table (scripts/lab.sh up puts sshd back)\n", err)
		cfg.lab.cgroup = ""
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.root, err = moduleRoot(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	failed, err := bench(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}
