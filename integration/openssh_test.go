package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// credStep is one ssh run of a credentials case: the password sshpass
// types, the ControlPath it goes through ("" for none) and more options.
type credStep struct {
	password string
	cp       string
	opts     []string
}

// TestCredentialsLikeOpenSSH: wrong credentials after good ones are
// refused exactly as OpenSSH refuses them. Each case runs its steps with
// the real ssh and through the shim (a private daemon), each side with
// control sockets of its own, and wants the same exit status, stdout and
// stderr at every step: a connection is shared only where ssh would
// multiplex over a master.
func TestCredentialsLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	if _, err := exec.LookPath("sshpass"); err != nil {
		t.Skip("sshpass not installed")
	}
	good, wrong := suite.lab.Password, "wrong-password"
	auto := []string{"-o", "ControlMaster=auto", "-o", "ControlPersist=60s"}
	cases := []struct {
		name  string
		steps []credStep
	}{
		{"no Control options", []credStep{{good, "", nil}, {wrong, "", nil}}},
		{"two ControlPaths", []credStep{{good, "a", auto}, {wrong, "b", auto}}},
		{"BatchMode beside a master", []credStep{{good, "a", auto}, {good, "b", append([]string{"-o", "BatchMode=yes"}, auto...)}}},
		{"NumberOfPasswordPrompts=0", []credStep{{good, "a", auto}, {good, "b", append([]string{"-o", "NumberOfPasswordPrompts=0"}, auto...)}}},
		{"ControlMaster=no without a master", []credStep{{wrong, "a", []string{"-o", "ControlMaster=no"}}}},
		{"ControlMaster=yes beside a master", []credStep{{good, "a", auto}, {wrong, "a", []string{"-o", "ControlMaster=yes"}}}},
		// ssh multiplexes over a live master whatever the client's own
		// credentials: so must the bridge.
		{"the same ControlPath", []credStep{{good, "a", auto}, {wrong, "a", auto}}},
		{"ControlMaster=no over a master", []credStep{{good, "a", auto}, {wrong, "a", []string{"-o", "ControlMaster=no"}}}},
		{"no ControlPersist", []credStep{{good, "a", []string{"-o", "ControlMaster=auto"}}, {wrong, "a", []string{"-o", "ControlMaster=auto"}}}},
		// ask tries no master, as yes: it logs in.
		{"ControlMaster=ask beside a master", []credStep{{good, "a", auto}, {wrong, "a", []string{"-o", "ControlMaster=ask"}}}},
		{"-O check with ControlMaster=ask beside a master", []credStep{{good, "a", auto}, {wrong, "a", []string{"-O", "check", "-o", "ControlMaster=ask"}}}},
		// ssh asks the server for these devices only (none is bsdauth).
		{"KbdInteractiveDevices", []credStep{
			{good, "a", []string{"-o", "ControlMaster=auto", "-o", "PreferredAuthentications=keyboard-interactive", "-o", "KbdInteractiveDevices=bsdauth"}},
			{good, "b", []string{"-o", "ControlMaster=auto", "-o", "PreferredAuthentications=keyboard-interactive", "-o", "KbdInteractiveDevices=pam"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { compareCredSteps(t, tc.steps, 0) })
	}
	// Without ControlPersist the master is the ssh itself: killed, it
	// takes its connection along, and the next client logs in.
	t.Run("a master without ControlPersist killed", func(t *testing.T) {
		opts := []string{"-o", "ControlMaster=auto"}
		compareCredSteps(t, []credStep{{good, "a", opts}, {wrong, "a", opts}}, syscall.SIGKILL)
	})
}

// compareCredSteps runs steps with the real ssh and through the shim,
// and compares what each step gave. killFirst, if set, makes the first
// step run a long command and kills its ssh with this signal once its
// control socket is there.
func compareCredSteps(t *testing.T, steps []credStep, killFirst syscall.Signal) {
	sides := []struct{ name, ssh string }{{"openssh", suite.realSSH}, {"shim", filepath.Join(suite.shims, "ssh")}}
	d := newPrivateDaemon(t)
	var runs [2][]sshOutcome
	for i, side := range sides {
		dir, err := os.MkdirTemp(suite.work, "cp-")
		if err != nil {
			t.Fatal(err)
		}
		for k, st := range steps {
			kill := killFirst
			if k > 0 {
				kill = 0
			}
			runs[i] = append(runs[i], passwordSSH(t, side.ssh, d, st, dir, kill))
		}
		// Masters the real ssh left: stopped, as the daemon is.
		for _, st := range steps {
			if st.cp != "" {
				passwordSSH(t, side.ssh, d, credStep{suite.lab.Password, st.cp, []string{"-O", "exit"}}, dir, 0)
			}
		}
	}
	for k := range steps {
		if want, got := runs[0][k], runs[1][k]; got != want {
			t.Errorf("step %d through the shim: %+v\nwith OpenSSH: %+v", k+1, got, want)
		}
	}
}

type sshOutcome struct {
	rc             int
	stdout, stderr string
}

// passwordSSH runs `sshpass -p PASSWORD ssh OPTS abpw@127.0.0.1 whoami`
// with public keys off, in a session of its own; with kill set, `sleep
// 30`, killed with it (killOnceListening).
func passwordSSH(t *testing.T, ssh string, d *privateDaemon, st credStep, cpDir string, kill syscall.Signal) sshOutcome {
	t.Helper()
	args := append([]string{"-p", st.password, ssh}, st.opts...)
	if st.cp != "" {
		args = append(args, "-o", "ControlPath="+filepath.Join(cpDir, st.cp))
	}
	command := "whoami"
	if kill != 0 {
		command = "sleep 30"
	}
	args = append(args, "-F", "/dev/null", "-o", "PubkeyAuthentication=no", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-p", suite.lab.Port, suite.lab.PWUser+"@127.0.0.1", command)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sshpass", args...)
	if kill != 0 {
		go killOnceListening(t, cmd, filepath.Join(cpDir, st.cp), kill)
	}
	o := runOwnSession(t, cmd, d.env())
	o.stderr = strings.ReplaceAll(o.stderr, cpDir, "CPDIR")
	return o
}

// TestNoPasswdEntryLikeOpenSSH: ssh refuses to run for a uid with no
// passwd entry ("No user exists for uid N"); so does the shim, which
// hands it to the real ssh, where it logged in with $USER or as "".
func TestNoPasswdEntryLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap not installed (Debian: bubblewrap; scripts/setup.sh)")
	}
	var outs [2]sshOutcome
	for i, ssh := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
		// The key is root's: a copy the sandbox's uid can read.
		key := filepath.Join(t.TempDir(), "key")
		raw, err := os.ReadFile(suite.lab.Key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(key, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		// --unshare-pid: the sandbox's init holds bwrap's output open
		// while any process of it runs. For a uid ssh refuses, the
		// daemon the shim starts has nothing to keep warm and exits a
		// second after the call; were it to stay, the output would not
		// end, and after WaitDelay the sandbox is still there.
		info, err := os.CreateTemp(t.TempDir(), "info")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { killSandbox(t, info.Name()) })
		cmd := exec.Command("bwrap", "--unshare-user", "--unshare-pid", "--info-fd", "3", "--uid", "1000124", "--gid", "1000124",
			"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
			"--ro-bind", suite.work, suite.work, "--ro-bind", key, "/tmp/key", "--unsetenv", "XDG_RUNTIME_DIR", "--",
			ssh, "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
			"-o", "ControlMaster=auto", "-o", "ControlPersist=2s", "-o", "ControlPath=/tmp/cp", "-i", "/tmp/key",
			"-p", suite.lab.Port, suite.lab.User+"@127.0.0.1", "echo", "ran")
		cmd.ExtraFiles = []*os.File{info}
		cmd.WaitDelay = 30 * time.Second
		outs[i] = runOwnSession(t, cmd, []string{"USER=" + suite.lab.User})
		if killSandbox(t, info.Name()) {
			t.Errorf("%s: 30 s after the call its sandbox still runs (the daemon stayed?)", ssh)
		}
	}
	if outs[1] != outs[0] {
		t.Errorf("through the shim: %+v\nwith OpenSSH: %+v", outs[1], outs[0])
	}
	if outs[0].rc != 255 || !strings.Contains(outs[0].stderr, "No user exists for uid 1000124") {
		t.Errorf("OpenSSH: %+v, want it to refuse the uid", outs[0])
	}
}

// killSandbox ends what is left of the bwrap --unshare-pid sandbox
// whose --info-fd output is in infoFile (killing its init ends them
// all), and says whether there was anything left.
func killSandbox(t *testing.T, infoFile string) bool {
	raw, err := os.ReadFile(infoFile)
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err == nil {
		err = json.Unmarshal(raw, &info)
	}
	if err != nil || info.ChildPid <= 0 {
		t.Errorf("bwrap --info-fd: %q: %v", raw, err)
		return false
	}
	// Its output closed, an init that is ending still takes a moment
	// to become a zombie.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", info.ChildPid))
		if err != nil || !strings.Contains(string(stat), " (bwrap) ") || strings.Contains(string(stat), ") Z ") {
			return false // gone (its pid perhaps another's now), or exited and not yet reaped
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not timing
	}
	_ = syscall.Kill(info.ChildPid, syscall.SIGKILL)
	return true
}

// killOnceListening waits (a minute at most) until something listens on
// the control socket sock, then sends sig to the ssh that cmd (sshpass)
// runs.
func killOnceListening(t *testing.T, cmd *exec.Cmd, sock string, sig syscall.Signal) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not timing
	}
	for cmd.Process == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	kids, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
	f := strings.Fields(string(kids))
	if err != nil || len(f) != 1 {
		t.Errorf("sshpass %s: children %q: %v", pid, kids, err)
		return
	}
	child, _ := strconv.Atoi(f[0])
	_ = syscall.Kill(child, sig)
}

// TestProxyLikeOpenSSH: ProxyJump and ProxyCommand print what OpenSSH
// prints. A would-be ControlPersist master (Ansible always passes
// ControlPersist) runs its proxy, a jump's "ssh -W" included, with stderr
// on /dev/null; sshpkt_fatal's lines ("Connection closed by ...") are
// logged at INFO, so that LogLevel ERROR hides them. Each case runs the
// real ssh and the shim (a private daemon) with control sockets of their
// own, and wants the same exit status, stdout and stderr.
func TestProxyLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	dir := t.TempDir()
	// The jump's ssh reads only this file (-F is passed on), not the
	// command line's -o options.
	cfg := filepath.Join(dir, "config")
	conf := "Host *\n  User " + suite.lab.User + "\n  IdentityFile " + suite.lab.Key + "\n  IdentitiesOnly yes\n" +
		"  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := strconv.Itoa(dead.Addr().(*net.TCPAddr).Port)
	dead.Close()
	lab := suite.lab.Port
	// localhost is the jump, 127.0.0.1 the target: one sshd, two names
	// (ssh refuses a jump to the destination itself).
	jump := []string{"-J", "localhost:" + lab}
	failing := []string{"-o", `ProxyCommand=sh -c "echo proxy says no >&2; exit 1"`}
	// A banner, then gone: ssh's first key exchange write fails (audit
	// 16). The pause lets ssh's own banner go out first on both sides.
	bannerOnly := []string{"-o", `ProxyCommand=sh -c "sleep 0.5; echo SSH-2.0-x; exit 3"`}
	netcat := []string{"-o", "ProxyCommand=" + suite.realSSH + " -F " + cfg + " -W %h:%p localhost -p " + lab}
	persist := []string{"-o", "ControlPersist=60s"}
	errorLevel := []string{"-o", "LogLevel=ERROR"}
	cat := func(parts ...[]string) []string {
		var all []string
		for _, p := range parts {
			all = append(all, p...)
		}
		return all
	}
	cases := []struct {
		name string
		opts []string
		port string
	}{
		{"jump", cat(jump, persist), lab},
		{"jump without ControlPersist", jump, lab},
		{"jump refused", cat([]string{"-J", "localhost:" + deadPort}, persist), lab},
		{"jump refused without ControlPersist", []string{"-J", "localhost:" + deadPort}, lab},
		{"target refused through the jump", cat(jump, persist), deadPort},
		{"target refused through the jump without ControlPersist", jump, deadPort},
		{"target refused through the jump, LogLevel ERROR", cat(jump, errorLevel), deadPort},
		{"ProxyCommand", cat(netcat, persist), lab},
		{"ProxyCommand without ControlPersist", netcat, lab},
		{"ProxyCommand fails", cat(failing, persist), lab},
		{"ProxyCommand fails without ControlPersist", failing, lab},
		{"ProxyCommand gone after its banner", cat(bannerOnly, persist), lab},
		{"ProxyCommand gone after its banner without ControlPersist", bannerOnly, lab},
		{"ProxyCommand fails, LogLevel ERROR", cat(failing, errorLevel), lab},
		{"ProxyCommand fails, -q", cat(failing, []string{"-q"}), lab},
	}
	sides := []struct{ name, ssh string }{{"openssh", suite.realSSH}, {"shim", filepath.Join(suite.shims, "ssh")}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newPrivateDaemon(t)
			var got [2]sshOutcome
			for i, side := range sides {
				cpDir, err := os.MkdirTemp(suite.work, "cp-")
				if err != nil {
					t.Fatal(err)
				}
				// ControlMaster auto: without it the shim runs the real ssh.
				cp := []string{"-o", "ControlPath=" + filepath.Join(cpDir, "%C"), "-o", "ControlMaster=auto"}
				args := cat([]string{"-F", cfg}, cp, tc.opts, []string{"-p", tc.port, "127.0.0.1", "echo through"})
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				got[i] = runOwnSession(t, exec.CommandContext(ctx, side.ssh, args...), d.env())
				cancel()
				stop := cat([]string{"-F", cfg}, cp, []string{"-O", "exit", "-p", tc.port, "127.0.0.1"})
				stopCmd := exec.Command(side.ssh, stop...)
				stopCmd.Env = append(cleanEnv(os.Environ()), d.env()...) // not the default socket's daemon
				_ = stopCmd.Run()
			}
			if got[0] != got[1] {
				t.Errorf("through the shim: %+v\nwith OpenSSH: %+v", got[1], got[0])
			}
			if strings.Contains(tc.name, "refused") || strings.Contains(tc.name, "fails") || strings.Contains(tc.name, "gone") {
				if got[0].rc != 255 {
					t.Errorf("OpenSSH exited %d, want 255: the case tests nothing", got[0].rc)
				}
			} else if got[0].stdout != "through\n" {
				t.Errorf("OpenSSH's run printed %q: the case tests nothing", got[0].stdout)
			}
		})
	}
}

// startHeld starts cmd with its stdin and stdout piped and waits until
// it prints ready; closing the stdin it returns ends cmd, which the
// test's cleanup waits for.
func startHeld(t *testing.T, cmd *exec.Cmd, ready string) io.Closer {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	got := make([]byte, len(ready))
	if _, err := io.ReadFull(out, got); err != nil || string(got) != ready {
		t.Fatalf("%s did not start: %q %v", cmd.Path, got, err)
	}
	return in
}

// startAgent starts an ssh-agent of the test's own, listening in dir,
// and returns its socket; the agent ends with the test.
func startAgent(t *testing.T, dir string) string {
	t.Helper()
	sock := filepath.Join(dir, "agent.sock")
	agentCmd := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := agentCmd.Start(); err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	t.Cleanup(func() { _ = agentCmd.Process.Kill(); _ = agentCmd.Wait() })
	waitFor(t, 10*time.Second, "ssh-agent's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	return sock
}

// TestAgentFullOfKeysLikeOpenSSH: with an ssh-agent holding seven other
// keys before the -i key's, ssh offers the -i key first ("explicit
// agent") and logs in before sshd's MaxAuthTries (6) ends it; so must
// the shim.
func TestAgentFullOfKeysLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	dir := t.TempDir()
	sock := startAgent(t, dir)
	var keys []string
	for i := range 7 {
		k := filepath.Join(dir, "k"+strconv.Itoa(i))
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		keys = append(keys, k)
	}
	add := exec.Command("ssh-add", append(keys, suite.lab.Key)...)
	add.Env = append(cleanEnv(os.Environ()), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v\n%s", err, out)
	}
	kh := labKnownHosts(t)
	d := newPrivateDaemon(t)
	env := append(d.env(), "SSH_AUTH_SOCK="+sock)
	var runs [2]hostKeyRun
	for i, side := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
		cp := filepath.Join(dir, []string{"real", "shim"}[i])
		runs[i] = sshRun(t, side, kh, []string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + cp}, env)
	}
	want, got := runs[0], runs[1]
	if got != want {
		t.Errorf("through the shim: rc %d, stdout %q, stderr:\n%s\nwith OpenSSH: rc %d, stdout %q, stderr:\n%s",
			got.rc, got.stdout, got.stderr, want.rc, want.stdout, want.stderr)
	}
	if want.rc != 0 {
		t.Errorf("OpenSSH did not log in: rc %d\n%s", want.rc, want.stderr)
	}
	if st := d.mustStatus(t); len(st.Targets) != 1 || st.Targets[0].Dials != 1 {
		t.Errorf("not served by the daemon (a fallback?): targets %+v", st.Targets)
	}
}

// TestAddKeysToAgentLikeOpenSSH: with AddKeysToAgent, the key ssh loads
// from its file is added to the agent as it logs in, with the key's own
// comment; through the shim (served by the daemon) the agent then lists
// the same.
func TestAddKeysToAgentLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	dir := t.TempDir()
	sock := startAgent(t, dir)
	sshAdd := func(args ...string) string {
		c := exec.Command("ssh-add", args...)
		c.Env = append(cleanEnv(os.Environ()), "SSH_AUTH_SOCK="+sock)
		out, _ := c.CombinedOutput() // -l exits 1 with no identities
		return string(out)
	}
	// The lab key keeps a comment; a copy of it none.
	b, err := os.ReadFile(suite.lab.Key)
	if err != nil {
		t.Fatal(err)
	}
	noComment := filepath.Join(dir, "nocomment")
	if err := os.WriteFile(noComment, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-q", "-c", "-C", "", "-f", noComment).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -c: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "config")
	if err := os.WriteFile(cfg, []byte("Host *\n  AddKeysToAgent yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kh := labKnownHosts(t)
	cases := []struct {
		name string
		args []string
	}{
		{"from a file", []string{"-F", cfg, "-i", suite.lab.Key}},
		{"with a lifespan, no comment", []string{"-F", "none", "-o", "AddKeysToAgent=confirm 1h", "-i", noComment}},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newPrivateDaemon(t)
			env := append(d.env(), "SSH_AUTH_SOCK="+sock)
			var runs [2]sshOutcome
			var listed [2]string
			for i, side := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
				sshAdd("-D")
				cp := filepath.Join(dir, fmt.Sprintf("%s-%d", []string{"real", "shim"}[i], ci))
				args := append(append([]string{}, tc.args...), "-o", "BatchMode=yes", "-p", suite.lab.Port,
					"-o", "UserKnownHostsFile="+kh, "-o", "ControlMaster=auto", "-o", "ControlPath="+cp,
					suite.lab.User+"@127.0.0.1", "echo", "hi")
				runs[i] = runOwnSession(t, exec.Command(side, args...), env)
				listed[i] = sshAdd("-l")
			}
			if runs[0] != runs[1] {
				t.Errorf("through the shim: %+v\nwith OpenSSH: %+v", runs[1], runs[0])
			}
			if runs[0].rc != 0 || !strings.Contains(listed[0], "(ED25519)") {
				t.Fatalf("OpenSSH did not log in and add the key: rc %d\n%s\nagent: %s", runs[0].rc, runs[0].stderr, listed[0])
			}
			if listed[1] != listed[0] {
				t.Errorf("the agent lists, through the shim:\n%s\nwith OpenSSH:\n%s", listed[1], listed[0])
			}
			if st := d.mustStatus(t); len(st.Targets) != 1 || st.Targets[0].Dials != 1 {
				t.Errorf("not served by the daemon (a fallback?): targets %+v", st.Targets)
			}
		})
	}
}

var sessionIDLine = regexp.MustCompile(`master session id: \d+`)

// TestMasterProcessLikeOpenSSH: a ControlPersist master is a process of
// its own, whose pid `ssh -O check` names: two masters have two; `kill`
// of one's pid ends that master only (SIGTERM, which ssh catches,
// removes its socket; SIGKILL leaves it, refusing); after `-O exit` the
// pid is gone. Through the shims that process is the daemon's child.
func TestMasterProcessLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	dir := t.TempDir()
	kh := labKnownHosts(t)
	d := newPrivateDaemon(t)
	var got [2][]string
	for i, side := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
		name := []string{"real", "shim"}[i]
		cpA, cpB := filepath.Join(dir, name+"-A"), filepath.Join(dir, name+"-B")
		opts := func(cp string) []string {
			return []string{"-o", "ControlMaster=auto", "-o", "ControlPersist=60", "-o", "ControlPath=" + cp}
		}
		say := func(f string, a ...any) { got[i] = append(got[i], fmt.Sprintf(f, a...)) }
		check := func(cp string) (int, sshOutcome) {
			args := append([]string{"-F", "none", "-O", "check"}, append(opts(cp), "lab")...)
			o := runOwnSession(t, exec.Command(side, args...), d.env())
			o.stderr = strings.ReplaceAll(o.stderr, cp, "CP")
			var pid int
			if _, err := fmt.Sscanf(o.stderr, "Master running (pid=%d)", &pid); err != nil {
				return 0, o
			}
			return pid, o
		}
		up := func(cp string) int {
			if r := sshRun(t, side, kh, opts(cp), d.env()); r.rc != 0 {
				t.Fatalf("%s: master at %s: rc %d\n%s", side, cp, r.rc, r.stderr)
			}
			pid, o := check(cp)
			if pid == 0 {
				t.Fatalf("%s: -O check: %+v", side, o)
			}
			if i == 1 && !isDaemon(parentPID(pid)) {
				t.Errorf("through the shims, master %d's parent %d is not the daemon", pid, parentPID(pid))
			}
			return pid
		}
		// gone: the pid is reaped, or a zombie (a stock master's parent
		// here may not reap it).
		gone := func(pid int) bool {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			return err != nil || strings.Contains(string(b), ") Z ")
		}
		pidA, pidB := up(cpA), up(cpB)
		say("A and B have the same pid: %t", pidA == pidB)
		// A real ssh as the master's client: the session number its
		// master gives it (the lowest channel number free) each time.
		for range 2 {
			o := sshRun(t, suite.realSSH, kh, append([]string{"-v"}, opts(cpB)...), d.env())
			say("ssh -v through B: %s", sessionIDLine.FindString(o.stderr))
		}

		_ = syscall.Kill(pidA, syscall.SIGTERM)
		waitFor(t, 10*time.Second, "A's master to go on SIGTERM", func() bool { p, _ := check(cpA); return p == 0 })
		_, o := check(cpA)
		say("A after kill -TERM: rc %d %s", o.rc, o.stderr)
		p, o := check(cpB)
		say("B after kill -TERM of A: same pid %t, rc %d", p == pidB, o.rc)

		pidA = up(cpA)
		_ = syscall.Kill(pidA, syscall.SIGKILL)
		waitFor(t, 10*time.Second, "A's master to go on SIGKILL", func() bool { p, _ := check(cpA); return p == 0 && gone(pidA) })
		_, o = check(cpA)
		say("A after kill -KILL: rc %d %s", o.rc, o.stderr)
		p, o = check(cpB)
		say("B after kill -KILL of A: same pid %t, rc %d", p == pidB, o.rc)
		_ = os.Remove(cpA)

		pidA = up(cpA)
		args := append([]string{"-F", "none", "-O", "exit"}, append(opts(cpA), "lab")...)
		o = runOwnSession(t, exec.Command(side, args...), d.env())
		say("A -O exit: rc %d %s", o.rc, o.stderr)
		waitFor(t, 10*time.Second, "A's master process to go after -O exit", func() bool { return gone(pidA) })
		p, o = check(cpB)
		say("B after -O exit of A: same pid %t, rc %d", p == pidB, o.rc)
		args = append([]string{"-F", "none", "-O", "exit"}, append(opts(cpB), "lab")...)
		runOwnSession(t, exec.Command(side, args...), d.env())
		waitFor(t, 10*time.Second, "B's master process to go after -O exit", func() bool { return gone(pidB) })
	}
	if w, g := strings.Join(got[0], "\n"), strings.Join(got[1], "\n"); w != g {
		t.Errorf("through the shims:\n%s\nwith OpenSSH:\n%s", g, w)
	}
}

// TestMaxSessionsLikeOpenSSH: with sshd's MaxSessions (2 for the zoo's
// maxsessions user) taken by two sessions over a master, ssh's next mux
// client is refused by its master, says so and logs in itself, with its
// own key: a wrong key fails there. Through the shims the same, and the
// connection it logged in on ends with it.
func TestMaxSessionsLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	user := zooUsers(t, "AB_ZOO_CASES")["maxsessions"]
	if user == "" {
		t.Skip("no MaxSessions user in AB_ZOO_CASES")
	}
	dir := t.TempDir()
	kh := labKnownHosts(t)
	d := newPrivateDaemon(t)
	var got [2][]string
	for i, side := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
		cp := filepath.Join(dir, []string{"real", "shim"}[i])
		ssh := func(key string, cmd ...string) *exec.Cmd {
			args := append(labMuxArgs(kh, cp, "60", key), user+"@127.0.0.1")
			return exec.Command(side, append(args, cmd...)...)
		}
		say := func(what string, o sshOutcome) {
			got[i] = append(got[i], fmt.Sprintf("%s: rc %d, stdout %q, stderr %q", what, o.rc, o.stdout, strings.ReplaceAll(o.stderr, cp, "CP")))
		}
		say("master", runOwnSession(t, ssh(suite.lab.Key, "true"), d.env()))
		// Two sessions held open until their stdin closes.
		var holders []*exec.Cmd
		var ins []io.Closer
		for range 2 {
			h := ssh(suite.lab.Key, "echo up; cat >/dev/null")
			h.Env = append(cleanEnv(os.Environ()), append([]string{"HOME=" + suite.home, "PATH=" + suite.basePATH}, d.env()...)...)
			holders = append(holders, h)
			ins = append(ins, startHeld(t, h, "up\n"))
		}
		say("a third session", runOwnSession(t, ssh(suite.lab.Key, "echo third"), d.env()))
		say("a third with the wrong key", runOwnSession(t, ssh(suite.lab.WrongKey, "echo wrong key"), d.env()))
		if i == 1 {
			st := d.mustStatus(t)
			if len(st.Targets) != 1 || st.Targets[0].Connections != 1 {
				t.Errorf("the daemon keeps connections the third sessions logged in on: %+v", st.Targets)
			}
		}
		for j, h := range holders {
			_ = ins[j].Close()
			_ = h.Wait()
		}
		runOwnSession(t, exec.Command(side, "-F", "none", "-o", "ControlPath="+cp, "-O", "exit", "lab"), d.env())
	}
	if w, g := strings.Join(got[0], "\n"), strings.Join(got[1], "\n"); w != g {
		t.Errorf("through the shims:\n%s\nwith OpenSSH:\n%s", g, w)
	}
}

// TestMonitorKilledLikeOpenSSH: the sshd monitor ("sshd: USER [priv]")
// of a ControlPersist master's connection is killed (SIGKILL, as by the
// OOM killer); its unprivileged child keeps the connection and closes it
// at the next session's exec, unanswered. ssh's mux client then sees its
// master go: 255, nothing said ("Shared connection to HOST closed." with
// -tt), not "exec request failed" (sshd's refusal); the next invocation
// logs in anew. Only this test's connections' monitors are killed (the
// lab's sshd is shared).
func TestMonitorKilledLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	dir := t.TempDir()
	kh := labKnownHosts(t)
	d := newPrivateDaemon(t)
	var got [2][]string
	for i, side := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
		cp := filepath.Join(dir, []string{"real", "shim"}[i])
		ssh := func(flag string, cmd ...string) sshOutcome {
			args := labMuxArgs(kh, cp, "60", suite.lab.Key)
			if flag != "" {
				args = append(args, strings.Fields(flag)...)
			}
			args = append(append(args, suite.lab.User+"@127.0.0.1"), cmd...)
			o := runOwnSession(t, exec.Command(side, args...), d.env())
			o.stderr = strings.ReplaceAll(o.stderr, cp, "CP")
			return o
		}
		say := func(what string, o sshOutcome) {
			got[i] = append(got[i], fmt.Sprintf("%s: rc %d, stdout %q, stderr %q", what, o.rc, o.stdout, o.stderr))
		}
		// killMonitors kills the monitors of the master's connections: the
		// ssh master's (-O check names it), or the private daemon's (the
		// parent of the process -O check names).
		killMonitors := func() {
			o := ssh("-O check")
			var pid int
			if _, err := fmt.Sscanf(o.stderr, "Master running (pid=%d)", &pid); err != nil {
				t.Fatalf("%s: -O check: %+v", side, o)
			}
			if i == 1 {
				pid = parentPID(pid)
			}
			mons := labMonitors(t, pid)
			if len(mons) == 0 {
				t.Fatalf("%s: no sshd monitor found for the connections of pid %d", side, pid)
			}
			for _, m := range mons {
				_ = syscall.Kill(m, syscall.SIGKILL)
				waitFor(t, 10*time.Second, "the sshd monitor to go", func() bool { return gone(m) })
			}
		}
		say("master", ssh("", "echo master-up"))
		killMonitors()
		say("a session", ssh("", "echo rider"))
		say("the next", ssh("", "echo again"))
		killMonitors()
		say("a session with -tt", ssh("-tt", "echo rider"))
		say("the next", ssh("", "echo again"))
		ssh("-O exit")
	}
	if w, g := strings.Join(got[0], "\n"), strings.Join(got[1], "\n"); w != g {
		t.Errorf("through the shims:\n%s\nwith OpenSSH:\n%s", g, w)
	}
}

// gone: pid is reaped, or a zombie.
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err != nil || strings.Contains(string(b), ") Z ")
}

// labMonitors are the sshd monitors ("sshd: USER [priv]") of pid's TCP
// connections to the lab's sshd: the sshd processes holding the server's
// end of each.
func labMonitors(t *testing.T, pid int) []int {
	t.Helper()
	port, _ := strconv.Atoi(suite.lab.Port)
	own := socketInodes(pid)
	conns := tcpConns(t)
	var mons []int
	for _, c := range conns {
		if c.remote != port || !own[c.inode] {
			continue
		}
		for _, s := range conns {
			if s.local != port || s.remote != c.local {
				continue
			}
			procs, _ := filepath.Glob("/proc/[0-9]*")
			for _, p := range procs {
				n, _ := strconv.Atoi(filepath.Base(p))
				cmd, _ := os.ReadFile(p + "/cmdline")
				if strings.HasPrefix(string(cmd), "sshd: ") && strings.Contains(string(cmd), "[priv]") && socketInodes(n)[s.inode] {
					mons = append(mons, n)
				}
			}
		}
	}
	return mons
}

// socketInodes are the inodes of the sockets pid has open.
func socketInodes(pid int) map[string]bool {
	fds, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/fd/*")
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	return inodes
}

// tcpConn is a TCP socket of /proc/net/tcp{,6}: its ports and inode.
type tcpConn struct {
	local, remote int
	inode         string
}

func tcpConns(t *testing.T) []tcpConn {
	t.Helper()
	var conns []tcpConn
	port := func(addr string) int {
		n, _ := strconv.ParseInt(addr[strings.LastIndexByte(addr, ':')+1:], 16, 32)
		return int(n)
	}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if fs := strings.Fields(line); len(fs) >= 10 {
				conns = append(conns, tcpConn{local: port(fs[1]), remote: port(fs[2]), inode: fs[9]})
			}
		}
	}
	return conns
}

// TestForegroundMasterSaysForwardFailureLikeOpenSSH: a master made
// without ControlPersist stays in the foreground, and its stderr shows
// what ssh's master logs about its clients' forwarded connections: a
// rider's -R to a port where nothing listens, connected to from the
// remote, is "connect_to 127.0.0.1 port Q: failed.". (Its -L lines carry
// ssh's channel numbers, which the daemon cannot give: docs/limits.md.)
func TestForegroundMasterSaysForwardFailureLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	dir := t.TempDir()
	kh := labKnownHosts(t)
	d := newPrivateDaemon(t)
	var got [2][]string
	for i, side := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
		cp := filepath.Join(dir, []string{"real", "shim"}[i])
		listen, refused := unusedPort(t), unusedPort(t)
		ssh := func(flags []string, cmd ...string) *exec.Cmd {
			args := append(labMuxArgs(kh, cp, "no", suite.lab.Key), flags...)
			return exec.Command(side, append(append(args, suite.lab.User+"@127.0.0.1"), cmd...)...)
		}
		norm := func(s string) string {
			return strings.NewReplacer(strconv.Itoa(listen), "P", strconv.Itoa(refused), "Q", cp, "CP").Replace(s)
		}
		master := ssh(nil, "echo up; cat >/dev/null")
		master.Env = append(cleanEnv(os.Environ()), append([]string{"HOME=" + suite.home, "PATH=" + suite.basePATH}, d.env()...)...)
		var masterErr bytes.Buffer
		master.Stderr = &masterErr
		in := startHeld(t, master, "up\n")
		connect := fmt.Sprintf(`python3 -c 'import socket; print(repr(socket.create_connection(("127.0.0.1", %d)).recv(9)))'`, listen)
		rider := ssh([]string{"-R", fmt.Sprintf("%d:127.0.0.1:%d", listen, refused)}, connect)
		o := runOwnSession(t, rider, d.env())
		got[i] = append(got[i], fmt.Sprintf("rider: rc %d, stdout %q, stderr %q", o.rc, norm(o.stdout), norm(o.stderr)))
		_ = in.Close()
		err := master.Wait()
		got[i] = append(got[i], fmt.Sprintf("master: %v, stderr %q", err, norm(masterErr.String())))
	}
	if w, g := strings.Join(got[0], "\n"), strings.Join(got[1], "\n"); w != g {
		t.Errorf("through the shims:\n%s\nwith OpenSSH:\n%s", g, w)
	}
}

// labMuxArgs is ssh's options for the lab's sshd in the *LikeOpenSSH
// tests: labMuxOpts and the lab's port.
func labMuxArgs(kh, cp, persist, key string) []string {
	return append(labMuxOpts(kh, cp, persist, key), "-p", suite.lab.Port)
}

// labMuxOpts is the options ssh, scp and sftp share in those tests (each
// names the port its own way): no config file, known_hosts kh, batch
// mode, only key, and a master (ControlMaster auto, ControlPersist
// persist) on cp.
func labMuxOpts(kh, cp, persist, key string) []string {
	return []string{"-F", "none", "-o", "UserKnownHostsFile=" + kh, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
		"-o", "ControlMaster=auto", "-o", "ControlPersist=" + persist, "-o", "ControlPath=" + cp, "-i", key}
}

// unusedPort is a TCP port nothing listens on at 127.0.0.1 (just freed).
func unusedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestLoginAtPromptLikeOpenSSH: while one ssh's password login waits at
// its SSH_ASKPASS prompt, nothing else on its ControlPath waits for it:
// -O check finds no control socket (a master listens once logged in), a
// second ssh logs in with its key and becomes the master, and the first,
// once answered, finds the socket taken and runs without multiplexing.
// Through the shims the same (the daemon once held the target's lock
// across the login, so -O check and the second login hung behind it).
func TestLoginAtPromptLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	dir := t.TempDir()
	kh := labKnownHosts(t)
	d := newPrivateDaemon(t)
	pid := regexp.MustCompile(`pid=[0-9]+`)
	var got [2][]string
	for i, side := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
		name := []string{"real", "shim"}[i]
		cp := filepath.Join(dir, name)
		asked, answer := filepath.Join(dir, name+".asked"), filepath.Join(dir, name+".answer")
		askpass := filepath.Join(dir, name+".askpass")
		// Polls for the test's answer, as a person yet to type.
		script := fmt.Sprintf("#!/bin/sh\n: > '%s'\nwhile [ ! -e '%s' ]; do sleep 0.05; done\nprintf '%%s\\n' '%s'\n", asked, answer, suite.lab.Password)
		if err := os.WriteFile(askpass, []byte(script), 0o700); err != nil {
			t.Fatal(err)
		}
		say := func(what string, o sshOutcome) {
			stderr := pid.ReplaceAllString(strings.ReplaceAll(o.stderr, cp, "CP"), "pid=N")
			got[i] = append(got[i], fmt.Sprintf("%s: rc %d, stdout %q, stderr %q", what, o.rc, o.stdout, stderr))
		}
		// Each run is bounded: a wait behind the login shows as a kill.
		ssh := func(env []string, args ...string) sshOutcome {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			return runOwnSession(t, exec.CommandContext(ctx, side, args...), append(d.env(), env...))
		}
		held := make(chan sshOutcome, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, side, "-F", "none", "-o", "UserKnownHostsFile="+kh, "-o", "PubkeyAuthentication=no",
				"-o", "ControlMaster=auto", "-o", "ControlPersist=60", "-o", "ControlPath="+cp, "-p", suite.lab.Port,
				suite.lab.PWUser+"@127.0.0.1", "whoami")
			cmd.Env = append(cleanEnv(os.Environ()), append([]string{"HOME=" + suite.home, "PATH=" + suite.basePATH,
				"SSH_ASKPASS=" + askpass, "SSH_ASKPASS_REQUIRE=force"}, d.env()...)...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			o := sshOutcome{rc: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
			if _, ok := err.(*exec.ExitError); err != nil && !ok {
				o.stderr += err.Error()
			}
			held <- o
		}()
		waitFor(t, 30*time.Second, name+": the password prompt", func() bool {
			_, err := os.Stat(asked)
			return err == nil
		})
		say("-O check at the prompt", ssh(nil, "-F", "none", "-o", "ControlPath="+cp, "-O", "check", "lab"))
		say("a key login at the prompt", ssh(nil, append(labMuxArgs(kh, cp, "60", suite.lab.Key), suite.lab.PWUser+"@127.0.0.1", "echo", "second")...))
		say("-O check after it", ssh(nil, "-F", "none", "-o", "ControlPath="+cp, "-O", "check", "lab"))
		if err := os.WriteFile(answer, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		say("the password login", <-held)
		if i == 1 {
			// Its connection was its own, and ended with it.
			deadline := time.Now().Add(10 * time.Second)
			for st := d.mustStatus(t); len(st.Targets) != 1 || st.Targets[0].Connections != 1; st = d.mustStatus(t) {
				if time.Now().After(deadline) {
					t.Errorf("the daemon keeps the connection of the login that found the socket taken: %+v", st.Targets)
					break
				}
				time.Sleep(20 * time.Millisecond) // polling a condition, not timing
			}
		}
		say("-O exit", ssh(nil, "-F", "none", "-o", "ControlPath="+cp, "-O", "exit", "lab"))
	}
	w, g := strings.Join(got[0], "\n"), strings.Join(got[1], "\n")
	t.Logf("with OpenSSH:\n%s", w)
	if w != g {
		t.Errorf("through the shims:\n%s\nwith OpenSSH:\n%s", g, w)
	}
}
