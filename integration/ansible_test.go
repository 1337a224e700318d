package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// mode is one combination of the settings that change what Ansible sends
// over ssh.
type mode struct {
	Pipelining bool
	Transfer   string // sftp, scp or piped
}

func (m mode) String() string {
	return fmt.Sprintf("pipelining=%t/%s", m.Pipelining, m.Transfer)
}

// allModes is the full matrix every corpus playbook runs in.
var allModes = []mode{
	{false, "sftp"}, {false, "scp"}, {false, "piped"},
	{true, "sftp"}, {true, "scp"}, {true, "piped"},
}

// side says which ssh a run uses.
type side string

const (
	stock  side = "stock"  // the real /usr/bin/ssh
	bridge side = "bridge" // the shims first on PATH
)

// bridgeSide is the side compared with stock: the bridge, or stock again
// when calibrating with AB_COMPARE=stock.
func bridgeSide() side {
	if suite.compareStock {
		return stock
	}
	return bridge
}

// runSpec describes one ansible-playbook run.
type runSpec struct {
	Playbook string // file in corpus/
	Mode     mode
	Side     side
	// HostVars are merged into the generated inventory's hosts.
	HostVars map[string]map[string]any
	// Env is added to ansible-playbook's environment last (it wins).
	Env []string
	// AnsibleBin, if set, is the directory of the ansible-playbook to
	// run (another ansible-core version, scripts/ansible-versions.sh);
	// else the one on PATH.
	AnsibleBin string
	// Timeout, if set, bounds the run instead of runTimeout (a short
	// playbook where a hang is the bug).
	Timeout time.Duration
}

// taskEvent is one task result as recorded by the abjson callback.
type taskEvent struct {
	Play         string         `json:"play"`
	Task         string         `json:"task"`
	Action       string         `json:"action"`
	Host         string         `json:"host"`
	Status       string         `json:"status"`
	IgnoreErrors bool           `json:"ignore_errors"`
	Result       map[string]any `json:"result"`
}

// runDoc is the abjson callback's output.
type runDoc struct {
	Events []taskEvent               `json:"events"`
	Stats  map[string]map[string]int `json:"stats"`
}

// runResult is everything one run produced.
type runResult struct {
	Spec     runSpec
	Dir      string // per-run directory (inventory, result.json, cp/)
	ExitCode int
	Stdout   string
	Stderr   string
	Doc      runDoc
	Files    map[string]fileEntry // "target:abtest/…", "local/…"
	Elapsed  time.Duration
	// Masters counts ControlPersist sockets left in the run's ControlPath
	// directory: the real ssh made them (stock, or a bridge fallback).
	Masters int
}

var runSeq atomic.Int64

// runTimeout bounds one ansible-playbook run. The slowest stock run of the
// corpus takes well under a minute; a hung bridge must not eat the suite's
// whole -timeout.
const runTimeout = 4 * time.Minute

// runPlaybook runs one playbook after resetting the output directories, and
// collects its results and the files it left behind.
func runPlaybook(t *testing.T, spec runSpec) *runResult {
	t.Helper()
	dir := filepath.Join(suite.work, "r", strconv.FormatInt(runSeq.Add(1), 10))
	cp := filepath.Join(dir, "cp")
	if err := os.MkdirAll(cp, 0o700); err != nil {
		t.Fatal(err)
	}
	resetOutputs(t)
	inv := writeInventory(t, dir, spec.HostVars)
	resultFile := filepath.Join(dir, "result.json")
	stdout := filepath.Join(dir, "stdout")
	stderr := filepath.Join(dir, "stderr")

	pathEnv := suite.basePATH
	if spec.Side == bridge {
		pathEnv = suite.shims + string(os.PathListSeparator) + suite.basePATH
	}
	env := cleanEnv(os.Environ())
	env = append(env,
		"PATH="+pathEnv,
		"HOME="+suite.home,
		"LANG=C.UTF-8",
		"ANSIBLE_CONFIG="+filepath.Join(suite.work, "ansible.cfg"),
		"ANSIBLE_CALLBACK_PLUGINS="+filepath.Join(suite.corpus, "plugins", "callback"),
		"ANSIBLE_STDOUT_CALLBACK=abjson",
		"ANSIBLE_LOAD_CALLBACK_PLUGINS=1",
		"AB_RESULT_FILE="+resultFile,
		"ANSIBLE_HOST_KEY_CHECKING=False",
		"ANSIBLE_RETRY_FILES_ENABLED=False",
		"ANSIBLE_NOCOLOR=1",
		"ANSIBLE_SSH_CONTROL_PATH_DIR="+cp,
		"ANSIBLE_PIPELINING="+strconv.FormatBool(spec.Mode.Pipelining),
		"ANSIBLE_SSH_TRANSFER_METHOD="+spec.Mode.Transfer,
	)
	if suite.socket != "" {
		env = bridgeEnv(env)
	}
	env = append(env, spec.Env...)

	limit := runTimeout
	if spec.Timeout > 0 {
		limit = spec.Timeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, ansiblePlaybook(spec.AnsibleBin), "-i", inv, filepath.Join(suite.corpus, spec.Playbook))
	cmd.Dir = dir
	cmd.Env = env
	// On timeout, kill the whole process group: ansible's workers and the
	// ssh (or shim) processes they started, not just ansible-playbook.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	// Files, not pipes: nothing can keep Wait waiting on an inherited pipe.
	outF := createFile(t, stdout)
	errF := createFile(t, stderr)
	cmd.Stdout, cmd.Stderr = outF, errF
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	outF.Close()
	errF.Close()

	res := &runResult{Spec: spec, Dir: dir, Elapsed: elapsed, ExitCode: -1}
	noteRunOnFailure(t, res)
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		stopMasters(t, cp)
		t.Fatalf("%s run of %s (%s) did not finish within %v and was killed\nstdout:\n%s\nstderr:\n%s",
			spec.Side, spec.Playbook, spec.Mode, limit, readString(t, stdout), readString(t, stderr))
	case err == nil:
		res.ExitCode = 0
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	default:
		t.Fatalf("ansible-playbook %s: %v", spec.Playbook, err)
	}
	res.Stdout = readString(t, stdout)
	res.Stderr = readString(t, stderr)
	res.Masters = stopMasters(t, cp)

	raw, err := os.ReadFile(resultFile)
	if err != nil {
		t.Fatalf("%s run of %s (exit %d) wrote no results: %v\nstdout:\n%s\nstderr:\n%s",
			spec.Side, spec.Playbook, res.ExitCode, err, res.Stdout, res.Stderr)
	}
	if err := json.Unmarshal(raw, &res.Doc); err != nil {
		t.Fatalf("%s: %v", resultFile, err)
	}
	res.Files = snapshotOutputs(t)
	t.Logf("%s run: exit %d in %v (%s)", spec.Side, res.ExitCode, elapsed.Round(time.Millisecond), dir)
	return res
}

// cleanEnv drops the variables that would make runs depend on the caller's
// environment: Ansible settings, locale, an ssh agent (which could log in
// with a key the inventory did not name), and the bridge's own variables.
func cleanEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "ANSIBLE_"), strings.HasPrefix(k, "LC_"),
			k == "LANG", k == "LANGUAGE", k == "SSH_AUTH_SOCK", k == "SSH_AGENT_PID",
			k == "HOME", k == "PATH", k == "AB_RESULT_FILE", k == "DISPLAY":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// stopMasters sends `ssh -O exit` to every ControlPersist master the real
// ssh left in cp, so that no master outlives its run or is reused by the
// next one, and returns how many there were. The daemon's own control
// sockets (its masters listen on their ControlPaths) are left alone, as
// the daemon's connections always were.
func stopMasters(t *testing.T, cp string) int {
	t.Helper()
	entries, err := os.ReadDir(cp)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		p := filepath.Join(cp, e.Name())
		if daemonsMaster(p) {
			continue
		}
		n++
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		out, err := exec.CommandContext(ctx, suite.realSSH, "-F", "none", "-o", "ControlPath="+p, "-O", "exit", "ab-lab").CombinedOutput()
		cancel()
		if err != nil {
			t.Logf("ssh -O exit %s: %v: %s", p, err, out)
		}
	}
	return n
}

var masterPID = regexp.MustCompile(`Master running \(pid=(\d+)\)`)

// daemonsMaster reports whether the master answering on the control
// socket at path is an ansible-bridge daemon's: `ssh -O check` names
// the master's process, which the daemon started (a ControlPersist
// master's own process is the daemon's child).
func daemonsMaster(path string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, suite.realSSH, "-F", "none", "-o", "ControlPath="+path, "-O", "check", "ab-lab").CombinedOutput()
	m := masterPID.FindSubmatch(out)
	if m == nil {
		return false
	}
	pid, _ := strconv.Atoi(string(m[1]))
	return isDaemon(pid) || isDaemon(parentPID(pid))
}

// isDaemon reports whether pid runs the ansible-bridge binary.
func isDaemon(pid int) bool {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && filepath.Base(strings.TrimSuffix(exe, " (deleted)")) == "ansible-bridge"
}

// parentPID is pid's parent's pid, 0 if unknown.
func parentPID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(b), "\nPPid:\t")
	ppid, _ := strconv.Atoi(strings.SplitN(rest, "\n", 2)[0])
	return ppid
}

func createFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// labHost is an inventory host of the lab's sshd: user logs in with key,
// the module runs with /usr/bin/python3, out_dir is the user's output
// directory on the target.
func labHost(t *testing.T, user, key string) map[string]any {
	t.Helper()
	port, err := strconv.Atoi(suite.lab.Port)
	if err != nil {
		t.Fatalf("AB_PORT %q: %v", suite.lab.Port, err)
	}
	return map[string]any{
		"ansible_host":                 "127.0.0.1",
		"ansible_port":                 port,
		"ansible_user":                 user,
		"ansible_ssh_private_key_file": key,
		"ansible_python_interpreter":   "/usr/bin/python3",
		"out_dir":                      suite.targetOut[user],
	}
}

// writeInventory writes the run's inventory and returns its path.
//
// Hosts:
//
//	t         abtest, key login, /usr/bin/python3
//	tpw       abpw, key login, sudo needs ab_password
//	td        abtest without ansible_python_interpreter (discovery)
//	closed    a port nothing listens on
//	wrongkey  abtest with a key the target refuses
//	tpass     abpw, password login (sshpass)
//	wrongpass abpw at "localhost", a wrong password
//	tn        abnopy, chrooted without python, /usr/bin/python3 named anyway;
//	          its host key is known (see setupNoPython)
//	tnd       tn without ansible_python_interpreter (discovery)
func writeInventory(t *testing.T, dir string, override map[string]map[string]any) string {
	t.Helper()
	l := suite.lab
	hosts := map[string]map[string]any{
		"t":        labHost(t, l.User, l.Key),
		"tpw":      labHost(t, l.PWUser, l.Key),
		"td":       labHost(t, l.User, l.Key),
		"closed":   labHost(t, l.User, l.Key),
		"wrongkey": labHost(t, l.User, l.WrongKey),
	}
	delete(hosts["td"], "ansible_python_interpreter")
	hosts["closed"]["ansible_port"] = 1
	for h, pw := range map[string]string{"tpass": l.Password, "wrongpass": "not-" + l.Password} {
		hosts[h] = labHost(t, l.PWUser, "")
		delete(hosts[h], "ansible_ssh_private_key_file")
		hosts[h]["ansible_password"] = pw
	}
	hosts["wrongpass"]["ansible_host"] = "localhost"
	hosts["tn"] = labHost(t, l.NoPyUser, l.Key)
	hosts["tnd"] = labHost(t, l.NoPyUser, l.Key)
	delete(hosts["tnd"], "ansible_python_interpreter")
	for h, vars := range override {
		if hosts[h] == nil {
			hosts[h] = map[string]any{}
		}
		for k, v := range vars {
			hosts[h][k] = v
		}
	}
	inv := map[string]any{
		"all": map[string]any{
			"vars": map[string]any{
				"ansible_ssh_common_args": "-o UserKnownHostsFile=/dev/null",
				"local_dir":               suite.local,
				"data_dir":                suite.data,
				"files_dir":               filepath.Join(suite.corpus, "files"),
				"ab_password":             l.Password,
			},
			"hosts": hosts,
		},
	}
	b, err := json.MarshalIndent(inv, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	// The yaml inventory plugin reads JSON, given a .json name.
	p := filepath.Join(dir, "inventory.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// event returns r's result for task on host, failing t if there is none.
func (r *runResult) event(t *testing.T, host, task string) taskEvent {
	t.Helper()
	for _, e := range r.Doc.Events {
		if e.Host == host && e.Task == task {
			return e
		}
	}
	t.Fatalf("%s run: no result for task %q on host %s", r.Spec.Side, task, host)
	return taskEvent{}
}

// coreVersions caches each ansible-playbook's minor version.
var coreVersions sync.Map // ansible-playbook path → int

// coreMinor returns the 2.x minor version of the ansible-core r ran
// (`ansible-playbook --version`): stock behaviour the checks expect
// differs by version, and the comparison with stock covers the rest.
func coreMinor(t *testing.T, r *runResult) int {
	t.Helper()
	bin := ansiblePlaybook(r.Spec.AnsibleBin)
	if v, ok := coreVersions.Load(bin); ok {
		return v.(int)
	}
	out, err := exec.Command(bin, "--version").Output()
	m := regexp.MustCompile(`\[core 2\.(\d+)\.`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	minor, _ := strconv.Atoi(string(m[1]))
	coreVersions.Store(bin, minor)
	return minor
}
