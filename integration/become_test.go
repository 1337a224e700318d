package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"github.com/ansible-bridge/ansible-bridge/integration/procstat"
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
	wantTask(t, r, "t", "sudo's environment", "ok", "SUDO_COMMAND=the task's wrapper\nSSH_TTY=unset")
	wantTask(t, r, "t", "TERM and SSH_TTY without a terminal", "ok", "TERM=unknown SSH_TTY=unset")
	wantKilled(t, r, "a become module killed by SIGKILL", 137, "Killed")
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
	check := passwordCheck(t)
	logs := []string{d.log, wire.SideFile(d.socket, "shim.log")}
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
		if errors.Is(err, fs.ErrNotExist) {
			return nil // an entry dropped, or renamed as its route became known, since listed
		}
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

// setupBecome removes the file nobody makes, so that each run starts
// without it.
func setupBecome(t *testing.T) map[string]map[string]any {
	t.Helper()
	if err := os.Remove(nobodysFile); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return nil
}

// nobodysFile is what become.yml has nobody create.
const nobodysFile = "/tmp/ab-corpus-nobody-owned"

// nobodyUID is the uid of the user nobody on the target (this machine).
func nobodyUID(t *testing.T) uint32 {
	t.Helper()
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	return uint32(uid)
}

// TestWrongPasswordLeavesNothing: after a become step with a wrong
// password (become.yml has sudo's and su's), nothing is left waiting: no
// sudo or su at its prompt on the target, no invocation in flight in the
// daemon. Stock's ssh passes Ansible's giving up on as EOF and a hangup.
func TestWrongPasswordLeavesNothing(t *testing.T) {
	requireLab(t)
	for _, m := range []mode{{false, "sftp"}, {true, "sftp"}} {
		t.Run(m.String(), func(t *testing.T) {
			requireBridge(t)
			spec := runSpec{Playbook: "become.yml", Mode: m, Side: bridge, HostVars: setupBecome(t)}
			r := runPlaybook(t, spec)
			if e := r.event(t, "tpw", "sudo with a wrong password"); e.Status != "failed" {
				t.Fatalf("sudo with a wrong password: %s", e.Status)
			}
			// Ansible gave up on those steps well before the playbook
			// ended; allow the daemon a moment to see the end of the
			// last one.
			deadline := time.Now().Add(5 * time.Second)
			for {
				prompting := becomePrompts(t)
				inFlight := daemonInFlight(t)
				if len(prompting) == 0 && inFlight == 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the run: become tools at their prompt: %q; %d invocations in flight", prompting, inFlight)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// becomePrompts lists the become tools (sudo, su) on the target (this
// machine) that run an Ansible become command and have started nothing:
// those still at their password prompt. Interpreters started through a
// tool have it as their parent.
func becomePrompts(t *testing.T) []string {
	t.Helper()
	procs := procstat.All()
	parents := map[int]bool{}
	for _, p := range procs {
		parents[p.PPID] = true
	}
	var waiting []string
	for _, p := range procs {
		if (p.Comm != "sudo" && p.Comm != "su") || parents[p.PID] {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		if strings.Contains(string(cmdline), "BECOME-SUCCESS-") {
			waiting = append(waiting, fmt.Sprintf("%d %s", p.PID, strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
	}
	return waiting
}

// daemonInFlight counts the shim invocations the daemon is serving.
func daemonInFlight(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(suite.bin, "status", "--json")
	cmd.Env = bridgeEnv(os.Environ())
	out, err := cmd.Output()
	if err != nil {
		return 0 // no daemon: nothing in flight
	}
	var st struct {
		InFlight []json.RawMessage `json:"in_flight"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v", err)
	}
	return len(st.InFlight)
}

// userdelCase deletes a user that a become step has just run as.
var userdelCase = corpusCase{name: "userdel", check: checkUserdel, setup: setupUserdel}

func checkUserdel(t *testing.T, r *runResult) {
	wantExit(t, r, 0)
	wantTask(t, r, "t", "a step as the user", "ok", "abdeltmp")
	wantTask(t, r, "t", "the user's groups in a step as the user", "ok", "abdeltmp abdelgrp")
	wantTask(t, r, "t", "change the user's home", "ok", "")
	wantTask(t, r, "t", "delete the group", "ok", "rc=0")
	if res := wantTask(t, r, "t", "delete the user", "ok", ""); res["changed"] != true {
		t.Errorf("%s run: the user was not deleted: %s", r.Spec.Side, short(res))
	}
	if res := wantTask(t, r, "t", "no process of the user is left", "ok", ""); res["stdout"] != "" {
		t.Errorf("%s run: processes of the deleted user: %q", r.Spec.Side, res["stdout"])
	}
}

// setupUserdel makes sure the user does not exist before a run.
func setupUserdel(t *testing.T) map[string]map[string]any {
	t.Helper()
	del := func() {
		if _, err := user.Lookup("abdeltmp"); err == nil {
			if out, err := exec.Command("userdel", "-r", "abdeltmp").CombinedOutput(); err != nil {
				t.Logf("userdel abdeltmp: %v: %s", err, out)
			}
		}
		for _, home := range []string{"/home/abdeltmp", "/tmp/abdeltmp-home"} {
			_ = os.RemoveAll(home) // a run cut short leaves them
		}
		if _, err := user.LookupGroup("abdelgrp"); err == nil {
			if out, err := exec.Command("groupdel", "abdelgrp").CombinedOutput(); err != nil {
				t.Logf("groupdel abdelgrp: %v: %s", err, out)
			}
		}
	}
	del()
	t.Cleanup(del)
	return nil
}

// TestUserdelAfterBecome: deleting a user just used with become succeeds
// through the bridge as with stock, and so does a stock run after it
// (nothing of the bridge's is left running as that user).
func TestUserdelAfterBecome(t *testing.T) {
	requireLab(t)
	modes := []mode{{true, "sftp"}}
	if hasSetfacl() {
		modes = append(modes, mode{false, "sftp"}) // stock needs it to hand temp files to the user
	}
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			spec := runSpec{Playbook: "userdel.yml", Mode: m}
			runCompared(t, userdelCase, spec, nil)
			spec.Side = stock
			after := runPlaybook(t, spec)
			checkUserdel(t, after)
		})
	}
}

// passwordCheck returns a check that data, named name, holds neither the
// lab's password nor the wrong one the corpus types.
func passwordCheck(t *testing.T) func(name string, data []byte) {
	secrets := [][]byte{[]byte(suite.lab.Password), []byte("wrong-password")}
	return func(name string, data []byte) {
		t.Helper()
		for _, s := range secrets {
			if bytes.Contains(data, s) {
				t.Errorf("%s holds the password %q", name, s)
			}
		}
	}
}

// becomePolicyCase changes sudoers between become steps.
var becomePolicyCase = corpusCase{name: "become-policy", check: checkBecomePolicy, setup: setupBecomePolicy}

func checkBecomePolicy(t *testing.T, r *runResult) {
	wantExit(t, r, 0)
	wantTask(t, r, "t", "a step as abpolicy", "ok", "abpolicy")
	for _, task := range []string{"refused as abpolicy", "refused as abpolicy after the edit in place"} {
		if res := wantTask(t, r, "t", task, "failed", ""); res["msg"] != "Missing sudo password" {
			t.Errorf("%s run: task %q: %s, want sudo's refusal", r.Spec.Side, task, short(res))
		}
	}
	wantTask(t, r, "t", "a step as root after the change", "ok", "root")
	wantTask(t, r, "t", "allowed as abpolicy again", "ok", "abpolicy")
	wantTask(t, r, "t", "as abpolicy before the edit in place", "ok", "abpolicy")
}

// setupBecomePolicy makes the user abpolicy, and removes it and the
// rules the playbook writes afterwards (a run cut short leaves them).
func setupBecomePolicy(t *testing.T) map[string]map[string]any {
	t.Helper()
	rules := []string{"/etc/sudoers.d/zz-abpolicy", "/etc/sudoers.d/zz-abpolicy-inplace"}
	clean := func() {
		for _, f := range rules {
			_ = os.Remove(f)
		}
		if _, err := user.Lookup("abpolicy"); err == nil {
			if out, err := exec.Command("userdel", "-r", "abpolicy").CombinedOutput(); err != nil {
				t.Logf("userdel abpolicy: %v: %s", err, out)
			}
		}
	}
	clean()
	t.Cleanup(clean)
	if out, err := exec.Command("useradd", "-m", "-s", "/bin/sh", "abpolicy").CombinedOutput(); err != nil {
		t.Fatalf("useradd abpolicy: %v: %s", err, out)
	}
	return nil
}

// TestBecomePolicyChange: a change of sudoers between become steps
// (written by a become step, by raw, and in place) gives the next step
// sudo's new answer, as stock's sudo on every step does.
func TestBecomePolicyChange(t *testing.T) {
	requireLab(t)
	modes := []mode{{true, "sftp"}}
	if hasSetfacl() {
		modes = append(modes, mode{false, "sftp"}) // stock needs it to hand temp files to abpolicy
	}
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			runCompared(t, becomePolicyCase, runSpec{Playbook: "become-policy.yml", Mode: m}, nil)
		})
	}
}

// becomeFlagsCase gives sudo become_flags it refuses after a plain
// become step.
var becomeFlagsCase = corpusCase{name: "become-flags", check: checkBecomeFlags}

func checkBecomeFlags(t *testing.T, r *runResult) {
	wantExit(t, r, 0)
	wantTask(t, r, "t", "a plain become step first", "ok", "root")
	for _, task := range []string{"a second -u", "-i with -E"} {
		res := wantTask(t, r, "t", task, "failed", "")
		if msg, _ := res["msg"].(string); !strings.HasPrefix(msg, "MODULE FAILURE") || !strings.Contains(fmt.Sprint(res["module_stderr"], res["module_stdout"]), "usage: sudo") {
			t.Errorf("%s run: task %q: %s, want sudo's usage", r.Spec.Side, task, short(res))
		}
	}
	wantTask(t, r, "t", "a group", "ok", "abpw")
	wantTask(t, r, "t", "plain become again", "ok", "root")
}

// TestBecomeFlags: a become step whose become_flags sudo refuses (a
// second -u, -i with -E) fails as stock's, after a plain become step
// whose root interpreter is running, and is counted as a slow path.
func TestBecomeFlags(t *testing.T) {
	requireLab(t)
	for _, m := range matrixModes {
		t.Run(m.String(), func(t *testing.T) {
			var slowBefore, slowAfter map[string]int
			got, _ := runCompared(t, becomeFlagsCase, runSpec{Playbook: "become-flags.yml", Mode: m}, func(run func() *runResult) *runResult {
				_, slowBefore = routesNow(t)
				defer func() { _, slowAfter = routesNow(t) }()
				return run()
			})
			if got.Spec.Side != bridge {
				return
			}
			d := routeDelta(slowBefore, slowAfter)
			for _, reason := range []string{"sudo: option -u given twice", "sudo: -i and -E together"} {
				n := 0
				for k, v := range d {
					if strings.Contains(k, reason) {
						n += v
					}
				}
				if n == 0 {
					t.Errorf("no slow path counted for %q: %v", reason, d)
				}
			}
		})
	}
}
