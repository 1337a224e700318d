package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// matrixPlaybooks are the smoke subset every ansible-core version besides
// Debian's runs (TestCorpus runs the whole corpus on 2.14): module runs,
// files, facts, loops, become and password logins, each compared with stock.
var matrixPlaybooks = []corpusCase{
	{name: "basics", check: checkBasics},
	{name: "files", check: checkFiles},
	{name: "become", check: checkBecome, setup: setupBecome},
	// ansible-core 2.19 and later pass passwords through SSH_ASKPASS.
	{name: "password", check: checkPassword},
}

// matrixRun is one playbook in one mode.
type matrixRun struct {
	tc corpusCase
	m  mode
}

// matrixRuns returns what version v runs. The newest version in the list
// runs the smoke subset in both main modes; the versions between 2.14 and
// it run each smoke playbook once, modes alternating, which keeps the
// suite inside CI's time while every version still runs a module, a
// file transfer, become and a password login through the bridge.
func matrixRuns(v string, versions []string) []matrixRun {
	var runs []matrixRun
	for i, tc := range matrixPlaybooks {
		if v == versions[len(versions)-1] {
			for _, m := range matrixModes {
				runs = append(runs, matrixRun{tc, m})
			}
			continue
		}
		runs = append(runs, matrixRun{tc, matrixModes[i%len(matrixModes)]})
	}
	return runs
}

// fastPathExpected reports whether a playbook's module steps must all be
// served by the bridge's fast paths (the others are about failures, raw
// targets and passwords, where passthrough is right).
func fastPathExpected(name string) bool {
	return name == "basics" || name == "files" || name == "become"
}

// matrixModes are the two ways Ansible talks to a target that matter most:
// its default, and pipelining.
var matrixModes = []mode{{false, "sftp"}, {true, "sftp"}}

// matrixVersions are the ansible-core versions to test: AB_ANSIBLE (a
// comma-separated list, or "all"), by default every version
// scripts/ansible-versions.sh can install here but Debian's 2.14.
func matrixVersions(t *testing.T) []string {
	t.Helper()
	vs, err := testedVersions()
	if err != nil {
		t.Skip(err)
	}
	if len(vs) == 0 {
		t.Skip("no other ansible-core version can be installed here (no peer packages)")
	}
	return vs
}

// testedVersions returns matrixVersions' list, which may be empty.
func testedVersions() ([]string, error) {
	out, err := exec.Command("../scripts/ansible-versions.sh", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("scripts/ansible-versions.sh list: %w", err)
	}
	want := os.Getenv("AB_ANSIBLE")
	if want != "" && want != "all" {
		return strings.Split(want, ","), nil
	}
	var vs []string
	for _, v := range strings.Fields(string(out)) {
		if v != "2.14" || want == "all" {
			vs = append(vs, v)
		}
	}
	return vs, nil
}

// newestAnsible returns the last of matrixVersions' list and its bin dir,
// or "" when there is none besides Debian's 2.14.
func newestAnsible() (version, bin string) {
	vs, err := testedVersions()
	if err != nil || len(vs) == 0 || vs[len(vs)-1] == "2.14" {
		return "", ""
	}
	v := vs[len(vs)-1]
	if bin, err = ansibleBinDir(v); err != nil {
		return "", ""
	}
	return v, bin
}

// ansibleAt is an ansible-core version and the directory of its
// ansible-playbook ("": Debian's, on PATH).
type ansibleAt struct{ name, bin string }

// oldestAndNewest are 2.14 and, when installed, the newest version: the
// versions the zoo and the freshness tests compare stock with.
func oldestAndNewest() []ansibleAt {
	vs := []ansibleAt{{"2.14", ""}}
	if v, bin := newestAnsible(); bin != "" {
		vs = append(vs, ansibleAt{v, bin})
	}
	return vs
}

// ansibleBinDir installs ansible-core v where needed
// (scripts/ansible-versions.sh) and returns the directory of its
// ansible-playbook.
func ansibleBinDir(v string) (string, error) {
	out, err := exec.Command("../scripts/ansible-versions.sh", "bin", v).Output()
	if err != nil {
		return "", fmt.Errorf("ansible-core %s: %w", v, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ansiblePlaybook is the ansible-playbook in dir, or the one on PATH when
// dir is "".
func ansiblePlaybook(dir string) string {
	if dir == "" {
		return "ansible-playbook"
	}
	return filepath.Join(dir, "ansible-playbook")
}

// routesNow returns the daemon's route and slow-path counts for the lab's
// target, summed over its users.
func routesNow(t *testing.T) (routes, slow map[string]int) {
	t.Helper()
	cmd := exec.Command(suite.bin, "status", "--json")
	cmd.Env = bridgeEnv(os.Environ())
	out, err := cmd.Output()
	if err != nil {
		return map[string]int{}, map[string]int{} // no daemon yet
	}
	return sumRoutes(t, out)
}

// sumRoutes sums the route and slow-path counts over the targets of a
// `status --json` output.
func sumRoutes(t *testing.T, out []byte) (routes, slow map[string]int) {
	t.Helper()
	routes, slow = map[string]int{}, map[string]int{}
	var st struct {
		Targets []struct {
			Routes map[string]int `json:"routes"`
			Slow   map[string]int `json:"slow"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	for _, tg := range st.Targets {
		for k, v := range tg.Routes {
			routes[k] += v
		}
		for k, v := range tg.Slow {
			slow[k] += v
		}
	}
	return routes, slow
}

// TestVersionMatrix runs playbooks with every other ansible-core version,
// stock and through the bridge, and checks that the results are equal and
// that the bridge's fast paths served them: modules in the persistent
// interpreter, become steps in the become user's, housekeeping cached,
// and nothing unrecognised.
func TestVersionMatrix(t *testing.T) {
	requireLab(t)
	versions := matrixVersions(t)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			ansibleBin, err := ansibleBinDir(v)
			if err != nil {
				t.Fatal(err)
			}
			ver, _ := exec.Command(ansiblePlaybook(ansibleBin), "--version").Output()
			t.Logf("ansible-core %s: %s", v, strings.SplitN(string(ver), "\n", 2)[0])
			for _, run := range matrixRuns(v, versions) {
				tc, m := run.tc, run.m
				t.Run(tc.name+"/"+m.String(), func(t *testing.T) {
					var before, after, slowBefore, slowAfter map[string]int
					got, _ := runCompared(t, tc, runSpec{Playbook: tc.name + ".yml", Mode: m, AnsibleBin: ansibleBin}, func(run func() *runResult) *runResult {
						before, slowBefore = routesNow(t)
						defer func() { after, slowAfter = routesNow(t) }()
						return run()
					})
					if got.Spec.Side != bridge || !fastPathExpected(tc.name) {
						return
					}
					delta := map[string]int{}
					for k, n := range after {
						if d := n - before[k]; d > 0 {
							delta[k] = d
						}
					}
					t.Logf("ansible-core %s %s %s: routes %v", v, tc.name, m, delta)
					for k, n := range slowAfter {
						// basics.yml sets LANG=C for a task: that module
						// runs in a python of its own, as it must.
						if n > slowBefore[k] && !(tc.name == "basics" && strings.HasPrefix(k, "environment a process reads as it starts")) {
							t.Errorf("slow path: %s (%d)", k, n-slowBefore[k])
						}
					}
					if delta["module"] == 0 {
						t.Errorf("no module ran in the persistent interpreter: routes %v", delta)
					}
					if !m.Pipelining && delta["cached"] == 0 {
						t.Errorf("no housekeeping answered by the bridge: routes %v", delta)
					}
					if tc.name == "become" && delta["become"] == 0 {
						t.Errorf("no become step in a become interpreter: routes %v", delta)
					}
				})
			}
		})
	}
}
