package integration

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// noPTYLogin returns a login sshd refuses a terminal: the lab's
// AB_NOPTYUSER (PermitTTY no) with the lab key, or, in a lab set up
// before that user, abtest with a key of the test's own, authorized with
// no-pty until the test ends.
func noPTYLogin(t *testing.T) (login, key string) {
	t.Helper()
	if u := os.Getenv("AB_NOPTYUSER"); u != "" {
		return u, suite.lab.Key
	}
	u, err := user.Lookup(suite.lab.User)
	if err != nil {
		t.Skipf("no AB_NOPTYUSER, and no %s to authorize a no-pty key for: %v", suite.lab.User, err)
	}
	key = filepath.Join(t.TempDir(), "id_nopty")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ab-nopty-test", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	line := "no-pty " + strings.TrimSpace(string(pub))
	ak := filepath.Join(u.HomeDir, ".ssh", "authorized_keys")
	f, err := os.OpenFile(ak, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Skipf("no AB_NOPTYUSER, and %s cannot take a no-pty key: %v", ak, err)
	}
	_, err = f.WriteString(line + "\n")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b, err := os.ReadFile(ak)
		if err != nil {
			t.Errorf("removing the no-pty key: %v", err)
			return
		}
		var kept []string
		for _, l := range strings.SplitAfter(string(b), "\n") {
			if strings.TrimSuffix(l, "\n") != line {
				kept = append(kept, l)
			}
		}
		if err := os.WriteFile(ak, []byte(strings.Join(kept, "")), 0o600); err != nil {
			t.Errorf("removing the no-pty key: %v", err)
		}
	})
	return suite.lab.User, key
}

// TestNoPTYLikeOpenSSH: sshd refuses the login a terminal. ssh -tt over a
// master run without one goes on without a terminal (the master says
// "PTY allocation request failed" on the client's stderr); over a master
// run with -tt, the session closes unread (exit 255); a master running
// its own session dies of it. Through the shims the same, a real ssh as
// mux client of the daemon's master too (-c falls back to it), and
// Ansible's modules without pipelining (ssh -tt) find no terminal, in
// the login user's interpreter or a become user's.
func TestNoPTYLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	login, key := noPTYLogin(t)
	dir := t.TempDir()
	kh := labKnownHosts(t)
	d := newPrivateDaemon(t)
	dest := login + "@127.0.0.1"
	var got [2][]string
	for i, side := range []string{suite.realSSH, filepath.Join(suite.shims, "ssh")} {
		ssh := func(cp, persist string, args ...string) sshOutcome {
			return runOwnSession(t, exec.Command(side, append(labMuxArgs(kh, cp, persist, key), args...)...), d.env())
		}
		say := func(what string, o sshOutcome) {
			got[i] = append(got[i], fmt.Sprintf("%s: rc %d, stdout %q, stderr %q", what, o.rc, o.stdout, o.stderr))
		}
		// Where the session ends unread, sshd stops reading the
		// command's stdout as it gets EOF: after cat, a write to stdout
		// is a death by SIGPIPE, and stderr is still read.
		for _, master := range [][]string{{dest, "true"}, {"-tt", dest, "cat; echo ran"}} {
			cp := filepath.Join(dir, fmt.Sprintf("%d-%d", i, len(master)))
			say("master "+strings.Join(master, " "), ssh(cp, "60", master...))
			say("  -tt", ssh(cp, "60", "-tt", dest, "cat >/dev/null; tty; echo err >&2; exit 3"))
			say("  -tt, a real ssh as mux client", ssh(cp, "60", "-tt", "-c", "aes128-ctr", dest, "cat >/dev/null; tty; exit 3"))
			say("  no -t", ssh(cp, "60", dest, "tty"))
			runOwnSession(t, exec.Command(side, "-F", "none", "-o", "ControlPath="+cp, "-O", "exit", "lab"), d.env())
		}
		say("-tt master without ControlPersist", ssh(filepath.Join(dir, "own"), "no", "-tt", dest, "echo ran"))
	}
	if w, g := strings.Join(got[0], "\n"), strings.Join(got[1], "\n"); w != g {
		t.Errorf("through the shims:\n%s\nwith OpenSSH:\n%s", g, w)
	}
	if !strings.Contains(got[0][1], "not a tty") {
		t.Errorf("sshd gave %s a terminal: %s", login, got[0][1])
	}

	spec := runSpec{Playbook: "nopty.yml", Mode: mode{Pipelining: false, Transfer: "sftp"}, Env: d.env(), Timeout: time.Minute,
		HostVars: map[string]map[string]any{"t": labHost(t, login, key)}}
	spec.Side = stock
	want := runPlaybook(t, spec)
	spec.Side = bridgeSide()
	compareRuns(t, runPlaybook(t, spec), want)
	if tty := want.Doc.Events[0].Result; tty["rc"] != float64(1) {
		t.Errorf("stock's module found a terminal: %v", tty)
	}
}
