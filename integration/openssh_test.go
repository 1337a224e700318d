package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	}
	sides := []struct{ name, ssh string }{{"openssh", suite.realSSH}, {"shim", filepath.Join(suite.shims, "ssh")}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newPrivateDaemon(t)
			var runs [2][]sshOutcome
			for i, side := range sides {
				dir, err := os.MkdirTemp(suite.work, "cp-")
				if err != nil {
					t.Fatal(err)
				}
				for _, st := range tc.steps {
					runs[i] = append(runs[i], passwordSSH(t, side.ssh, d, st, dir))
				}
				// Masters the real ssh left: stopped, as the daemon is.
				for _, st := range tc.steps {
					if st.cp != "" {
						passwordSSH(t, side.ssh, d, credStep{good, st.cp, []string{"-O", "exit"}}, dir)
					}
				}
			}
			for k := range tc.steps {
				if want, got := runs[0][k], runs[1][k]; got != want {
					t.Errorf("step %d through the shim: %+v\nwith OpenSSH: %+v", k+1, got, want)
				}
			}
		})
	}
}

type sshOutcome struct {
	rc             int
	stdout, stderr string
}

// passwordSSH runs `sshpass -p PASSWORD ssh OPTS abpw@127.0.0.1 whoami`
// with public keys off, in a session of its own.
func passwordSSH(t *testing.T, ssh string, d *privateDaemon, st credStep, cpDir string) sshOutcome {
	t.Helper()
	args := append([]string{"-p", st.password, ssh}, st.opts...)
	if st.cp != "" {
		args = append(args, "-o", "ControlPath="+filepath.Join(cpDir, st.cp))
	}
	args = append(args, "-F", "/dev/null", "-o", "PubkeyAuthentication=no", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-p", suite.lab.Port, suite.lab.PWUser+"@127.0.0.1", "whoami")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := runOwnSession(t, exec.CommandContext(ctx, "sshpass", args...), d.env())
	o.stderr = strings.ReplaceAll(o.stderr, cpDir, "CPDIR")
	return o
}
