package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runnerPlaybook is small on purpose (CI time): a module, a command, an
// upload (copy), a become step, on a key login and on a password login.
const runnerPlaybook = `- hosts: all
  gather_facts: false
  tasks:
    - ping:
    - command: id -un
      register: who
    - copy:
        content: "runner {{ job }} {{ who.stdout }}\n"
        dest: "/tmp/ab-runner-{{ job }}-{{ inventory_hostname }}.txt"
        mode: "0644"
    - stat:
        path: "/tmp/ab-runner-{{ job }}-{{ inventory_hostname }}.txt"
    - command: id -un
      become: true
    - file:
        path: "/tmp/ab-runner-{{ job }}-{{ inventory_hostname }}.txt"
        state: absent
`

// runnerJob is one ansible-runner job in a private data dir laid out as
// AWX lays it out: the key only in env/ssh_key (ansible-runner hands it
// to an ssh-agent), the login and become password answered from
// env/passwords, settings in env/envvars, a ControlPath dir of the job's
// own, the project in project/.
type runnerJob struct {
	name       string
	pipelining bool
	bridge     bool // through the shims: first on PATH (env/envvars) unless via says otherwise
	// via: "env" names the shims in ANSIBLE_SSH/SCP/SFTP_EXECUTABLE
	// (env/envvars), "cfg" in the project's ansible.cfg.
	via      string
	socket   string // the job's daemon socket (bridge)
	playbook string // runnerPlaybook if empty
	password string // the lab's if empty
	timeout  int    // job_timeout in seconds; 120 if 0
	// container runs the job as in an execution environment (bwrap: a
	// uid with the passwd entry an EE's entrypoint adds for it,
	// read-only /, a tmpfs /tmp, the data dir
	// at /tmp/runner, HOME there, no XDG_RUNTIME_DIR); socket is then a
	// path inside the container.
	container bool
}

// runnerOutcome is what a job's results are compared on.
type runnerOutcome struct {
	rc      string
	status  string
	stats   map[string]map[string]int // host -> ok, changed, … from playbook_on_stats
	results []string                  // "host task event changed", sorted
}

// runnerCommand writes job j's private data dir and returns the
// ansible-runner command that runs it, and the dir.
func runnerCommand(ctx context.Context, t *testing.T, j runnerJob) (*exec.Cmd, string) {
	t.Helper()
	dir := filepath.Join(suite.work, "runner", j.name)
	root := dir // the data dir as the job sees it
	if j.container {
		root = "/tmp/runner" // / is read-only: no /runner mount point to make
	}
	for _, d := range []string{"env", "project", "inventory", "cp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key, err := os.ReadFile(suite.lab.Key)
	if err != nil {
		t.Fatal(err)
	}
	l := suite.lab
	// The password host refuses the agent's key: common args, not
	// ssh_extra_args, which sftp and scp would not get (their own
	// settings would make them a target of their own).
	inv := fmt.Sprintf("key ansible_host=127.0.0.1 ansible_port=%s ansible_user=%s\n"+
		"pw ansible_host=127.0.0.1 ansible_port=%s ansible_user=%s ansible_ssh_common_args='-o UserKnownHostsFile=/dev/null -o PubkeyAuthentication=no'\n"+
		"[all:vars]\nansible_python_interpreter=/usr/bin/python3\nansible_ssh_common_args='-o UserKnownHostsFile=/dev/null'\n",
		l.Port, l.User, l.Port, l.PWUser)
	path := suite.basePATH
	envvars := map[string]string{
		"ANSIBLE_HOST_KEY_CHECKING":    "False",
		"ANSIBLE_PIPELINING":           strconv.FormatBool(j.pipelining),
		"ANSIBLE_SSH_CONTROL_PATH_DIR": filepath.Join(root, "cp"),
		"ANSIBLE_RETRY_FILES_ENABLED":  "False",
	}
	cfg := ""
	if j.bridge {
		switch j.via {
		case "env":
			for _, prog := range []string{"ssh", "scp", "sftp"} {
				envvars["ANSIBLE_"+strings.ToUpper(prog)+"_EXECUTABLE"] = filepath.Join(suite.shims, prog)
			}
		case "cfg":
			cfg = fmt.Sprintf("[ssh_connection]\nssh_executable = %[1]s/ssh\nscp_executable = %[1]s/scp\nsftp_executable = %[1]s/sftp\n", suite.shims)
		default:
			path = suite.shims + ":" + path
		}
		envvars["ANSIBLE_BRIDGE_SOCKET"] = j.socket
		envvars["ANSIBLE_BRIDGE_REQUIRE"] = "1"
	}
	envvars["PATH"] = path
	password, playbook := cmp.Or(j.password, l.Password), cmp.Or(j.playbook, runnerPlaybook)
	files := map[string]any{
		"env/ssh_key":      string(key),
		"env/passwords":    map[string]string{`^SSH password:\s*?$`: password, `^BECOME password.*:\s*?$`: password},
		"env/envvars":      envvars,
		"env/extravars":    map[string]string{"job": runnerJobID(j.name)},
		"env/cmdline":      "--ask-pass --ask-become-pass",
		"env/settings":     map[string]any{"job_timeout": cmp.Or(j.timeout, 120), "suppress_ansible_output": true},
		"project/site.yml": playbook,
		"inventory/hosts":  inv,
	}
	if cfg != "" {
		files["project/ansible.cfg"] = cfg
	}
	for name, v := range files {
		b, ok := v.(string)
		if !ok {
			raw, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			b = string(raw)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runner := []string{"ansible-runner", "run", root, "-p", "site.yml", "--ident", "job"}
	home := suite.home
	if j.container {
		// The suite's binaries and shims stay where they are (read-only);
		// the rest of /tmp is the container's own.
		// ssh refuses a uid with no passwd entry: an EE's entrypoint
		// (ansible-builder's) adds one for the uid it is given.
		passwd, err := os.ReadFile("/etc/passwd")
		if err != nil {
			t.Fatal(err)
		}
		passwd = append(passwd, "runner:x:1000123:1000123::"+root+":/bin/sh\n"...)
		passwdFile := dir + ".passwd"
		if err := os.WriteFile(passwdFile, passwd, 0o644); err != nil {
			t.Fatal(err)
		}
		runner = append([]string{"bwrap", "--unshare-user", "--uid", "1000123", "--gid", "1000123",
			"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
			"--ro-bind", passwdFile, "/etc/passwd",
			"--ro-bind", suite.work, suite.work, "--bind", dir, root,
			"--unsetenv", "XDG_RUNTIME_DIR", "--chdir", root, "--"}, runner...)
		home = root
	}
	cmd := exec.CommandContext(ctx, runner[0], runner[1:]...)
	cmd.Env = append(cleanEnv(os.Environ()), "PATH="+suite.basePATH, "HOME="+home, "LANG=C.UTF-8")
	return cmd, dir
}

// runnerJobID names job j's files on the target. The suite's work dir is
// in it: a job that met the sshpass race (runJob) leaves its file behind,
// and the same job in a later run on the machine would find it there and
// report copy as ok, not changed.
func runnerJobID(name string) string {
	return name + "-" + filepath.Base(suite.work)
}

// runRunnerJob runs job j to its end and returns what it did; wantOK says
// whether the job must succeed.
func runRunnerJob(t *testing.T, j runnerJob, wantOK bool) runnerOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd, dir := runnerCommand(ctx, t, j)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("ansible-runner %s did not finish: %s", j.name, out)
	}
	art := filepath.Join(dir, "artifacts", "job")
	o := runnerOutcome{rc: strings.TrimSpace(readString(t, filepath.Join(art, "rc"))), status: strings.TrimSpace(readString(t, filepath.Join(art, "status")))}
	if err != nil && o.rc == "" {
		t.Fatalf("ansible-runner %s: %v\n%s", j.name, err, out)
	}
	events, err := filepath.Glob(filepath.Join(art, "job_events", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range events {
		var ev struct {
			Event     string         `json:"event"`
			EventData map[string]any `json:"event_data"`
		}
		if err := json.Unmarshal([]byte(readString(t, f)), &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		d := ev.EventData
		switch {
		case ev.Event == "playbook_on_stats":
			o.stats = map[string]map[string]int{}
			for _, k := range []string{"ok", "changed", "failures", "dark", "skipped", "rescued", "ignored"} {
				m, _ := d[k].(map[string]any)
				for host, n := range m {
					if o.stats[host] == nil {
						o.stats[host] = map[string]int{}
					}
					o.stats[host][k] = int(n.(float64))
				}
			}
		case strings.HasPrefix(ev.Event, "runner_on_"):
			res, _ := d["res"].(map[string]any)
			o.results = append(o.results, fmt.Sprintf("%v %v %s changed=%v stdout=%v", d["host"], d["task"], ev.Event, res["changed"], res["stdout"]))
		}
	}
	sort.Strings(o.results)
	if wantOK && (o.rc != "0" || o.status != "successful" || len(o.results) == 0) {
		t.Errorf("job %s: rc %s status %s, %d results\n%s\nstdout:\n%s", j.name, o.rc, o.status, len(o.results), out, readString(t, filepath.Join(art, "stdout")))
	}
	return o
}

// runJob runs job j as runRunnerJob does, and once more (as j.name +
// "-again") if Ansible's own sshpass race was among its failures:
// "Unexpected failure during module execution: [Errno 32] Broken pipe"
// (docs/limits.md; stock's ssh meets it too on a loaded machine). A job
// that must succeed (wantOK) and failed otherwise is an error. socket, if
// not nil, gives a bridge job's daemon socket from its name (a rerun's
// daemon is then one of its own); without it a rerun keeps j.socket. It
// returns the outcome and the name of the job that gave it, whose
// daemon's counts go with it.
func runJob(t *testing.T, j runnerJob, wantOK bool, socket func(string) string) (runnerOutcome, string) {
	t.Helper()
	if socket != nil {
		j.socket = socket(j.name)
	}
	o := runRunnerJob(t, j, false)
	if wantOK && o.rc == "0" && o.status == "successful" && len(o.results) > 0 {
		return o, j.name
	}
	if !sshpassRaced(t, j.name) {
		if wantOK {
			t.Errorf("job %s: rc %s status %s, %d results\nstdout:\n%s", j.name, o.rc, o.status, len(o.results), jobStdout(t, j.name))
		}
		return o, j.name
	}
	j.name += "-again"
	if socket != nil {
		j.socket = socket(j.name)
	}
	return runRunnerJob(t, j, wantOK), j.name
}

// sshpassRaced says whether job name met Ansible's sshpass race, and logs
// it if it did.
func sshpassRaced(t *testing.T, name string) bool {
	t.Helper()
	if !strings.Contains(jobStdout(t, name), "[Errno 32] Broken pipe") {
		return false
	}
	t.Logf("%s: Ansible's sshpass race (Broken pipe); running it again", name)
	return true
}

// jobStdout is what Ansible printed in runner job name.
func jobStdout(t *testing.T, name string) string {
	t.Helper()
	return readString(t, filepath.Join(suite.work, "runner", name, "artifacts", "job", "stdout"))
}

// requireRunner skips t without the lab, the bridge or ansible-runner.
func requireRunner(t *testing.T) {
	t.Helper()
	requireLab(t)
	requireBridge(t)
	if _, err := exec.LookPath("ansible-runner"); err != nil {
		t.Skip("ansible-runner not installed (Debian: python3-ansible-runner; scripts/setup.sh)")
	}
}

// stopDaemonAtEnd stops the daemon on socket, if one runs, when t ends.
func stopDaemonAtEnd(t *testing.T, socket string) {
	t.Cleanup(func() {
		cmd := exec.Command(suite.bin, "stop")
		cmd.Env = append(cleanEnv(os.Environ()), "ANSIBLE_BRIDGE_SOCKET="+socket)
		_ = cmd.Run()
	})
}

// bridgeStatus is the route and slow-path counts of the daemon on socket.
func bridgeStatus(t *testing.T, socket string) (routes, slow map[string]int) {
	t.Helper()
	cmd := exec.Command(suite.bin, "status", "--json")
	cmd.Env = append(cleanEnv(os.Environ()), "ANSIBLE_BRIDGE_SOCKET="+socket)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	return sumRoutes(t, out)
}

// TestAnsibleRunner runs a job through ansible-runner as AWX does,
// stock and through the bridge (each job with a daemon of its own, as in
// a fresh execution environment, and in strict mode: a fallback for the
// bridge's own reasons fails the job), pipelining off and on, then two
// bridge jobs at once. Results equal stock's, and every module step runs
// in the interpreters: no slow path counted, no transfer to the real sftp.
func TestAnsibleRunner(t *testing.T) {
	requireRunner(t)
	socket := func(name string) string {
		s := filepath.Join(suite.work, "rs", name, "bridge.sock")
		stopDaemonAtEnd(t, s)
		return s
	}
	check := func(t *testing.T, name string, got, want runnerOutcome, pipelining bool) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: bridge %+v\nstock %+v", name, got, want)
		}
		routes, slow := bridgeStatus(t, socket(name))
		t.Logf("%s: routes %v", name, routes)
		if len(slow) != 0 {
			t.Errorf("%s: slow paths %v", name, slow)
		}
		// ping, command, copy's stat and copy, stat, become, file: on
		// each of the two hosts, at least 6 module steps in the
		// interpreters.
		if routes["module"]+routes["become"] < 12 || !pipelining && routes["cached"] == 0 || routes["sftp"] == 0 && routes["scp"] == 0 {
			t.Errorf("%s: routes %v: modules, housekeeping or uploads not in the bridge", name, routes)
		}
	}
	for _, pipelining := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipelining=%t", pipelining), func(t *testing.T) {
			want, _ := runJob(t, runnerJob{name: fmt.Sprintf("stock-%t", pipelining), pipelining: pipelining}, true, nil)
			name := fmt.Sprintf("bridge-%t", pipelining)
			got, ran := runJob(t, runnerJob{name: name, pipelining: pipelining, bridge: true}, true, socket)
			check(t, ran, got, want, pipelining)
			if pipelining {
				return
			}
			// The README's other setups, pipelining off (where transfers
			// matter): the executables in the environment and in the
			// project's ansible.cfg.
			for _, via := range []string{"env", "cfg"} {
				name := "bridge-" + via
				got, ran := runJob(t, runnerJob{name: name, bridge: true, via: via}, true, socket)
				check(t, ran, got, want, false)
			}
		})
	}
	t.Run("concurrent", func(t *testing.T) {
		want, _ := runJob(t, runnerJob{name: "stock-c", pipelining: false}, true, nil)
		t.Run("jobs", func(t *testing.T) {
			for i := range 2 {
				name := fmt.Sprintf("bridge-c%d", i)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					got, ran := runJob(t, runnerJob{name: name, bridge: true}, true, socket)
					check(t, ran, got, want, false)
				})
			}
		})
	})
}

// TestAnsibleRunnerEdges: what AWX does to jobs besides running them. A
// job with a wrong password, started while another job's connection to
// the same target is alive in the same daemon, fails as stock's does (its
// own ControlPath dir means a login of its own). A job that reaches its
// job_timeout while its task runs leaves on the target what stock leaves.
// A job in an execution environment's conditions (bwrap) runs on the fast
// path.
func TestAnsibleRunnerEdges(t *testing.T) {
	requireRunner(t)
	socket := filepath.Join(suite.work, "rs", "edges", "bridge.sock")
	stopDaemonAtEnd(t, socket)
	t.Run("wrong password beside a live job", func(t *testing.T) {
		const wrong = "not-the-password"
		want, stock := runJob(t, runnerJob{name: "stock-wrong", password: wrong}, false, nil)
		if want.status == "successful" {
			t.Fatalf("stock job with a wrong password succeeded: %+v", want)
		}
		runJob(t, runnerJob{name: "bridge-live", bridge: true, socket: socket}, true, nil)
		got, bridge := runJob(t, runnerJob{name: "bridge-wrong", bridge: true, socket: socket, password: wrong}, false, nil)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("wrong password after a good job: bridge %+v\nstock %+v\nbridge's stdout:\n%s\nstock's stdout:\n%s",
				got, want, jobStdout(t, bridge), jobStdout(t, stock))
		}
	})
	for _, pipelining := range []bool{false, true} {
		t.Run(fmt.Sprintf("timed out/pipelining=%t", pipelining), func(t *testing.T) {
			sides := []bool{false, true} // stock, bridge
			left := make([]bool, len(sides))
			status := make([]string, len(sides))
			t.Run("jobs", func(t *testing.T) {
				for i, viaBridge := range sides {
					t.Run(fmt.Sprintf("bridge=%t", viaBridge), func(t *testing.T) {
						t.Parallel()
						// A duration no other process on the machine runs.
						arg := fmt.Sprintf("%d.%d", 4000+10*i+btoi(pipelining), os.Getpid()%1000)
						t.Cleanup(func() { killProcs("sleep", arg) })
						o, _ := runJob(t, runnerJob{
							name:       fmt.Sprintf("timeout-%t-%t", viaBridge, pipelining),
							pipelining: pipelining,
							bridge:     viaBridge,
							socket:     socket,
							timeout:    15,
							playbook:   "- hosts: key\n  gather_facts: false\n  tasks:\n    - command: sleep " + arg + "\n",
						}, false, nil)
						status[i] = o.status
						left[i] = stillRunning(5*time.Second, "sleep", arg)
					})
				}
			})
			t.Logf("timed-out job: status stock %s, bridge %s; task left running: stock %v, bridge %v", status[0], status[1], left[0], left[1])
			if status[0] != "timeout" || status[1] != status[0] {
				t.Errorf("job status: bridge %q, stock %q, want timeout", status[1], status[0])
			}
			if left[1] != left[0] {
				t.Errorf("timed-out job: task left running through the bridge %v, stock %v", left[1], left[0])
			}
		})
	}
	t.Run("execution environment", func(t *testing.T) {
		if _, err := exec.LookPath("bwrap"); err != nil {
			t.Skip("bwrap not installed (Debian: bubblewrap; scripts/setup.sh)")
		}
		// The daemon a job starts outlives it; its socket is in the data
		// dir.
		for _, name := range []string{"bridge-ee", "bridge-ee-again"} {
			stopDaemonAtEnd(t, filepath.Join(suite.work, "runner", name, ".ansible-bridge", "bridge.sock"))
		}
		want, _ := runJob(t, runnerJob{name: "stock-ee"}, true, nil)
		got, ran := runJob(t, runnerJob{name: "bridge-ee", bridge: true, container: true, socket: "/tmp/runner/.ansible-bridge/bridge.sock"}, true, nil)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("job in a container: bridge %+v\nstock %+v", got, want)
		}
		outside := filepath.Join(suite.work, "runner", ran, ".ansible-bridge", "bridge.sock")
		routes, slow := bridgeStatus(t, outside)
		t.Logf("container job: routes %v", routes)
		if len(slow) != 0 || routes["module"]+routes["become"] < 12 || routes["cached"] == 0 {
			t.Errorf("container job: routes %v, slow paths %v: not on the fast path", routes, slow)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
