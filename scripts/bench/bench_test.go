package main

import (
	"errors"
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
	got := renderReport(t.Context(), cfg, results)
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
	got = renderReport(t.Context(), cfg, results)
	if want := "| 10-item loop | bridge-default | 0.250 | 0.500 |"; !strings.Contains(got, want) {
		t.Errorf("report lacks %q:\n%s", want, got)
	}
}
