package integration

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// TestHomeMoved: a user's home moved mid-play is where stock's next
// `~user` goes; the bridge answered `echo ~user` from what it had cached
// for the connection and wrote into the old home.
func TestHomeMoved(t *testing.T) {
	requireLab(t)
	if os.Getuid() != 0 {
		t.Skip("needs root: makes a user")
	}
	user := fmt.Sprintf("abhm%d", os.Getpid()%100000)
	oldHome, newHome := "/tmp/"+user+"-old", "/tmp/"+user+"-new"
	reset := func(t *testing.T) {
		_ = exec.Command("userdel", user).Run()
		for _, d := range []string{oldHome, newHome} {
			os.RemoveAll(d)
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := exec.Command("useradd", "-M", "-d", oldHome, "-s", "/bin/sh", user).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v: %s", err, out)
		}
	}
	t.Cleanup(func() {
		_ = exec.Command("userdel", user).Run()
		os.RemoveAll(oldHome)
		os.RemoveAll(newHome)
	})
	tc := corpusCase{name: "home-moved", check: func(t *testing.T, r *runResult) {
		wantExit(t, r, 0)
		if b, err := os.ReadFile(newHome + "/f"); err != nil || string(b) != "two\n" {
			t.Errorf("%s run: %s/f %q (%v), want the second copy there", r.Spec.Side, newHome, b, err)
		}
	}, setup: func(t *testing.T) map[string]map[string]any {
		reset(t)
		return map[string]map[string]any{"t": {"moving_user": user, "new_home": newHome}}
	}}
	runCompared(t, tc, runSpec{Playbook: "home-moved.yml", Mode: mode{true, "sftp"}}, nil)
}

// TestUsermodThroughAlias: usermod of a become user run through another
// inventory alias of the machine (delegate_to, a connection of its own)
// succeeds as stock's does; the bridge's interpreter for the user on the
// first connection made it fail ("user ... is currently used by process").
func TestUsermodThroughAlias(t *testing.T) {
	requireLab(t)
	if os.Getuid() != 0 {
		t.Skip("needs root: makes a user")
	}
	user := fmt.Sprintf("abua%d", os.Getpid()%100000)
	oldHome, newHome := "/tmp/"+user+"-old", "/tmp/"+user+"-new"
	t.Cleanup(func() {
		_ = exec.Command("userdel", user).Run()
		os.RemoveAll(oldHome)
		os.RemoveAll(newHome)
	})
	tc := corpusCase{name: "usermod-alias", check: func(t *testing.T, r *runResult) {
		wantExit(t, r, 0)
		wantTask(t, r, "t", "usermod through the alias", "ok", "")
		wantTask(t, r, "t", "as the user again", "ok", user)
	}, setup: func(t *testing.T) map[string]map[string]any {
		_ = exec.Command("userdel", user).Run()
		for _, d := range []string{oldHome, newHome} {
			os.RemoveAll(d)
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := exec.Command("useradd", "-M", "-d", oldHome, "-s", "/bin/sh", user).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v: %s", err, out)
		}
		alias := labHost(t, suite.lab.User, suite.lab.Key)
		alias["ansible_control_path"] = "%(directory)s/alias"
		return map[string]map[string]any{"t": {"moving_user": user, "new_home": newHome}, "alias": alias}
	}}
	runCompared(t, tc, runSpec{Playbook: "usermod-alias.yml", Mode: mode{true, "sftp"}}, nil)
}
