package integration

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// chattyBashrc prints before its interactive check, as many a
// hand-edited ~/.bashrc does: every command's output starts with the
// line, and the sftp subsystem (run through the login shell) is broken.
// scripts/lab.sh gives the lab's nosftp user this file.
const chattyBashrc = "echo \"Welcome to $(hostname)\"\ncase $- in *i*) ;; *) return ;; esac\n"

// noSFTPUser returns a lab user whose sftp subsystem is broken: the lab's
// (AB_NOSFTPUSER), or, in a lab made before it had one, the bash zoo user
// with the chatty ~/.bashrc until t ends.
func noSFTPUser(t *testing.T) string {
	t.Helper()
	if name := os.Getenv("AB_NOSFTPUSER"); name != "" {
		if _, err := user.Lookup(name); err == nil {
			return name
		}
	}
	return lendBashrc(t, chattyBashrc)
}

// lendBashrc gives the bash zoo user the ~/.bashrc content until t ends,
// and returns its name.
func lendBashrc(t *testing.T, content string) string {
	t.Helper()
	name := zooUsers(t, "AB_ZOO")["bash"]
	if name == "" {
		t.Skip("the lab has no bash zoo user (AB_ZOO) to lend its ~/.bashrc")
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(u.HomeDir, ".bashrc")
	orig, rerr := os.ReadFile(path)
	t.Cleanup(func() {
		if rerr != nil {
			_ = os.Remove(path)
			return
		}
		_ = os.WriteFile(path, orig, 0o644)
	})
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestNoSFTPLikeOpenSSH: a target whose sftp subsystem is broken by its
// login shell's output. Ansible's piped transfer (dd of=PATH bs=65536)
// works over ssh, as stock's exec does; scp and sftp fail with OpenSSH's
// own lines ("Received message too long N", "Ensure the remote shell
// produces no output for non-interactive sessions."); and a copy task
// with pipelining, transfer method smart, changes the file as stock's.
func TestNoSFTPLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	name := noSFTPUser(t)
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src.txt")
	if err := os.WriteFile(src, []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kh := labKnownHosts(t)
	d := newPrivateDaemon(t)
	dd := regexp.MustCompile(`(?m)^[0-9]+ bytes copied, .*$`)
	var got [2][]string
	for i, bin := range []string{filepath.Dir(suite.realSSH), suite.shims} {
		side := []string{"real", "shim"}[i]
		cp := filepath.Join(dir, side)
		dst := "ab-nosftp-" + side + ".txt"
		t.Cleanup(func() { _ = os.Remove(filepath.Join(u.HomeDir, dst)) })
		opts := labMuxOpts(kh, cp, "60", suite.lab.Key)
		say := func(what string, o sshOutcome) {
			// scp names itself as called: by its path here.
			stderr := dd.ReplaceAllString(strings.ReplaceAll(o.stderr, bin+"/", "BIN/"), "N bytes copied")
			got[i] = append(got[i], fmt.Sprintf("%s: rc %d, stdout %q, stderr %q", what, o.rc, o.stdout, stderr))
		}
		ssh := exec.Command(filepath.Join(bin, "ssh"), append(opts, "-p", suite.lab.Port, name+"@127.0.0.1", "dd of="+dst+" bs=65536")...)
		ssh.Stdin = strings.NewReader("piped\n")
		say("dd", runOwnSession(t, ssh, d.env()))
		if b, err := os.ReadFile(filepath.Join(u.HomeDir, dst)); err != nil || string(b) != "piped\n" {
			t.Errorf("%s: dd wrote %q (%v)", side, b, err)
		}
		say("scp", runOwnSession(t, exec.Command(filepath.Join(bin, "scp"), append(opts, "-P", suite.lab.Port, src, name+"@127.0.0.1:"+dst+".scp")...), d.env()))
		sftp := exec.Command(filepath.Join(bin, "sftp"), append(opts, "-P", suite.lab.Port, "-b", "-", name+"@127.0.0.1")...)
		sftp.Stdin = strings.NewReader("put " + src + " " + dst + ".sftp\n")
		say("sftp", runOwnSession(t, sftp, d.env()))
		runOwnSession(t, exec.Command(filepath.Join(bin, "ssh"), "-F", "none", "-o", "ControlPath="+cp, "-O", "exit", "lab"), d.env())
	}
	if w, g := strings.Join(got[0], "\n"), strings.Join(got[1], "\n"); w != g {
		t.Errorf("through the shims:\n%s\nwith OpenSSH:\n%s", g, w)
	}

	copied := filepath.Join(u.HomeDir, "ab-nosftp-copy.txt")
	t.Cleanup(func() { _ = os.Remove(copied) })
	setup := func(*testing.T) map[string]map[string]any {
		_ = os.Remove(copied) // each run's copy changes it
		return map[string]map[string]any{"nosftp": labHost(t, name, suite.lab.Key)}
	}
	tc := corpusCase{name: "nosftp", check: checkNoSFTP, setup: setup}
	runCompared(t, tc, runSpec{Playbook: "nosftp.yml", Mode: mode{true, "smart"}}, nil)
}

func checkNoSFTP(t *testing.T, r *runResult) {
	wantExit(t, r, 0)
	if res := wantTask(t, r, "nosftp", "copy", "ok", ""); res["changed"] != true {
		t.Errorf("%s run: copy did not change the file: %s", r.Spec.Side, short(res))
	}
	wantTask(t, r, "nosftp", "read back", "ok", "hello")
}

// sftpPolicyBashrc makes the sftp subsystem of its user read-only with a
// umask of its own, as `Subsystem sftp internal-sftp -R -u 0077` would
// (sshd runs the subsystem through the login shell, which reads it), and
// gives the login shell's commands umask 027.
const sftpPolicyBashrc = "case \"$BASH_EXECUTION_STRING\" in /usr/lib/openssh/sftp-server) exec /usr/lib/openssh/sftp-server -R -u 0077 ;; esac\n" +
	"umask 027\ncase $- in *i*) ;; *) return ;; esac\n"

// TestSFTPPolicyLikeOpenSSH: a target whose sftp subsystem is read-only
// with a umask of its own. Ansible's piped transfer (dd of=PATH
// bs=65536) is a shell command's dd, which the subsystem's policy does
// not touch: it writes the file with the login umask's mode, as stock's;
// sftp fails as stock's; and a copy task without pipelining, transfer
// method smart, changes the file as stock's does (through dd).
func TestSFTPPolicyLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	name := lendBashrc(t, sftpPolicyBashrc)
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src.txt")
	if err := os.WriteFile(src, []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kh := labKnownHosts(t)
	d := newPrivateDaemon(t)
	dd := regexp.MustCompile(`(?m)^[0-9]+ bytes copied, .*$`)
	var got [2][]string
	for i, bin := range []string{filepath.Dir(suite.realSSH), suite.shims} {
		side := []string{"real", "shim"}[i]
		cp := filepath.Join(dir, side)
		dst := "ab-sftppolicy-" + side + ".txt"
		t.Cleanup(func() {
			_ = os.Remove(filepath.Join(u.HomeDir, dst))
			_ = os.Remove(filepath.Join(u.HomeDir, dst+".sftp"))
		})
		opts := labMuxOpts(kh, cp, "60", suite.lab.Key)
		say := func(what string, o sshOutcome) {
			// Each side writes its own file: name them alike.
			stdout := strings.ReplaceAll(o.stdout, dst, "DST")
			stderr := strings.ReplaceAll(dd.ReplaceAllString(o.stderr, "N bytes copied"), dst, "DST")
			got[i] = append(got[i], fmt.Sprintf("%s: rc %d, stdout %q, stderr %q", what, o.rc, stdout, stderr))
		}
		ssh := exec.Command(filepath.Join(bin, "ssh"), append(opts, "-p", suite.lab.Port, name+"@127.0.0.1", "dd of="+dst+" bs=65536")...)
		ssh.Stdin = strings.NewReader("piped\n")
		say("dd", runOwnSession(t, ssh, d.env()))
		fi, err := os.Stat(filepath.Join(u.HomeDir, dst))
		if b, rerr := os.ReadFile(filepath.Join(u.HomeDir, dst)); err != nil || rerr != nil || string(b) != "piped\n" || fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: dd wrote %q (%v), mode %v, want 0640", side, b, rerr, fi)
		}
		sftp := exec.Command(filepath.Join(bin, "sftp"), append(opts, "-P", suite.lab.Port, "-b", "-", name+"@127.0.0.1")...)
		sftp.Stdin = strings.NewReader("put " + src + " " + dst + ".sftp\n")
		say("sftp", runOwnSession(t, sftp, d.env()))
		runOwnSession(t, exec.Command(filepath.Join(bin, "ssh"), "-F", "none", "-o", "ControlPath="+cp, "-O", "exit", "lab"), d.env())
	}
	if w, g := strings.Join(got[0], "\n"), strings.Join(got[1], "\n"); w != g {
		t.Errorf("through the shims:\n%s\nwith OpenSSH:\n%s", g, w)
	}

	copied := filepath.Join(u.HomeDir, "ab-nosftp-copy.txt")
	t.Cleanup(func() { _ = os.Remove(copied) })
	setup := func(*testing.T) map[string]map[string]any {
		_ = os.Remove(copied) // each run's copy changes it
		return map[string]map[string]any{"nosftp": labHost(t, name, suite.lab.Key)}
	}
	tc := corpusCase{name: "sftppolicy", check: checkNoSFTP, setup: setup}
	runCompared(t, tc, runSpec{Playbook: "nosftp.yml", Mode: mode{false, "smart"}}, nil)
}
