// Command soak runs a long loop through ansible-bridge against the loopback
// lab and watches the daemon for leaks (`make soak`).
//
//	scripts/lab.sh up; eval "$(scripts/lab.sh env)"
//	go run ./scripts/soak -items 10000 -every 1000
//
// It builds the binary and its shims into a temporary directory, starts a
// private daemon (its own socket), and runs one playbook: -items/-every
// chunks, each a `command` loop of -every items (pipelining) followed by a
// checkpoint task on the controller that waits for soak. At each
// checkpoint, with nothing in flight, soak prints the daemon's RSS, open
// fds and threads and the number of processes under the lab's sshd (the
// target's side: the session, the interpreter, its zygote and spare fork),
// then lets the run go on. It fails if the daemon changes (a crash), if RSS
// at the end exceeds RSS at the first checkpoint by more than -rss-growth
// percent, if threads grew by more than threadSlack, or if fds or target
// processes differ between those two points. One run, not one per chunk:
// each ansible-playbook builds its module zips anew, and the interpreter
// keeps a zygote per zip (up to 8).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/integration/procstat"
	"github.com/ansible-bridge/ansible-bridge/internal/cbuild"
)

// threadSlack is how many more threads the daemon may have at the end:
// Go's runtime starts an OS thread when every other one is blocked in a
// system call and never ends it, so the count is the most threads ever
// blocked at once, which can rise by one or two late in a long run (8 to 9
// was seen at 10,000 items). A leak grows with the items instead: one
// thread per 1,000 items would be 9 more.
const threadSlack = 2

type sample struct {
	items int
	procstat.Sample
	targetProcs, daemonPID int
	wall                   time.Duration
}

func main() {
	items := flag.Int("items", envInt("SOAK_ITEMS", 10000), "loop `items` in all")
	every := flag.Int("every", envInt("SOAK_EVERY", 1000), "items per playbook run, and between reports")
	growth := flag.Float64("rss-growth", 10, "largest RSS growth allowed after the first report, in `percent`")
	keep := flag.Bool("keep", false, "keep the work directory")
	flag.Parse()
	if *every <= 0 || *items < 2**every {
		fatal(fmt.Errorf("want -items at least twice -every (got %d and %d)", *items, *every))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *items, *every, *growth, *keep); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "soak:", err)
	os.Exit(1)
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func run(ctx context.Context, items, every int, growth float64, keep bool) error {
	labDir, port, key, user := os.Getenv("AB_LAB"), os.Getenv("AB_PORT"), os.Getenv("AB_KEY"), os.Getenv("AB_USER")
	if labDir == "" {
		return errors.New(`AB_LAB is not set: scripts/lab.sh up; eval "$(scripts/lab.sh env)"`)
	}
	if port == "" {
		port = "2222"
	}
	if key == "" {
		key = filepath.Join(labDir, "id_ed25519")
	}
	if user == "" {
		user = "abtest"
	}
	sshdPID, err := readPID(filepath.Join(labDir, "sshd.pid"))
	if err != nil {
		return fmt.Errorf("lab sshd: %w (is the lab up?)", err)
	}
	dir, err := os.MkdirTemp("", "ab-soak-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(os.Stderr, "soak: work directory", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin := filepath.Join(dir, "ansible-bridge")
	shims := filepath.Join(dir, "shims")
	socket := filepath.Join(dir, "sock", "bridge.sock")
	if err := os.Mkdir(filepath.Dir(socket), 0o700); err != nil {
		return err
	}
	for out, pkg := range map[string]string{bin: ".", filepath.Join(dir, "ansible-bridge-shim"): "./fakessh/cmd/ansible-bridge-shim"} {
		build := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", out, pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
		}
	}
	if err := cbuild.Build(ctx, ".", cbuild.Front, filepath.Join(dir, fakessh.FrontBinary)); err != nil {
		return err
	}
	bridgeEnv := []string{"ANSIBLE_BRIDGE_SOCKET=" + socket, "ANSIBLE_BRIDGE_LOG=" + filepath.Join(dir, "daemon.log")}
	ctl := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), bridgeEnv...)
		return cmd.Output()
	}
	if out, err := ctl("shims", shims); err != nil {
		return fmt.Errorf("ansible-bridge shims: %w\n%s", err, out)
	}
	defer ctl("stop") //nolint:errcheck // best effort at exit

	inv := fmt.Sprintf("target ansible_host=127.0.0.1 ansible_port=%s ansible_user=%s ansible_ssh_private_key_file=%s "+
		"ansible_python_interpreter=/usr/bin/python3 ansible_ssh_common_args='-o UserKnownHostsFile=/dev/null'\n", port, user, key)
	hook := filepath.Join(dir, "hook")
	if err := os.Mkdir(hook, 0o755); err != nil {
		return err
	}
	book := fmt.Sprintf(`- hosts: target
  gather_facts: false
  tasks:
    - include_tasks: chunk.yml
      loop: "{{ range(%d) | list }}"
      loop_control:
        loop_var: chunk
`, items/every)
	chunk := fmt.Sprintf(`- command: echo {{ chunk }} {{ item }}
  loop: "{{ range(%d) | list }}"
- name: checkpoint
  shell: touch %[2]s/at-{{ chunk }}; while [ ! -e %[2]s/go-{{ chunk }} ]; do sleep 0.05; done
  delegate_to: localhost
`, every, hook)
	for name, body := range map[string]string{"inventory": inv, "soak.yml": book, "chunk.yml": chunk, "ansible.cfg": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	env := []string{"PATH=" + shims + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"LANG=C.UTF-8", "ANSIBLE_CONFIG=" + filepath.Join(dir, "ansible.cfg"), "ANSIBLE_PIPELINING=True",
		"ANSIBLE_HOST_KEY_CHECKING=False", "ANSIBLE_RETRY_FILES_ENABLED=False", "ANSIBLE_NOCOLOR=1",
		"ANSIBLE_SSH_CONTROL_PATH_DIR=" + filepath.Join(dir, "cp")}
	env = append(env, bridgeEnv...)

	cmd := exec.CommandContext(ctx, "ansible-playbook", "-i", filepath.Join(dir, "inventory"), filepath.Join(dir, "soak.yml"))
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var first, last sample
	start := time.Now()
	for i := 0; i < items/every; i++ {
		at := filepath.Join(hook, fmt.Sprintf("at-%d", i))
		for {
			if _, err := os.Stat(at); err == nil {
				break
			}
			select {
			case err := <-exited:
				return fmt.Errorf("ansible-playbook ended before item %d (%v):\n%s", (i+1)*every, err, tail(out.Bytes()))
			case <-time.After(50 * time.Millisecond): // polling for the checkpoint file
			}
		}
		st, err := ctl("status", "--json")
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		var status struct {
			PID int `json:"pid"`
		}
		if err := json.Unmarshal(st, &status); err != nil {
			return fmt.Errorf("status: %w", err)
		}
		s, err := measure(status.PID)
		if err != nil {
			return err
		}
		procs := procstat.Descendants(sshdPID)
		s.items, s.wall, s.targetProcs = (i+1)*every, time.Since(start), len(procs)
		fmt.Printf("items %6d: daemon RSS %6.1f MiB, %3d fds, %3d threads; %3d target processes; these %d items in %.1fs\n",
			s.items, float64(s.RSSKiB)/1024, s.FDs, s.Threads, s.targetProcs, every, s.wall.Seconds())
		if os.Getenv("SOAK_VERBOSE") != "" {
			for _, p := range procs {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
				fmt.Printf("    %d %.100s\n", p, bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '}))
			}
		}
		if first.items == 0 {
			first = s
		} else if s.daemonPID != first.daemonPID {
			return fmt.Errorf("the daemon changed from pid %d to %d: it crashed or exited", first.daemonPID, s.daemonPID)
		}
		last = s
		start = time.Now()
		if err := os.WriteFile(filepath.Join(hook, fmt.Sprintf("go-%d", i)), nil, 0o644); err != nil {
			return err
		}
	}
	if err := <-exited; err != nil {
		return fmt.Errorf("ansible-playbook: %w\n%s", err, tail(out.Bytes()))
	}
	if !bytes.Contains(out.Bytes(), []byte("failed=0")) || !bytes.Contains(out.Bytes(), []byte("unreachable=0")) {
		return fmt.Errorf("ansible-playbook:\n%s", tail(out.Bytes()))
	}
	var fails []string
	if limit := float64(first.RSSKiB) * (1 + growth/100); float64(last.RSSKiB) > limit {
		fails = append(fails, fmt.Sprintf("RSS grew from %.1f to %.1f MiB (more than %g %%)", float64(first.RSSKiB)/1024, float64(last.RSSKiB)/1024, growth))
	}
	if last.FDs != first.FDs {
		fails = append(fails, fmt.Sprintf("fds went from %d to %d", first.FDs, last.FDs))
	}
	if last.Threads > first.Threads+threadSlack {
		fails = append(fails, fmt.Sprintf("threads went from %d to %d (more than %d more)", first.Threads, last.Threads, threadSlack))
	}
	if last.targetProcs != first.targetProcs {
		fails = append(fails, fmt.Sprintf("target processes went from %d to %d", first.targetProcs, last.targetProcs))
	}
	if len(fails) > 0 {
		return fmt.Errorf("between items %d and %d: %s", first.items, last.items, strings.Join(fails, "; "))
	}
	fmt.Printf("soak: ok: between items %d and %d RSS %+.1f %%, threads %+d, fds and target processes unchanged\n",
		first.items, last.items, 100*(float64(last.RSSKiB)/float64(first.RSSKiB)-1), last.Threads-first.Threads)
	return nil
}

func tail(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// measure reads the daemon's resident memory, threads and open fds.
func measure(pid int) (sample, error) {
	p, err := procstat.Read(pid)
	if err != nil {
		return sample{}, fmt.Errorf("daemon: %w", err)
	}
	return sample{Sample: p, daemonPID: pid}, nil
}
