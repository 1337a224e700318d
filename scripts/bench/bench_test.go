package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseModes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{in: "all", want: modeNames()},
		{in: "stock", want: []string{"stock-default", "stock-pipelining"}},
		{in: "floor,bridge-default", want: []string{"bridge-default", "floor-default", "floor-pipelining"}},
		{in: "bridge-pipelining, stock-default", want: []string{"stock-default", "bridge-pipelining"}},
		{in: "bridge,bridge-default", want: []string{"bridge-default", "bridge-pipelining"}},
		{in: "stock-fast", err: true},
		{in: "", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			ms, err := parseModes(tc.in)
			if tc.err {
				if err == nil {
					t.Fatalf("parseModes(%q) succeeded", tc.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseModes(%q): %v", tc.in, err)
			}
			var got []string
			for _, m := range ms {
				got = append(got, m.name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseModes(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	recap := func(ok, failed int) string {
		return "PLAY RECAP ****\ntarget                     : ok=" + strconv.Itoa(ok) +
			"    changed=" + strconv.Itoa(ok) + "    unreachable=0    failed=" + strconv.Itoa(failed) +
			"    skipped=0    rescued=0    ignored=0   \n"
	}
	items := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString("changed: [target] => (item=" + strconv.Itoa(i) + ")\n")
		}
		return b.String()
	}
	exit2 := exec.Command("sh", "-c", "exit 2").Run()
	for _, tc := range []struct {
		name   string
		runErr error
		out    string
		pb     string
		n      int
		errHas string // "" means success
	}{
		{name: "tasks ok", out: recap(3, 0), pb: "tasks", n: 3},
		{name: "loop ok", out: items(3) + recap(1, 0), pb: "loop", n: 3},
		{name: "exit status", runErr: exit2, out: recap(2, 1), pb: "tasks", n: 3, errHas: "exit 2, recap ok=2 unreachable=0 failed=1"},
		{name: "start failure", runErr: errors.New("boom"), pb: "tasks", n: 3, errHas: "boom"},
		{name: "no recap", out: "ERROR! oops\n", pb: "tasks", n: 3, errHas: "no PLAY RECAP"},
		{name: "too few ok", out: recap(2, 0), pb: "tasks", n: 3, errHas: "ok=2"},
		{name: "failed task", out: recap(3, 1), pb: "tasks", n: 3, errHas: "failed=1"},
		{name: "missing items", out: items(2) + recap(1, 0), pb: "loop", n: 3, errHas: "2 of 3 loop items"},
		{name: "first task ok", out: recap(firstTasks, 0), pb: "first", n: 100},
		{name: "first task failed", out: recap(2, 1), pb: "first", n: 100, errHas: "failed=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verify(tc.runErr, tc.out, tc.pb, tc.n)
			switch {
			case tc.errHas == "" && err != nil:
				t.Errorf("verify: %v", err)
			case tc.errHas != "" && err == nil:
				t.Errorf("verify succeeded, want error with %q", tc.errHas)
			case tc.errHas != "" && !strings.Contains(err.Error(), tc.errHas):
				t.Errorf("verify: %v, want error with %q", err, tc.errHas)
			}
		})
	}
}

func TestWritePlaybooks(t *testing.T) {
	dir := t.TempDir()
	books, err := writePlaybooks(dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	loop, err := os.ReadFile(books["loop"])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(loop), `loop: "{{ range(5) | list }}"`) || !strings.Contains(string(loop), "gather_facts: false") {
		t.Errorf("loop playbook:\n%s", loop)
	}
	tasks, err := os.ReadFile(books["tasks"])
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(tasks), "command: hostname"); got != 5 {
		t.Errorf("tasks playbook has %d tasks, want 5:\n%s", got, tasks)
	}
	if _, err := os.Stat(filepath.Join(dir, "ansible.cfg")); err != nil {
		t.Error(err)
	}
	// The YAML must be what ansible-playbook accepts, when it is installed.
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		t.Skip("ansible-playbook not installed; YAML not checked")
	}
	for name, path := range books {
		cmd := exec.Command("ansible-playbook", "--syntax-check", "-i", "localhost,", path)
		cmd.Env = append(os.Environ(), "ANSIBLE_CONFIG="+filepath.Join(dir, "ansible.cfg"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: syntax check: %v\n%s", name, err, out)
		}
	}
}

func TestReportMarksFailures(t *testing.T) {
	cfg := config{n: 10, playbooks: []string{"loop"}, lab: labEnv{port: 2222, user: "abtest"}}
	ms := allModes()
	results := []result{
		{playbook: "loop", mode: ms[0], ran: true, wall: 2 * time.Second},
		{playbook: "loop", mode: ms[1], ran: true, wall: time.Second},
		{playbook: "loop", mode: ms[2], ran: true, wall: time.Second / 2, err: errors.New("recap ok=0")},
		{playbook: "loop", mode: ms[3], err: errors.New("not run: go build .: exit status 1\nmore")},
	}
	got := renderReport(cfg, ansibleVersion(t.Context()), results)
	for _, want := range []string{
		"| 10-item loop | bridge-default | **FAIL**: recap ok=0 | 0.50 |",
		"| 10-item loop | bridge-pipelining | **FAIL**: not run: go build .: exit status 1 | — |",
		"| 10-item loop | bridge-default | n/a (failed) | n/a (failed) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	results[2].err = nil
	got = renderReport(cfg, ansibleVersion(t.Context()), results)
	if want := "| 10-item loop | bridge-default | 0.250 | 0.500 |"; !strings.Contains(got, want) {
		t.Errorf("report lacks %q:\n%s", want, got)
	}
}

// modeByName returns the mode called name.
func modeByName(t *testing.T, name string) mode {
	t.Helper()
	for _, m := range allModes() {
		if m.name == name {
			return m
		}
	}
	t.Fatalf("no mode %q", name)
	return mode{}
}

func TestReportFloorColumn(t *testing.T) {
	cfg := config{n: 10, playbooks: []string{"loop", "tasks"}, lab: labEnv{port: 2222, user: "abtest"}}
	run := func(pb, name string, secs float64, err error) result {
		return result{playbook: pb, mode: modeByName(t, name), ran: true, wall: time.Duration(secs * float64(time.Second)), err: err}
	}
	results := []result{
		run("loop", "stock-default", 8, nil),
		run("loop", "stock-pipelining", 6, nil),
		run("loop", "bridge-default", 3, nil),
		run("loop", "bridge-pipelining", 1.6, nil),
		run("loop", "floor-default", 2, nil),
		run("loop", "floor-pipelining", 1, nil),
		run("tasks", "bridge-default", 3, nil),
		run("tasks", "bridge-pipelining", 1, nil),
		run("tasks", "floor-default", 2, errors.New("recap ok=0")),
	}
	got := renderReport(cfg, ansibleVersion(t.Context()), results)
	for _, want := range []string{
		"| 10-item loop | stock-default | ok | 8.00 | 4.00 | 0 |",
		"| 10-item loop | stock-pipelining | ok | 6.00 | 6.00 | 0 |",
		"| 10-item loop | bridge-default | ok, 0 in interpreters | 3.00 | 1.50 ✓ |",
		"| 10-item loop | bridge-pipelining | ok, 0 in interpreters | 1.60 | 1.60 ✗ |",
		"| 10-item loop | floor-default | ok | 2.00 | — |",
		"| 10 tasks | bridge-default | ok, 0 in interpreters | 3.00 | n/a (failed) |",
		"| 10 tasks | bridge-pipelining | ok, 0 in interpreters | 1.00 | — |", // no floor-pipelining run
		"÷ floor",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	lat := renderLatencyReport(config{n: 4, latency: 10 * time.Millisecond}, results[:1])
	for _, want := range []string{"## at RTT +20ms (relay one-way latency 10ms), n=4", "| 4-item loop | stock-default | ok | 8.00 | — | 0 | 0.0 KiB | 0.00 |"} {
		if !strings.Contains(lat, want) {
			t.Errorf("latency report lacks %q:\n%s", want, lat)
		}
	}
}

// TestReportMitogenTable checks the bridge ÷ Mitogen marks, and that the
// floor's share shows when a target is out of any ssh replacement's reach.
func TestReportMitogenTable(t *testing.T) {
	cfg := config{n: 10, playbooks: []string{"loop", "tasks", "become"}, lab: labEnv{port: 2222, user: "abtest"}}
	run := func(pb, name string, secs float64) result {
		return result{playbook: pb, mode: modeByName(t, name), ran: true, wall: time.Duration(secs * float64(time.Second))}
	}
	failed := run("become", "mitogen", 4)
	failed.err = errors.New("recap ok=0")
	results := []result{failed,
		run("loop", "mitogen", 4), run("loop", "floor-pipelining", 2),
		run("loop", "bridge-pipelining", 2.8), run("loop", "bridge-default", 5.2),
		run("tasks", "mitogen", 6), run("tasks", "floor-pipelining", 5),
		run("tasks", "bridge-pipelining", 5.5), run("tasks", "bridge-default", 7),
	}
	got := renderReport(cfg, "ansible-core 2.14", results)
	for _, want := range []string{
		"| 10-item loop | 4.00 | 0.70 ✓ | 1.30 ✗ | 0.50 | 0.40 ✓ |",
		"| 10 tasks | 6.00 | 0.92 ✗ | 1.17 ✓ | 0.83 | 0.50 ✓ |",
		"| 10 become tasks | n/a (failed) | — | — | — | — | — | — |\n", // every column of the table
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

func TestChartIsWellFormedSVG(t *testing.T) {
	cfg := config{n: 10, playbooks: []string{"loop", "tasks"}}
	ms := allModes()
	var results []result
	for i, pb := range cfg.playbooks {
		for j, m := range ms {
			results = append(results, result{playbook: pb, mode: m, ran: true,
				wall: time.Duration(1+i+j) * time.Second})
		}
	}
	results[2].err = errors.New(`recap <ok=0> & "failed"`)
	results[3] = result{playbook: "loop", mode: ms[3], err: errors.New("not run: go build .: exit status 1\nmore")}
	latCfg := cfg
	latCfg.n, latCfg.latency = 4, 10*time.Millisecond
	sections := []chartSection{{cfg: cfg, results: results}, {cfg: latCfg, results: results[:2]}, {cfg: latCfg}}

	var buf bytes.Buffer
	if err := writeChart(&buf, sections); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	var (
		root  string
		rects int
		texts []string
		depth int
		inTxt bool
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, buf.String())
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				root = el.Name.Local
				if el.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace %q", el.Name.Space)
				}
			}
			depth++
			if el.Name.Local == "rect" {
				rects++
			}
			inTxt = el.Name.Local == "text"
		case xml.EndElement:
			depth--
			inTxt = false
		case xml.CharData:
			if inTxt {
				texts = append(texts, string(el))
			}
		}
	}
	if root != "svg" || depth != 0 {
		t.Fatalf("root %q, depth at end %d", root, depth)
	}
	// Background, legend swatches, one bar per run that ran.
	if want := 1 + len(ms) + (len(results) - 1) + 2; rects != want {
		t.Errorf("%d rects, want %d", rects, want)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{
		"n=10 (loop items or separate tasks), relay RTT +0s",
		"n=4 (loop items or separate tasks), relay RTT +20ms",
		"10-item loop", "10 tasks", "bridge-pipelining",
		`recap <ok=0> & "failed"`, // escaped in the file, intact once parsed
		"FAIL: not run: go build .: exit status 1",
		"1.5 × floor: the target for bridge rows",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("chart text lacks %q:\n%s", want, all)
		}
	}
}

func TestNiceStep(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.2: 2, 4.9: 5, 6: 10, 23: 50} {
		if got := niceStep(in); math.Abs(got-want) > 1e-9 {
			t.Errorf("niceStep(%v) = %v, want %v", in, got, want)
		}
	}
}

func TestMedianRun(t *testing.T) {
	run := func(secs float64) result {
		return result{ran: true, wall: time.Duration(secs * float64(time.Second))}
	}
	if got := medianRun([]result{run(3), run(1), run(2)}); got.wall != 2*time.Second {
		t.Errorf("median of 3, 1, 2: %v", got.wall)
	}
	if got := medianRun([]result{run(4), run(1), run(3), run(2)}); got.wall != 2*time.Second {
		t.Errorf("median of 4, 1, 3, 2 (lower middle): %v", got.wall)
	}
	bad := run(1)
	bad.err = errors.New("recap failed=1")
	if got := medianRun([]result{run(2), bad, run(3)}); got.err == nil {
		t.Error("a failed run did not make the row fail")
	}
}

func TestRouteCounts(t *testing.T) {
	js := []byte(`{"targets":[{"routes":{"module":90,"become":10,"cached":400},"slow":{"unrecognised wrapper":2},"freshness_us":1500},{"routes":{"module":5},"freshness_us":500}]}`)
	if c := routeCounts(js); c.interp != 105 || c.slow != 2 || c.freshness != 2*time.Millisecond {
		t.Errorf("routeCounts = %+v; want 105, 2, 2ms", c)
	}
	if c := routeCounts([]byte("not json")); c != (bridgeCounts{}) {
		t.Errorf("routeCounts of garbage = %+v", c)
	}
}

func TestFirstTask(t *testing.T) {
	log := filepath.Join(t.TempDir(), "first.log")
	out := "TASK [report] ***\nok: [target] => {\n    \"msg\": \"FIRST_TASK=0.2415\"\n}\n"
	if err := os.WriteFile(log, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	var ts []time.Duration
	if err := parseFirst(log, &ts); err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0] != 241500*time.Microsecond {
		t.Fatalf("parseFirst: %v, want [241.5ms]", ts)
	}
	if err := os.WriteFile(log, []byte("no figure\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := parseFirst(log, &ts); err == nil {
		t.Error("parseFirst of a log without FIRST_TASK= succeeded")
	}
	modes := allModes()
	byName := func(name string) mode {
		for _, m := range modes {
			if m.name == name {
				return m
			}
		}
		t.Fatalf("no mode %s", name)
		return mode{}
	}
	report := renderFirst(config{firstRuns: 3}, []firstResult{
		{mode: byName("mitogen"), times: []time.Duration{600 * time.Millisecond, 500 * time.Millisecond, 700 * time.Millisecond}, jobs: []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{mode: byName("bridge-pipelining"), times: []time.Duration{250 * time.Millisecond, 240 * time.Millisecond, 260 * time.Millisecond}, jobs: []time.Duration{time.Second, 1500 * time.Millisecond, 1200 * time.Millisecond}},
		{mode: byName("stock-pipelining"), err: errors.New("recap ok=0\nmore")},
	})
	for _, want := range []string{"| mitogen | ok | 600 | 600, 500, 700 | — | 2000 | — |", "| bridge-pipelining | ok | 250 | 250, 240, 260 | 0.42 | 1200 | 0.60 |", "| stock-pipelining | **FAIL**: recap ok=0 |"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}
