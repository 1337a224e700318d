package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// The no_log markers of corpus/secrets.yml, as the tasks produce them.
var noLogMarkers = []string{"nolog-marker-S3CRET-B", "nolog-copy-C0PY-marker", "nolog-become-B3C0ME-marker",
	"nolog-env-EENV-marker", "nolog-raw-RAAW-marker", "nolog-param-PAARAM-marker", "nolog-benv-BEENV-marker",
	"nolog-async-AASYNC-marker", "nolog-aenv-AAENV-marker", strconv.Itoa(noLogPin), strconv.Itoa(noLogPin + 1)}

// noLogPin, plus the run's index, is the number corpus/secrets.yml gives
// a module's own no_log parameter (uri's url_password) in each run: a
// JSON number in its arguments. One per run (the string parameter ends
// with it too), as a secret registered in one run masks it in the next
// while the connections live.
const noLogPin = 6170094823

// firstEnvMarker is the environment value of a module's first task (not
// no_log): the zygote that task starts must not keep it.
const firstEnvMarker = "first-env-F1RST-marker"

// TestNoSecretsLeft runs no_log tasks (a command, one with an
// environment, a copy, raw, a become step with a sudo password) and a
// module's own no_log parameter (a string, a number) through the
// bridge, pipelined and not, with the piped transfer method (the copy's
// content is a `dd of=` upload): unpipelined on the default
// ansible-core, pipelined on 2.22. No marker is in the journal (mount
// and explode), status or the logs; the ordinary task's args are. Once
// the connections close, neither markers nor the password are in the
// daemon's memory.
func TestNoSecretsLeft(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	requireFUSE(t)
	// The lab passes the password in the environment, which the shims
	// send along (as any variable of the controller's): here it must
	// come only from the inventory, typed at sudo's prompt.
	t.Setenv("AB_PASSWORD", "")
	dir := t.TempDir()
	d := startDebugDaemon(t, dir)
	// Unpipelined (wrappers uploaded, then run as files) on the default
	// ansible-core, pipelined on the newest wrapper format where it is
	// installed: two runs keep the test near 30 s.
	pipelined := runSpec{Mode: mode{Pipelining: true, Transfer: "piped"}}
	if bin, err := ansibleBinDir("2.22"); err == nil {
		pipelined.AnsibleBin = bin
	} else {
		t.Logf("ansible-core 2.22 not installed (%v): pipelined on the default one", err)
	}
	runs := []runSpec{{Mode: mode{Pipelining: false, Transfer: "piped"}}, pipelined}
	// One ControlPath directory for every run: the reset below closes the
	// connections of them all, as each run's own would at its end.
	env := append(d.env(), "ANSIBLE_SSH_CONTROL_PATH_DIR="+t.TempDir())
	for i, spec := range runs {
		m := spec.Mode
		spec.Playbook, spec.Side, spec.Env = "secrets.yml", bridge, env
		spec.HostVars = map[string]map[string]any{"t": {"nolog_pin": noLogPin + i}}
		r := runPlaybook(t, spec)
		wantExit(t, r, 0)
		wantTask(t, r, "t", "ordinary", "ok", "ordinary-probe-5d1e")
		if strings.Contains(r.Stdout, "nolog-") || strings.Contains(r.Stdout, strconv.Itoa(noLogPin+i)) {
			t.Fatalf("%s: ansible itself shows a marker:\n%s", m, r.Stdout)
		}
	}

	// The journal: the ordinary task's args, the no_log ones named as such.
	var ordinary, noLog int
	entries, _ := filepath.Glob(filepath.Join(d.mount, "journal", "0*"))
	for _, e := range entries {
		files, _ := os.ReadDir(e)
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(e, f.Name()))
			if err != nil {
				t.Fatalf("%s/%s: %v", e, f.Name(), err)
			}
			noMarker(t, filepath.Join(e, f.Name()), b)
			switch {
			case f.Name() == "module_args.json" && bytes.Contains(b, []byte("echo ordinary-probe-5d1e")):
				ordinary++
			case f.Name() == "no_log":
				noLog++
				// An exec the bridge cannot tell from a no_log task's (raw)
				// is concealed, whatever it ran.
				m, _ := os.ReadFile(filepath.Join(e, "module"))
				if route, _ := os.ReadFile(filepath.Join(e, "route")); len(bytes.TrimSpace(m)) == 0 && string(bytes.TrimSpace(route)) != "exec" {
					t.Errorf("%s: no_log entry without its module name", e)
				}
			}
		}
	}
	// Per run: the command, the copy's modules, the become step (and
	// the wrappers' uploads, unpipelined).
	if ordinary < 2 || noLog < 6 {
		t.Errorf("journal: %d entries with the ordinary args (want 2 or more), %d no_log entries (want 6 or more) among %d", ordinary, noLog, len(entries))
	}
	status, err := os.ReadFile(filepath.Join(d.mount, "status"))
	if err != nil {
		t.Fatal(err)
	}
	noMarker(t, "status", status)
	for _, log := range logFiles(t, d) {
		b, _ := os.ReadFile(log)
		noMarker(t, log, b)
	}

	// On the target, the agents and zygotes (still running: the
	// connections persist) hold no task's arguments or output.
	agents := targetAgents(t)
	if len(agents) < 2 {
		t.Fatalf("found %d agent processes on the target, want an agent and a zygote at least", len(agents))
	}
	for _, pid := range agents {
		for _, m := range append([]string{suite.lab.Password, firstEnvMarker}, noLogMarkers...) {
			if n := countInMemory(t, pid, []byte(m)); n != 0 {
				st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
				t.Errorf("target agent process %d (%s): %d copies of %q in its memory after the tasks", pid, procSummary(st), n, m)
			}
		}
	}

	// While the connections stay open (ControlPersist), the become
	// password typed at sudo's prompt leaves the daemon's memory too,
	// once what the steps that typed it dropped is collected.
	for try := 0; ; try++ {
		n := countInMemory(t, d.cmd.Process.Pid, []byte(suite.lab.Password))
		if n == 0 {
			break
		}
		if try == 5 {
			t.Errorf("the become password: %d copies in the daemon's memory %d s after its tasks, its connections open", n, try)
			break
		}
		time.Sleep(time.Second) // polling a condition
	}

	// The connections close (reset_connection): their entries go, and
	// nothing is left in memory.
	r := runPlaybook(t, runSpec{Playbook: "secrets-reset.yml", Mode: mode{Pipelining: true, Transfer: "piped"}, Side: bridge, Env: env})
	wantExit(t, r, 0)
	waitNoConnections(t, d)
	if left, _ := filepath.Glob(filepath.Join(d.mount, "journal", "0*-module")); len(left) != 0 {
		t.Errorf("journal entries left after the connections closed: %v", left)
	}
	if n := countInMemory(t, d.cmd.Process.Pid, []byte(suite.lab.Password)); n != 0 {
		t.Errorf("the become password: %d copies in the daemon's memory after its connections closed", n)
	}
	// The daemon runs with GODEBUG=clobberfree=1: what x/crypto/ssh
	// drops unwiped (its cipher's reused buffer, the packets it hands on)
	// is overwritten once freed, so no copy is left.
	for _, m := range noLogMarkers {
		if n := countInMemory(t, d.cmd.Process.Pid, []byte(m)); n != 0 {
			t.Errorf("%s: %d copies in the daemon's memory after its connections closed", m, n)
		}
	}
}

// targetAgents are the target's python processes that run the bridge's
// agent code (agents, zygotes, spares): started by the bootstrap's
// first stage, which names itself in their command line.
func targetAgents(t *testing.T) []int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, p := range procs {
		cmd, err1 := os.ReadFile(filepath.Join(p, "cmdline"))
		exe, err2 := os.Readlink(filepath.Join(p, "exe"))
		if err1 != nil || err2 != nil || !strings.HasPrefix(filepath.Base(exe), "python") ||
			!bytes.Contains(cmd, []byte("exec(base64.b64decode(")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(p))
		pids = append(pids, pid)
	}
	t.Logf("agent processes on the target: %v", pids)
	return pids
}

// procSummary is the PPid and Uid lines of a /proc/PID/status.
func procSummary(status []byte) string {
	var out []string
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "PPid:") || strings.HasPrefix(l, "Uid:") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, ", ")
}

func noMarker(t *testing.T, where string, b []byte) {
	t.Helper()
	for _, m := range append([]string{suite.lab.Password}, noLogMarkers...) {
		if bytes.Contains(b, []byte(m)) {
			t.Errorf("%s holds %q", where, m)
		}
	}
}

// logFiles are the daemon's log and what the shims logged beside its
// socket.
func logFiles(t *testing.T, d *debugDaemon) []string {
	t.Helper()
	side, _ := filepath.Glob(filepath.Join(filepath.Dir(d.socket), "*.log"))
	return append(side, d.log)
}

// waitNoConnections waits until the daemon's status shows no connection
// open and its journal expiry has run (a tick after).
func waitNoConnections(t *testing.T, d *debugDaemon) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var closedAt time.Time
	for {
		raw, err := os.ReadFile(filepath.Join(d.mount, "status"))
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Targets []struct {
				Connections int `json:"connections"`
			} `json:"targets"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatalf("status: %v", err)
		}
		open := 0
		for _, tg := range st.Targets {
			open += tg.Connections
		}
		left, _ := filepath.Glob(filepath.Join(d.mount, "journal", "0*-module"))
		switch {
		case open > 0:
			closedAt = time.Time{}
		case closedAt.IsZero():
			closedAt = time.Now()
		case len(left) == 0 && time.Since(closedAt) > 3500*time.Millisecond:
			// The daemon frees memory at its next one-second tick and two
			// after it.
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections open: %d, module entries left: %d", open, len(left))
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
}

// countInMemory counts the copies of s in the readable memory of
// process pid (a child of the test: ptrace rules allow reading it).
func countInMemory(t *testing.T, pid int, s []byte) int {
	t.Helper()
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if errors.Is(err, fs.ErrNotExist) {
		// Exited since it was listed (a spare dropped, a seed once its
		// last task ended): it holds nothing now.
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Skipf("cannot read the daemon's memory: %v", err)
	}
	defer mem.Close()
	n := 0
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' || (len(f) >= 6 && strings.HasPrefix(f[5], "[v")) {
			continue
		}
		from, to, _ := strings.Cut(f[0], "-")
		lo, err1 := strconv.ParseUint(from, 16, 64)
		hi, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		buf := make([]byte, hi-lo)
		k, err := mem.ReadAt(buf, int64(lo))
		if err != nil && err != io.EOF && k == 0 {
			continue // a guard page, or gone meanwhile
		}
		for b, off := buf[:k], 0; ; {
			i := bytes.Index(b[off:], s)
			if i < 0 {
				break
			}
			at := off + i
			if n++; n <= 4 {
				// Where it sits tells which copy it is.
				t.Logf("copy %d at %#x (%s): %q", n, lo+uint64(at), f[len(f)-1], b[max(0, at-64):min(len(b), at+len(s)+64)])
			}
			off = at + 1
		}
	}
	return n
}

// TestPassphraseKeyLeavesDaemon: once logged in with a passphrase-
// protected key, the daemon holds neither the decrypted key nor the
// passphrase, while the connection stays open (ControlPersist), as
// OpenSSH's master holds neither.
func TestPassphraseKeyLeavesDaemon(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	if _, err := exec.LookPath("sshpass"); err != nil {
		t.Skip("sshpass not installed")
	}
	// The lab key, encrypted: the lab user accepts it as it is.
	const passphrase = "pp-Le4vES-daemon"
	plain, err := os.ReadFile(suite.lab.Key)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ssh.ParseRawPrivateKey(plain)
	if err != nil {
		t.Fatal(err)
	}
	k, ok := raw.(*ed25519.PrivateKey)
	if !ok {
		t.Skipf("lab key is a %T, not ed25519", raw)
	}
	seed := k.Seed()
	key := filepath.Join(t.TempDir(), "pp_key")
	if err := os.WriteFile(key, plain, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-q", "-p", "-P", "", "-N", passphrase, "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -p: %v\n%s", err, out)
	}

	d := newPrivateDaemon(t)
	cp := filepath.Join(t.TempDir(), "cp")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sshpass", "-P", "passphrase", "-p", passphrase, filepath.Join(suite.shims, "ssh"),
		"-F", "/dev/null", "-o", "IdentitiesOnly=yes", "-o", "ControlMaster=auto", "-o", "ControlPersist=60", "-o", "ControlPath="+cp,
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-i", key, "-p", suite.lab.Port, suite.lab.User+"@127.0.0.1", "echo logged-in")
	if o := runOwnSession(t, cmd, d.env()); o.rc != 0 || o.stdout != "logged-in\n" {
		t.Fatalf("ssh: %+v", o)
	}
	st, ok := d.status(t)
	if !ok || st.PID == 0 {
		t.Fatal("no daemon")
	}
	if _, err := os.Stat(cp); err != nil {
		t.Fatalf("the master's ControlPath: %v", err)
	}
	// The daemon collects what it dropped just after the login.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ns, np := countInMemory(t, st.PID, seed), countInMemory(t, st.PID, []byte(passphrase))
		if ns == 0 && np == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with the connection open: %d copies of the decrypted key's seed, %d of its passphrase in the daemon's memory", ns, np)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
	if _, ok := d.status(t); !ok {
		t.Fatal("daemon gone")
	}
	if _, err := os.Stat(cp); err != nil {
		t.Fatalf("the connection closed: %v", err)
	}
}
