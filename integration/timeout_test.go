package integration

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTaskTimeout: a task that hits its `timeout:` fails at the timeout
// and the play goes on, as with stock. Ansible (2.14) neither kills its
// ssh nor waits for it: the module runs on, with or without a PTY, while
// the next step removes its temp dir. The timed-out task reads a FIFO
// that only the next task writes, so a bridge whose rm waited for the
// abandoned module held the play for ever (it waited for the module's end,
// not for its files); and a module killed at the timeout would leave the
// next task's writer without a reader. Nothing is left: not the module,
// nor a temp dir. (With `shell:` stock leaves the timed-out task's temp
// dir: its rm is not sent.)
func TestTaskTimeout(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	d := newPrivateDaemon(t)
	u, err := user.Lookup(suite.lab.User)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, pipelining := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipelining=%t", pipelining), func(t *testing.T) {
			t.Parallel()
			recaps := map[side]string{}
			for _, sd := range []side{stock, bridgeSide()} {
				// Short: a ControlPath must fit a socket address.
				dir, err := os.MkdirTemp("", "abto-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				if err := os.Chown(dir, uid, gid); err != nil {
					t.Fatal(err)
				}
				fifo := filepath.Join(dir, "fifo")
				reader := []string{"dd", "if=" + fifo, "of=" + filepath.Join(dir, "after"), "status=none"}
				t.Cleanup(func() { killProcs(reader...) })
				rt := filepath.Join(dir, "rt")
				// The ping's upload teaches the daemon that uploads come
				// through the shims: the next temp dir is held in memory
				// and written by the module run.
				play := fmt.Sprintf(`- hosts: t
  gather_facts: false
  tasks:
    - ping:
    - command: mkfifo %[1]s
    - name: reads the FIFO past its timeout
      command: dd if=%[1]s of=%[2]s/after status=none
      timeout: 2
      ignore_errors: true
    - shell: echo go > %[1]s
    - wait_for: {path: "%[2]s/after", search_regex: go, timeout: 30}
`, fifo, dir)
				// killablePlaybook runs dir/play.yml: this play, written over its own.
				cmd := killablePlaybook(t, sd, d, dir, "", "", pipelining, "")
				if err := os.WriteFile(filepath.Join(dir, "play.yml"), []byte(play), 0o644); err != nil {
					t.Fatal(err)
				}
				var stdout strings.Builder
				cmd.Stdout, cmd.Stderr = &stdout, &stdout
				cmd.Env = append(cmd.Env, "ANSIBLE_REMOTE_TMP="+rt)
				// A bound, not a wait: the old bridge never ended the play.
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				start := time.Now()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err = <-done:
				case <-ctx.Done():
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					<-done
					t.Fatalf("%s: the play was held past the task's timeout (%s)", sd, time.Since(start).Round(time.Second))
				}
				out := stdout.String()
				if err != nil {
					t.Fatalf("%s: %v\n%s", sd, err, out)
				}
				if !strings.Contains(out, "The command action failed to execute in the expected time frame (2) and was terminated") {
					t.Errorf("%s: no timeout message:\n%s", sd, out)
				}
				recaps[sd] = regexp.MustCompile(`(?m)^t +:.*$`).FindString(out)
				// The module ended once it read the FIFO; the last rm
				// may still be on its way (an agent runs it unanswered).
				if stillRunning(10*time.Second, reader...) {
					t.Errorf("%s: the timed-out module is still running", sd)
				}
				deadline := time.Now().Add(10 * time.Second)
				for {
					ents, err := os.ReadDir(rt)
					if err != nil || len(ents) == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("%s: left in the remote tmp: %v", sd, ents)
						break
					}
					time.Sleep(20 * time.Millisecond) // polling a condition
				}
			}
			if recaps[stock] != recaps[bridgeSide()] || !strings.Contains(recaps[stock], "ignored=1") {
				t.Errorf("recaps differ or lack the ignored task:\nstock:  %s\nbridge: %s", recaps[stock], recaps[bridgeSide()])
			}
		})
	}
}
