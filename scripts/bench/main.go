// Command bench measures stock Ansible against Ansible through
// ansible-bridge on the loopback lab, and prints a markdown table.
//
// Usage (from the module root; `make bench` runs the first form):
//
//	eval "$(scripts/lab.sh env)"   # or: scripts/lab.sh up
//	go run ./scripts/bench
//	go run ./scripts/bench -n 100 -latency 5ms -modes stock,bridge-pipelining -out bench.md
//
// # What it runs
//
// Two generated playbooks against the lab's sshd as $AB_USER, both with
// gather_facts: false and /usr/bin/python3:
//
//   - loop: one `command: hostname` task looping over range(n);
//   - tasks: n separate `command: hostname` tasks.
//
// Each runs in each selected mode, in one invocation:
//
//   - stock-default: the real ssh, pipelining off (Ansible's default);
//   - stock-pipelining: the real ssh, ANSIBLE_PIPELINING=True;
//   - bridge-default: the ssh/scp/sftp shims first on PATH, pipelining off;
//   - bridge-pipelining: the shims, ANSIBLE_PIPELINING=True.
//
// Every run starts cold. A stock run gets a fresh ControlPath directory and
// its ControlPersist master is stopped afterwards; a bridge run uses a
// private daemon (ANSIBLE_BRIDGE_SOCKET in the scratch directory) that is
// stopped before and after it. The bridge binary is built from the module
// root; if that or the shims fail, the bridge rows say so and the stock
// rows still run.
//
// # What it measures
//
// Ansible reaches sshd through an in-process relay (package
// integration/relay), a fresh one per run, that can add one-way latency
// (-latency; the round trip grows by twice it). Per run the table shows the
// wall time of ansible-playbook, the TCP connections opened, payload bytes
// (both directions) per task and request/response turns per task, as the
// relay counts them. A run counts as ok only if ansible-playbook exits 0,
// the recap shows ok=<tasks> with nothing failed or unreachable, and, for
// the loop, every item reports; otherwise its row is marked FAIL with the
// reason, its log is kept, and bench exits 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// config is what the flags and the lab environment select.
type config struct {
	n         int
	latency   time.Duration
	modes     []mode
	playbooks []string
	out       string
	timeout   time.Duration
	keep      bool

	lab  labEnv
	root string // module root, where `go build .` makes the binary
}

func main() {
	var cfg config
	flag.IntVar(&cfg.n, "n", 100, "tasks per playbook (loop items, or separate tasks)")
	flag.DurationVar(&cfg.latency, "latency", 0, "one-way `delay` added by the relay in each direction (RTT grows by twice this)")
	modes := flag.String("modes", "all", "comma-separated `modes`: "+strings.Join(modeNames(), ", ")+"; or stock, bridge, all")
	playbooks := flag.String("playbooks", "loop,tasks", "comma-separated `playbooks`: loop, tasks")
	flag.StringVar(&cfg.out, "out", "", "also write the markdown table to this `file`")
	flag.DurationVar(&cfg.timeout, "timeout", 15*time.Minute, "kill a single ansible-playbook run after this long")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the scratch directory (it is always kept when a run fails)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./scripts/bench [flags]\n\n"+
			"Needs the loopback lab: eval \"$(scripts/lab.sh env)\" (after scripts/lab.sh up).\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
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
	if err == nil && cfg.latency < 0 {
		err = errors.New("-latency must not be negative")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if cfg.lab, err = labFromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
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
