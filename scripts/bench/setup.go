package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/internal/cbuild"
)

// mode is one way of running Ansible.
type mode struct {
	name       string
	bridge     bool // the shims first on PATH
	floor      bool // the canned-answer ssh/sftp/scp (scripts/floor) first on PATH
	mitogen    bool // Mitogen's strategy (mitogen_linear) with the real ssh
	pipelining bool // ANSIBLE_PIPELINING=True
}

// allModes returns the modes in the order they run and are reported.
func allModes() []mode {
	return []mode{
		{name: "stock-default"},
		{name: "stock-pipelining", pipelining: true},
		{name: "bridge-default", bridge: true},
		{name: "bridge-pipelining", bridge: true, pipelining: true},
		{name: "floor-default", floor: true},
		{name: "floor-pipelining", floor: true, pipelining: true},
		// Mitogen does not use Ansible's pipelining setting; its floor
		// and the bridge it is compared with are the pipelining ones.
		{name: "mitogen", mitogen: true, pipelining: true},
	}
}

// floorName is the name of the floor mode with m's pipelining setting.
func (m mode) floorName() string {
	if m.pipelining {
		return "floor-pipelining"
	}
	return "floor-default"
}

func modeNames() []string {
	var names []string
	for _, m := range allModes() {
		names = append(names, m.name)
	}
	return names
}

// parseModes turns -modes into modes in canonical order. Besides the mode
// names it takes "stock", "bridge", "floor" and "all".
func parseModes(s string) ([]mode, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		matched := false
		for _, m := range allModes() {
			if f == "all" || f == m.name || f == strings.SplitN(m.name, "-", 2)[0] {
				want[m.name] = true
				matched = true
			}
		}
		if !matched {
			return nil, fmt.Errorf("unknown mode %q in -modes (want %s, stock, bridge, floor, mitogen or all)", f, strings.Join(modeNames(), ", "))
		}
	}
	var out []mode
	for _, m := range allModes() {
		if want[m.name] {
			out = append(out, m)
		}
	}
	return out, nil
}

// parsePlaybooks validates -playbooks, keeping canonical order.
func parsePlaybooks(s string) ([]string, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		switch f = strings.TrimSpace(f); f {
		case "loop", "tasks", "become":
			want[f] = true
		default:
			return nil, fmt.Errorf("unknown playbook %q in -playbooks (want loop, tasks, become)", f)
		}
	}
	var out []string
	for _, p := range []string{"loop", "tasks", "become"} {
		if want[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// findMitogen unpacks the peer Mitogen (scripts/ansible-versions.sh
// mitogen) and returns its strategy plugin directory.
func findMitogen(ctx context.Context, root string) (string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(root, "scripts", "ansible-versions.sh"), "mitogen").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("scripts/ansible-versions.sh mitogen: %s", bytes.TrimSpace(ee.Stderr))
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// labEnv is the loopback lab, as `scripts/lab.sh env` exports it.
type labEnv struct {
	dir  string // AB_LAB
	port int    // AB_PORT: the lab sshd's port on 127.0.0.1
	key  string // AB_KEY
	user string // AB_USER
	// cgroup holds the lab sshd and its sessions' processes
	// (AB_TARGET_CGROUP; empty where lab.sh could not make one).
	cgroup string
}

// labFromEnv reads the lab settings, failing with instructions when the lab
// environment is missing.
func labFromEnv() (labEnv, error) {
	lab := labEnv{
		dir:    os.Getenv("AB_LAB"),
		key:    os.Getenv("AB_KEY"),
		user:   os.Getenv("AB_USER"),
		cgroup: os.Getenv("AB_TARGET_CGROUP"),
	}
	if lab.dir == "" {
		return lab, errors.New(`AB_LAB is not set: the benchmark needs the loopback lab.` + "\n" +
			`  Start it with:  scripts/lab.sh up` + "\n" +
			`  then run:       eval "$(scripts/lab.sh env)"` + "\n" +
			`  and try again`)
	}
	port := os.Getenv("AB_PORT")
	if port == "" {
		port = "2222"
	}
	var err error
	if lab.port, err = strconv.Atoi(port); err != nil || lab.port <= 0 || lab.port > 65535 {
		return lab, fmt.Errorf("AB_PORT=%q is not a TCP port", port)
	}
	if lab.key == "" {
		lab.key = filepath.Join(lab.dir, "id_ed25519")
	}
	if lab.user == "" {
		lab.user = "abtest"
	}
	if _, err := os.Stat(lab.key); err != nil {
		return lab, fmt.Errorf("lab key: %w (is the lab up? scripts/lab.sh up)", err)
	}
	return lab, nil
}

// checkCgroup checks that the lab's sshd (its pid file's) runs in
// l.cgroup, if there is one.
func (l labEnv) checkCgroup() error {
	if l.cgroup == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(l.dir, "sshd.pid"))
	if err != nil {
		return fmt.Errorf("the lab's sshd pid: %w", err)
	}
	pid := strings.TrimSpace(string(b))
	procs, err := os.ReadFile(filepath.Join(l.cgroup, "cgroup.procs"))
	if err != nil {
		return fmt.Errorf("AB_TARGET_CGROUP: %w", err)
	}
	if !slices.Contains(strings.Fields(string(procs)), pid) {
		return fmt.Errorf("the lab's sshd (pid %s) is not in %s", pid, l.cgroup)
	}
	return nil
}

// target is the lab sshd's address.
func (l labEnv) target() string { return "127.0.0.1:" + strconv.Itoa(l.port) }

// moduleRoot returns the directory of the main module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the ansible-bridge module: run from the repository")
	}
	return filepath.Dir(gomod), nil
}

// bridgeBin is a built ansible-bridge with its shims.
type bridgeBin struct {
	bin    string // the ansible-bridge binary
	shims  string // directory holding ssh, scp and sftp
	socket string // ANSIBLE_BRIDGE_SOCKET of the private daemon
}

// buildBridge builds the binary from the module root into dir and creates
// the shims. The error carries the tool's output.
func buildBridge(ctx context.Context, root, dir string) (*bridgeBin, error) {
	b := &bridgeBin{
		bin:    filepath.Join(dir, "ansible-bridge"),
		shims:  filepath.Join(dir, "shims"),
		socket: filepath.Join(dir, "sock", "bridge.sock"),
	}
	// The three binaries, as make build makes them: the shims link to the
	// C front, which execs the shim-only one for what it does not serve.
	for out, pkg := range map[string]string{b.bin: ".", filepath.Join(dir, "ansible-bridge-shim"): "./fakessh/cmd/ansible-bridge-shim"} {
		build := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", out, pkg)
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the Makefile builds it
		if msg, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, bytes.TrimSpace(msg))
		}
	}
	if err := cbuild.Build(ctx, root, cbuild.Front, filepath.Join(dir, fakessh.FrontBinary)); err != nil {
		return nil, err
	}
	if out, err := b.command(ctx, "shims", b.shims).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ansible-bridge shims: %w\n%s", err, bytes.TrimSpace(out))
	}
	for _, name := range []string{"ssh", "scp", "sftp"} {
		if _, err := os.Stat(filepath.Join(b.shims, name)); err != nil {
			return nil, fmt.Errorf("ansible-bridge shims made no %s: %w", name, err)
		}
	}
	return b, nil
}

// command runs the binary with the private daemon's socket.
func (b *bridgeBin) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, b.bin, args...)
	cmd.Env = append(os.Environ(), "ANSIBLE_BRIDGE_SOCKET="+b.socket)
	return cmd
}

// startDaemon starts the private daemon without a connection: the ssh
// shim starts it for a control request (-O check), which never dials.
func (b *bridgeBin) startDaemon(ctx context.Context, cpDir string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(b.shims, "ssh"), "-O", "check", "-o", "ControlPath="+filepath.Join(cpDir, "probe"), "bench-probe")
	cmd.Env = append(os.Environ(), "ANSIBLE_BRIDGE_SOCKET="+b.socket)
	_ = cmd.Run() // "Control socket connect(...)": there is no connection, as wanted
	if out, err := b.command(ctx, "status").CombinedOutput(); err != nil {
		return fmt.Errorf("starting the daemon: ansible-bridge status: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// stop stops the private daemon.
func (b *bridgeBin) stop(ctx context.Context) error {
	if out, err := b.command(ctx, "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("ansible-bridge stop: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// buildFloor compiles the floor's C port, scripts/floor/c/floor.c, from the
// module root into dir/floor (as internal/cbuild builds: static, against
// musl where musl-gcc is installed) and links ssh, scp and sftp to it
// there; it returns that directory. The floor is C, not the Go reference in
// scripts/floor, because a Go binary's start (about 5 ms a call, against
// 0.1 ms for a static C one) would be part of what it measures.
func buildFloor(ctx context.Context, root, dir string) (string, error) {
	floorDir := filepath.Join(dir, "floor")
	bin := filepath.Join(floorDir, "ansible-floor")
	if err := os.MkdirAll(floorDir, 0o755); err != nil {
		return "", fmt.Errorf("floor: %w", err)
	}
	if err := cbuild.Build(ctx, root, cbuild.Floor, bin); err != nil {
		return "", err
	}
	for _, name := range []string{"ssh", "scp", "sftp"} {
		if err := os.Symlink("ansible-floor", filepath.Join(floorDir, name)); err != nil {
			return "", fmt.Errorf("floor: %w", err)
		}
	}
	return floorDir, nil
}

// stopMasters asks every ssh ControlPersist master with a socket in dir to
// exit, using the real ssh.
func stopMasters(ctx context.Context, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("control path dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		path := filepath.Join(dir, e.Name())
		out, err := exec.CommandContext(ctx, "ssh", "-o", "ControlPath="+path, "-O", "exit", "bench-target").CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Errorf("ssh -O exit %s: %w: %s", path, err, bytes.TrimSpace(out)))
		}
	}
	return errors.Join(errs...)
}

// writePlaybooks writes the two playbooks and an ansible.cfg into dir and
// returns the playbook paths by name.
func writePlaybooks(dir string, n int) (map[string]string, error) {
	var loop, tasks, becomeTasks strings.Builder
	const head = "# Generated by scripts/bench.\n- hosts: bench\n  gather_facts: false\n  tasks:\n"
	loop.WriteString(head)
	fmt.Fprintf(&loop, "    - name: hostname loop\n      command: hostname\n      loop: \"{{ range(%d) | list }}\"\n", n)
	tasks.WriteString(head)
	for i := range n {
		fmt.Fprintf(&tasks, "    - name: hostname %d\n      command: hostname\n", i+1)
	}
	// sudo is the counting wrapper the inventory names (become_exe).
	becomeTasks.WriteString(strings.Replace(head, "  tasks:", "  become: true\n  tasks:", 1))
	for i := range n {
		fmt.Fprintf(&becomeTasks, "    - name: become hostname %d\n      command: hostname\n", i+1)
	}
	// ANSIBLE_CONFIG points here, so no ansible.cfg from the working
	// directory or home changes what is measured.
	const cfg = "# Generated by scripts/bench.\n[defaults]\nhost_key_checking = False\nretry_files_enabled = False\nnocolor = True\n"
	files := map[string]string{
		"loop":   filepath.Join(dir, "loop.yml"),
		"tasks":  filepath.Join(dir, "tasks.yml"),
		"become": filepath.Join(dir, "become.yml"),
	}
	for path, body := range map[string]string{
		files["loop"]:                     loop.String(),
		files["tasks"]:                    tasks.String(),
		files["become"]:                   becomeTasks.String(),
		filepath.Join(dir, "ansible.cfg"): cfg,
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return files, nil
}

// sudoWrapper is where the sudo that counts its runs lives: become steps
// name it as become_exe, so that the bench can tell how often the target
// ran sudo (stock: once per step; the bridge: once per run).
func sudoWrapper(lab labEnv) string { return filepath.Join(lab.dir, "bench-sudo", "sudo") }

// sudoCountFile is where sudoWrapper appends a line per run.
func sudoCountFile(lab labEnv) string { return filepath.Join(lab.dir, "bench-sudo", "runs") }

// installSudoWrapper writes sudoWrapper and an empty count file, usable
// by the lab user.
func installSudoWrapper(lab labEnv) error {
	dir := filepath.Dir(sudoWrapper(lab))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	script := "#!/bin/sh\necho run >> " + sudoCountFile(lab) + "\nexec /usr/bin/sudo \"$@\"\n"
	if err := os.WriteFile(sudoWrapper(lab), []byte(script), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(sudoCountFile(lab), nil, 0o666); err != nil {
		return err
	}
	return os.Chmod(sudoCountFile(lab), 0o666)
}

// sudoRuns counts the lines in the count file.
func sudoRuns(lab labEnv) int {
	b, _ := os.ReadFile(sudoCountFile(lab))
	return strings.Count(string(b), "\n")
}

// writeInventory writes an inventory for the target reached through the
// relay on port.
func writeInventory(path string, lab labEnv, port int, python string) error {
	inv := fmt.Sprintf("# Generated by scripts/bench.\n[bench]\ntarget ansible_host=127.0.0.1 ansible_port=%d ansible_user=%s "+
		"ansible_ssh_private_key_file=%s ansible_python_interpreter=%s "+
		"ansible_ssh_common_args='-o UserKnownHostsFile=/dev/null' ansible_become_exe=%s\n", port, lab.user, lab.key, python, sudoWrapper(lab))
	if err := os.WriteFile(path, []byte(inv), 0o644); err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}
	return nil
}
