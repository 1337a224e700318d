package integration

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTargetZoo runs zoo.yml on targets unlike the lab's easy case, stock
// and through the bridge, on 2.14 and the newest ansible-core, pipelining
// off and on, in one play: a host per login shell the lab made (bash,
// dash, BusyBox sh, tcsh with ansible_shell_type=csh, fish with
// ansible_shell_type=fish), a host per pyenv Python (2.7, 3.6–3.13: what
// each ansible-core supports runs, the rest fails as stock fails), a
// remote tmp on a noexec mount, become where sudo has requiretty and
// where sshd allows 2 sessions per connection, and a simulated reboot.
// Every host's results equal stock's.
func TestTargetZoo(t *testing.T) {
	requireLab(t)
	zoo := zooHosts(t)
	if len(zoo) == 0 {
		t.Skip("the lab has no zoo (scripts/lab.sh up makes it; needs tcsh, fish, busybox or pyenv)")
	}
	tc := corpusCase{name: "zoo", check: checkZoo, setup: func(t *testing.T) map[string]map[string]any {
		// What a run cut short (CI's time limit) left between its
		// "become copy" and "become remove" would make the next run's
		// first side say ok where the second says changed.
		left, _ := filepath.Glob("/tmp/ab-zoo-zoo_*-root.txt")
		for _, f := range left {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		return zoo
	}}
	for _, v := range oldestAndNewest() {
		for _, m := range matrixModes {
			t.Run(v.name+"/"+m.String(), func(t *testing.T) {
				runCompared(t, tc, runSpec{Playbook: "zoo.yml", Mode: m, AnsibleBin: v.bin, Env: []string{fmt.Sprintf("ANSIBLE_FORKS=%d", len(zoo))}}, nil)
			})
		}
	}
}

// zooHosts returns the zoo's inventory hosts: AB_ZOO (NAME=USER for each
// login shell), AB_ZOO_CASES (NAME=USER for each situation: requiretty,
// maxsessions, reboot), AB_PYTHONS (a wrapper per pyenv version, which
// the lab's users can run) and AB_NOEXEC (a noexec mount), from
// scripts/lab.sh env.
func zooHosts(t *testing.T) map[string]map[string]any {
	t.Helper()
	l := suite.lab
	hosts := map[string]map[string]any{}
	host := func(name, user string, vars map[string]any) {
		h := labHost(t, user, l.Key)
		for k, v := range vars {
			h[k] = v
		}
		// A ControlPath per host: hosts with one user share no master,
		// whose races would make stock's messages differ run to run.
		h["ansible_control_path"] = "%(directory)s/zoo-" + name
		hosts["zoo_"+name] = h
	}
	shellType := map[string]string{"tcsh": "csh", "fish": "fish"}
	for name, user := range zooUsers(t, "AB_ZOO") {
		vars := map[string]any{}
		if st := shellType[name]; st != "" {
			vars["ansible_shell_type"] = st
		}
		host("sh_"+name, user, vars)
	}
	for name, user := range zooUsers(t, "AB_ZOO_CASES") {
		host(name, user, nil)
	}
	if dir := os.Getenv("AB_PYTHONS"); dir != "" {
		pys, _ := filepath.Glob(filepath.Join(dir, "python[23].*"))
		for _, py := range pys {
			ver := strings.ReplaceAll(strings.TrimPrefix(filepath.Base(py), "python"), ".", "_")
			host("py_"+ver, l.User, map[string]any{"ansible_python_interpreter": py})
		}
	}
	if dir := os.Getenv("AB_NOEXEC"); dir != "" {
		host("noexec_tmp", l.User, map[string]any{"ansible_remote_tmp": filepath.Join(dir, l.User)})
	}
	return hosts
}

// zooUsers reads the NAME=USER list in the environment variable env.
func zooUsers(t *testing.T, env string) map[string]string {
	t.Helper()
	users := map[string]string{}
	for _, z := range strings.Fields(os.Getenv(env)) {
		name, user, ok := strings.Cut(z, "=")
		if !ok {
			t.Fatalf("%s: %q is not NAME=USER", env, z)
		}
		users[name] = user
	}
	return users
}

// checkZoo checks what must hold in both runs: the lab's own Python, the
// ordinary shells, the MaxSessions and the reboot host run every step.
func checkZoo(t *testing.T, r *runResult) {
	for _, h := range []string{"zoo_sh_bash", "zoo_sh_dash", "zoo_sh_busybox", "zoo_sh_tcsh", "zoo_py_3_11", "zoo_maxsessions", "zoo_reboot"} {
		if _, ok := r.Doc.Stats[h]; !ok {
			continue
		}
		wantStats(t, r, h, map[string]int{"failures": 0, "unreachable": 0, "ignored": 1})
	}
}

// TestShellRCChange: a change of the file the login shell reads for each
// command (bash's ~/.bashrc under sshd, tcsh's ~/.tcshrc) reaches the
// next step, its variables and umask, as it does stock's next command.
func TestShellRCChange(t *testing.T) {
	requireLab(t)
	rc := map[string][2]string{
		"bash": {".bashrc", "export AB_RC_PROBE=set; umask 027"},
		"tcsh": {".tcshrc", "setenv AB_RC_PROBE set; umask 027"},
	}
	users := zooUsers(t, "AB_ZOO")
	hosts := map[string]map[string]any{}
	for shell, f := range rc {
		name := users[shell]
		if name == "" {
			continue
		}
		h := labHost(t, name, suite.lab.Key)
		h["rc_file"], h["rc_line"] = f[0], f[1]
		h["ansible_control_path"] = "%(directory)s/rc-" + shell
		if shell == "tcsh" {
			h["ansible_shell_type"] = "csh"
		}
		hosts["rc_"+shell] = h
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(u.HomeDir, f[0])
		orig, err := os.ReadFile(path)
		t.Cleanup(func() {
			if err != nil {
				_ = os.Remove(path)
				return
			}
			_ = os.WriteFile(path, orig, 0o644)
		})
	}
	if len(hosts) == 0 {
		t.Skip("the lab has no bash or tcsh zoo user (AB_ZOO)")
	}
	// Each side starts with no ~/.ansible: the module that creates it
	// warns, and only the first run would.
	setup := func(t *testing.T) map[string]map[string]any {
		for _, h := range hosts {
			u, err := user.Lookup(h["ansible_user"].(string))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(u.HomeDir, ".ansible")); err != nil {
				t.Fatal(err)
			}
		}
		return hosts
	}
	tc := corpusCase{name: "shellrc", check: checkShellRC, setup: setup}
	runCompared(t, tc, runSpec{Playbook: "shellrc.yml", Mode: mode{true, "sftp"}}, nil)
}

func checkShellRC(t *testing.T, r *runResult) {
	wantExit(t, r, 0)
	for host := range r.Doc.Stats {
		if !strings.HasPrefix(host, "rc_") {
			continue
		}
		wantTask(t, r, host, "after", "ok", "[set]\n0027")
		wantTask(t, r, host, "after removal", "ok", "[unset]\n0022")
	}
}

// TestInterpreterSwitch: the python Ansible names is repointed (a symlink
// to another version), then removed, mid-play. Stock's next step runs the
// new one, then fails ("module interpreter ... not found") and the play
// goes on; the bridge's ran on in the interpreter it had started, and
// without pipelining hung: the failed restart left the step's held temp
// dir counted as being written, so its rm waited for ever.
func TestInterpreterSwitch(t *testing.T) {
	requireLab(t)
	dir := os.Getenv("AB_PYTHONS")
	first, second := filepath.Join(dir, "python3.11"), filepath.Join(dir, "python3.12")
	for _, p := range []string{first, second} {
		if _, err := os.Stat(p); dir == "" || err != nil {
			t.Skip("the lab has no pyenv pythons 3.11 and 3.12 (AB_PYTHONS)")
		}
	}
	// Named as a python, which the bridge runs modules with.
	dir = fmt.Sprintf("/tmp/ab-py-switch-%d", os.Getpid())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o1777); err != nil { // the lab user makes the link
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	link := filepath.Join(dir, "python3")
	h := labHost(t, suite.lab.User, suite.lab.Key)
	h["ansible_python_interpreter"] = link
	h["first_python"], h["second_python"] = first, second
	h["ansible_control_path"] = "%(directory)s/interp-switch"
	tc := corpusCase{name: "interp-switch", check: func(t *testing.T, r *runResult) {
		wantTask(t, r, "interp_switch", "before", "ok", "")
		before, _ := r.event(t, "interp_switch", "before").Result["stdout"].(string)
		after, _ := r.event(t, "interp_switch", "after").Result["stdout"].(string)
		if !strings.Contains(before, "3.11") || !strings.Contains(after, "3.12") {
			t.Errorf("%s run: the module's python was %q, then %q", r.Spec.Side, before, after)
		}
		wantTask(t, r, "interp_switch", "gone", "failed", "")
		wantTask(t, r, "interp_switch", "go on", "ok", "alive")
	}, setup: func(*testing.T) map[string]map[string]any { return map[string]map[string]any{"interp_switch": h} }}
	for _, m := range []mode{{true, "sftp"}, {false, "sftp"}} {
		t.Run(m.String(), func(t *testing.T) {
			// Stock takes seconds: a hang fails here, not at runTimeout.
			runCompared(t, tc, runSpec{Playbook: "interp-switch.yml", Mode: m, Timeout: time.Minute}, nil)
		})
	}
}
