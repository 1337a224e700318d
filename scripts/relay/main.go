// Command relay runs a counting TCP relay (package integration/relay) in
// front of a server, typically the lab's sshd, and prints its counters as
// JSON.
//
// Usage:
//
//	go run ./scripts/relay -listen 127.0.0.1:2223 -target 127.0.0.1:2222 -latency 10ms [-interval 5]
//
// It prints one JSON line of stats when it gets SIGINT or SIGTERM and then
// exits, and with -interval also every interval while it runs. -latency is
// one-way delay added in each direction, so round trips grow by twice it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/integration/relay"
)

// seconds is a duration flag that also takes a bare number of seconds.
type seconds time.Duration

func (s *seconds) String() string { return time.Duration(*s).String() }

func (s *seconds) Set(v string) error {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		*s = seconds(n * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("want seconds or a duration such as 500ms: %w", err)
	}
	*s = seconds(d)
	return nil
}

// report is one line of output.
type report struct {
	Time   time.Time `json:"time"`
	Listen string    `json:"listen"`
	Target string    `json:"target"`
	relay.Stats
}

func main() {
	listen := flag.String("listen", "127.0.0.1:2223", "`address` to listen on")
	target := flag.String("target", "127.0.0.1:2222", "`address` to relay to")
	latency := flag.Duration("latency", 0, "one-way `delay` added in each direction (RTT grows by twice this)")
	var interval seconds
	flag.Var(&interval, "interval", "also print stats every `N` seconds (or a duration such as 500ms); 0 prints only at exit")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "relay: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*listen, *target, *latency, time.Duration(interval)); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
}

func run(listen, target string, latency, interval time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	r, err := relay.Start(ctx, listen, target, latency)
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Fprintf(os.Stderr, "relay: %s -> %s, one-way latency %v\n", r.Addr(), target, latency)

	enc := json.NewEncoder(os.Stdout)
	emit := func() error {
		if err := enc.Encode(report{time.Now(), r.Addr(), target, r.Stats()}); err != nil {
			return fmt.Errorf("write stats: %w", err)
		}
		return nil
	}

	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			if err := emit(); err != nil {
				return err
			}
		case <-ctx.Done():
			if err := r.Close(); err != nil {
				return err
			}
			return emit()
		}
	}
}
