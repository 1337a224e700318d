package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fusefs"
)

// debugDaemon is a daemon of its own (socket, log, mount), so that the
// debug tests neither see nor disturb the suite's daemon.
type debugDaemon struct {
	socket, mount, log string
	cmd                *exec.Cmd
	exited             chan struct{}
}

func (d *debugDaemon) env() []string {
	return []string{"ANSIBLE_BRIDGE_SOCKET=" + d.socket, "ANSIBLE_BRIDGE_LOG=" + d.log}
}

// startDebugDaemon runs `ansible-bridge daemon --mount` in the
// foreground and waits until the mount answers.
func startDebugDaemon(t *testing.T, dir string) *debugDaemon {
	t.Helper()
	d := &debugDaemon{
		socket: filepath.Join(dir, "sock", "bridge.sock"),
		mount:  filepath.Join(dir, "mnt"),
		log:    filepath.Join(dir, "daemon.log"),
	}
	if err := os.MkdirAll(filepath.Dir(d.socket), 0o700); err != nil {
		t.Fatal(err)
	}
	d.start(t)
	return d
}

func (d *debugDaemon) start(t *testing.T) {
	t.Helper()
	d.cmd = exec.Command(suite.bin, "daemon", "--socket", d.socket, "--mount", d.mount, "--idle", "0")
	d.cmd.Env = append(cleanEnv(os.Environ()), d.env()...)
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.exited = make(chan struct{})
	go func() {
		_ = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() { d.stop(t) })
	// The mount serves once its status file names this daemon (a stat
	// could be answered from the kernel's cache of a dead mount).
	want := []byte(`"pid": ` + strconv.Itoa(d.cmd.Process.Pid) + ",")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if st, err := os.ReadFile(filepath.Join(d.mount, "status")); err == nil && bytes.Contains(st, want) {
			return
		}
		select {
		case <-d.exited:
			t.Fatalf("daemon exited before mounting; log:\n%s", readString(t, d.log))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mount %s never answered; log:\n%s", d.mount, readString(t, d.log))
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

func (d *debugDaemon) stop(t *testing.T) {
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
		t.Errorf("daemon did not stop on SIGTERM")
	}
}

func requireFUSE(t *testing.T) {
	t.Helper()
	if err := fusefs.Available(); err != nil {
		t.Skipf("FUSE unavailable: %v", err)
	}
}

// TestDebugMount runs a playbook with ANSIBLE_KEEP_REMOTE_FILES=1 through
// the bridge with the debug file system mounted, finds the task's
// AnsiballZ wrapper under tmp/ and explodes a copy of it locally, and finds
// the journal entry whose module_args.json holds the task's arguments.
func TestDebugMount(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	requireFUSE(t)
	d := startDebugDaemon(t, t.TempDir())
	r := runPlaybook(t, runSpec{
		Playbook: "debug.yml", Mode: mode{Pipelining: false, Transfer: "sftp"}, Side: bridge,
		Env: append(d.env(), "ANSIBLE_KEEP_REMOTE_FILES=1"),
	})
	wantExit(t, r, 0)
	wantTask(t, r, "t", "probe", "ok", "debug-mount-probe-7f3a")

	// The wrapper, read through the mount (from the target: it was kept).
	wrappers, err := filepath.Glob(filepath.Join(d.mount, "targets", "*", "tmp", "ansible-tmp-*", "AnsiballZ_command.py"))
	if err != nil || len(wrappers) == 0 {
		t.Fatalf("no AnsiballZ_command.py under %s/targets/*/tmp (%v)", d.mount, err)
	}
	src, err := os.ReadFile(wrappers[len(wrappers)-1])
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(wrappers[len(wrappers)-1])
	if err != nil || fi.Size() != int64(len(src)) {
		t.Fatalf("stat size %v, read %d bytes (%v)", fi, len(src), err)
	}
	work := t.TempDir()
	copyPath := filepath.Join(work, "AnsiballZ_command.py")
	if err := os.WriteFile(copyPath, src, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("python3", copyPath, "explode").CombinedOutput()
	if err != nil {
		t.Fatalf("explode: %v\n%s", err, out)
	}
	args, err := os.ReadFile(filepath.Join(work, "debug_dir", "args"))
	if err != nil || !bytes.Contains(args, []byte("debug-mount-probe-7f3a")) {
		t.Fatalf("exploded args %q (%v)", args, err)
	}

	// The journal entry of the module run.
	entries, _ := filepath.Glob(filepath.Join(d.mount, "journal", "*-module"))
	var found bool
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(e, "module_args.json"))
		if err != nil {
			continue
		}
		var margs map[string]any
		if err := json.Unmarshal(raw, &margs); err != nil {
			t.Fatalf("%s/module_args.json: %v", e, err)
		}
		if margs["_raw_params"] == "echo debug-mount-probe-7f3a" {
			found = true
			if m, _ := os.ReadFile(filepath.Join(e, "module")); strings.TrimSpace(string(m)) != "ansible.modules.command" {
				t.Errorf("%s/module = %q", e, m)
			}
			if x, _ := os.ReadFile(filepath.Join(e, "exit")); strings.TrimSpace(string(x)) != "0" {
				t.Errorf("%s/exit = %q", e, x)
			}
		}
	}
	if !found {
		t.Fatalf("no journal entry among %d module runs holds the task's args", len(entries))
	}
	if st, err := os.ReadFile(filepath.Join(d.mount, "status")); err != nil || !bytes.Contains(st, []byte(`"target"`)) {
		t.Fatalf("status: %q (%v)", st, err)
	}
}

// TestDebugMountSurvivesSIGKILL: a daemon killed with SIGKILL leaves its
// mount dead; the next daemon mounting there clears it and serves.
func TestDebugMountSurvivesSIGKILL(t *testing.T) {
	requireLab(t) // the suite builds the binary only with a lab
	requireBridge(t)
	requireFUSE(t)
	d := startDebugDaemon(t, t.TempDir())
	// Not while go-fuse's start-up still holds a file of the mount open
	// (its poll probe): the killed daemon would wait in its exit for its
	// own answer to that file's flush, for ever.
	waitFor(t, 10*time.Second, "the daemon to log its mount done", func() bool {
		return strings.Contains(readString(t, d.log), "debug view mounted")
	})
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.mount, &st); !errors.Is(err, syscall.ENOTCONN) {
		t.Logf("statfs after SIGKILL: %v (expected ENOTCONN; the kernel may have cleaned up)", err)
	}
	d.start(t)
	if _, err := os.ReadFile(filepath.Join(d.mount, "status")); err != nil {
		t.Fatalf("second daemon's mount: %v", err)
	}
}

// TestTop runs `ansible-bridge top` in tmux while a playbook runs and
// checks that the target's row shows up on the screen.
func TestTop(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux")
	}
	dir := t.TempDir()
	d := &debugDaemon{socket: filepath.Join(dir, "sock", "bridge.sock"), log: filepath.Join(dir, "daemon.log")}
	if err := os.MkdirAll(filepath.Dir(d.socket), 0o700); err != nil {
		t.Fatal(err)
	}
	sess := "abtop" + filepath.Base(dir)
	tmux := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("tmux", append([]string{"-L", sess}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", sess, "-x", "160", "-y", "40",
		"env", "ANSIBLE_BRIDGE_SOCKET="+d.socket, suite.bin, "top", "--interval", "200ms")
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", sess, "kill-server").Run() })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runDone := make(chan *runResult, 1)
	go func() {
		runDone <- runPlaybook(t, runSpec{Playbook: "debug.yml", Mode: mode{Pipelining: true, Transfer: "sftp"}, Side: bridge, Env: d.env()})
	}()
	label := suite.lab.User + "@127.0.0.1:" + suite.lab.Port
	var screen string
	for ctx.Err() == nil {
		screen = tmux("capture-pane", "-p", "-t", sess)
		if strings.Contains(screen, label) {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling the screen
	}
	r := <-runDone
	wantExit(t, r, 0)
	if !strings.Contains(screen, label) {
		t.Fatalf("target row %q never appeared; last screen:\n%s", label, screen)
	}
	if !strings.Contains(screen, "TARGET") || !strings.Contains(screen, "INTERPRETERS") {
		t.Fatalf("screen lacks headers:\n%s", screen)
	}
	tmux("send-keys", "-t", sess, "q")
	cmd := exec.Command(suite.bin, "stop")
	cmd.Env = append(cleanEnv(os.Environ()), d.env()...)
	_ = cmd.Run()
}

// TestDaemonStopsWithMountHeldElsewhere: a copy of the debug mount in
// another mount namespace (`unshare -m`, a container started meanwhile)
// keeps the kernel's FUSE connection after the daemon's own unmount; the
// daemon still stops on SIGTERM, and the copy is left dead, not hung.
func TestDaemonStopsWithMountHeldElsewhere(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	requireFUSE(t)
	if os.Getuid() != 0 {
		t.Skip("a mount namespace of its own needs root")
	}
	d := startDebugDaemon(t, t.TempDir())
	holder := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", "echo ready; exec cat")
	startHeld(t, holder, "ready\n")
	if d.stop(t); t.Failed() {
		t.Fatalf("with its mount held in another namespace; log:\n%s", readString(t, d.log))
	}
	o, err := exec.Command("nsenter", "-t", strconv.Itoa(holder.Process.Pid), "-m", "stat", d.mount).CombinedOutput()
	if err == nil || !strings.Contains(string(o), "Transport endpoint is not connected") {
		t.Errorf("the other namespace's copy after the daemon stopped: %v\n%s", err, o)
	}
}
