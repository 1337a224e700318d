package integration

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// movingUser is a user of the test's own whose home is old, and may be
// moved to new: reset makes it afresh (each side of a comparison starts
// from it); it is removed when t ends.
type movingUser struct{ name, old, new string }

func newMovingUser(t *testing.T, prefix string) *movingUser {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: makes a user")
	}
	name := fmt.Sprintf("%s%d", prefix, os.Getpid()%100000)
	u := &movingUser{name, "/tmp/" + name + "-old", "/tmp/" + name + "-new"}
	t.Cleanup(func() {
		_ = exec.Command("userdel", u.name).Run()
		os.RemoveAll(u.old)
		os.RemoveAll(u.new)
	})
	return u
}

func (u *movingUser) reset(t *testing.T) {
	_ = exec.Command("userdel", u.name).Run()
	for _, d := range []string{u.old, u.new} {
		os.RemoveAll(d)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("useradd", "-M", "-d", u.old, "-s", "/bin/sh", u.name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v: %s", err, out)
	}
}

// TestHomeMoved: a user's home moved mid-play is where stock's next
// `~user` goes; the bridge answered `echo ~user` from what it had cached
// for the connection and wrote into the old home.
func TestHomeMoved(t *testing.T) {
	requireLab(t)
	u := newMovingUser(t, "abhm")
	tc := corpusCase{name: "home-moved", check: func(t *testing.T, r *runResult) {
		wantExit(t, r, 0)
		if b, err := os.ReadFile(u.new + "/f"); err != nil || string(b) != "two\n" {
			t.Errorf("%s run: %s/f %q (%v), want the second copy there", r.Spec.Side, u.new, b, err)
		}
	}, setup: func(t *testing.T) map[string]map[string]any {
		u.reset(t)
		return map[string]map[string]any{"t": {"moving_user": u.name, "new_home": u.new}}
	}}
	runCompared(t, tc, runSpec{Playbook: "home-moved.yml", Mode: mode{true, "sftp"}}, nil)
}

// TestUsermodThroughAlias: usermod of a become user run through another
// inventory alias of the machine (delegate_to, a connection of its own)
// succeeds as stock's does; the bridge's interpreter for the user on the
// first connection made it fail ("user ... is currently used by process").
func TestUsermodThroughAlias(t *testing.T) {
	requireLab(t)
	u := newMovingUser(t, "abua")
	tc := corpusCase{name: "usermod-alias", check: func(t *testing.T, r *runResult) {
		wantExit(t, r, 0)
		wantTask(t, r, "t", "usermod through the alias", "ok", "")
		wantTask(t, r, "t", "as the user again", "ok", u.name)
	}, setup: func(t *testing.T) map[string]map[string]any {
		u.reset(t)
		alias := labHost(t, suite.lab.User, suite.lab.Key)
		alias["ansible_control_path"] = "%(directory)s/alias"
		return map[string]map[string]any{"t": {"moving_user": u.name, "new_home": u.new}, "alias": alias}
	}}
	runCompared(t, tc, runSpec{Playbook: "usermod-alias.yml", Mode: mode{true, "sftp"}}, nil)
}
