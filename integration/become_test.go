package integration

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The become corpus beyond become.yml (registered here, run by TestCorpus).
func init() {
	corpusCases = append(corpusCases, corpusCase{name: "become-more", check: checkBecomeMore})
}

func checkBecomeMore(t *testing.T, r *runResult) {
	wantExit(t, r, 0)
	wantTask(t, r, "t", "sudo -i", "ok", "HOME=/root\n/root")
	wantTask(t, r, "t", "become_exe path", "ok", "root")
	wantTask(t, r, "t", "unparsed become plugin", "ok", "root")
	wantTask(t, r, "t", "unparsed become plugin, piped module", "ok", "")
	wantTask(t, r, "t", "sudo again", "ok", "root")
}

// TestNoPasswordLeaks runs the playbooks that type passwords (ssh
// password logins, sudo and su with right and wrong passwords) through a
// daemon of its own with the debug file system mounted, then looks for
// the passwords in the daemon's log, the shims' log and every file of the
// mount (journal and status included).
func TestNoPasswordLeaks(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	requireFUSE(t)
	d := startDebugDaemon(t, t.TempDir())
	for _, pb := range []string{"become.yml", "password.yml"} {
		for _, pipelining := range []bool{false, true} {
			r := runPlaybook(t, runSpec{
				Playbook: pb, Mode: mode{Pipelining: pipelining, Transfer: "sftp"}, Side: bridge,
				HostVars: nil, Env: d.env(),
			})
			if r.ExitCode != 0 && r.ExitCode != 2 && r.ExitCode != 4 {
				t.Fatalf("%s: exit %d\n%s", pb, r.ExitCode, r.Stderr)
			}
		}
	}
	secrets := [][]byte{[]byte(suite.lab.Password), []byte("wrong-password")}
	check := func(name string, data []byte) {
		for _, s := range secrets {
			if bytes.Contains(data, s) {
				t.Errorf("%s holds the password %q", name, s)
			}
		}
	}
	logs := []string{d.log, filepath.Join(filepath.Dir(d.socket), "shim.log")}
	for _, p := range logs {
		if b, err := os.ReadFile(p); err == nil {
			check(p, b)
		}
	}
	files := 0
	err := filepath.WalkDir(d.mount, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		check(p, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d files under the mount: the journal did not record the runs", files)
	}
}
