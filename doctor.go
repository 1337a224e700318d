package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

// supportedAnsible is the ansible-core range the bridge recognises.
var supportedAnsible = [2][2]int{{2, 14}, {2, 22}}

// check is one doctor check: ok, or a problem and its fix.
type check struct {
	name, detail, fix string
	ok                bool
}

// doctorEnv is what the checks look at, injected for tests.
type doctorEnv struct {
	path   string // PATH
	socket string
	uid    int
	// ansibleVersion runs `ansible-playbook --version`.
	ansibleVersion func() (string, error)
	// ansibleConfig returns the ssh_executable, sftp_executable and
	// scp_executable of the effective ansible.cfg ("" when unset).
	ansibleConfig func() map[string]string
	fuseDev       string // /dev/fuse
	// ansibleDump runs `ansible-config dump -t connection`; nil skips
	// checkAnsibleExecutables.
	ansibleDump func() (string, error)
}

func cmdDoctor(args []string) int {
	if len(args) > 0 {
		fmt.Println("usage: ansible-bridge doctor\n\nchecks the setup: shims, socket directory, daemon, the real ssh, FUSE, ansible-core; exits 1 on any problem")
		if args[0] == "-h" || args[0] == "--help" {
			return 0
		}
		return 2
	}
	env := doctorEnv{
		path:   os.Getenv("PATH"),
		socket: wire.SocketPath(),
		uid:    os.Getuid(),
		ansibleVersion: func() (string, error) {
			out, err := exec.Command("ansible-playbook", "--version").Output()
			return string(out), err
		},
		ansibleConfig: ansibleExecutables,
		fuseDev:       "/dev/fuse",
		ansibleDump:   ansibleConfigDump,
	}
	failed := 0
	for _, c := range runDoctor(env) {
		mark := "ok  "
		if !c.ok {
			mark = "FAIL"
			failed++
		}
		fmt.Printf("%s %s: %s\n", mark, c.name, c.detail)
		if !c.ok && c.fix != "" {
			fmt.Printf("     fix: %s\n", c.fix)
		}
	}
	if failed > 0 {
		fmt.Printf("%d problem(s)\n", failed)
		return 1
	}
	return 0
}

func runDoctor(env doctorEnv) []check {
	var out []check
	out = append(out, checkShims(env)...)
	out = append(out, checkSocketUsable(env), checkSocketDir(env), checkDaemon(env), checkFallbacks(env))
	for _, prog := range []string{"ssh", "scp", "sftp"} {
		out = append(out, checkReal(env, prog))
	}
	out = append(out, checkFUSE(env), checkAnsible(env))
	if env.ansibleDump != nil {
		out = append(out, checkAnsibleExecutables(env))
	}
	return out
}

func checkShims(env doctorEnv) []check {
	var out []check
	var cfg map[string]string
	for _, prog := range []string{"ssh", "scp", "sftp"} {
		c := check{name: prog + " shim"}
		p := fakessh.LookPathIn(prog, env.path)
		switch {
		case p != "" && fakessh.IsBridgeBinary(p):
			c.ok, c.detail = true, p+" on PATH is the bridge's"
		default:
			if cfg == nil {
				cfg = env.ansibleConfig()
			}
			if exe := cfg[prog+"_executable"]; exe != "" && fakessh.IsBridgeBinary(exe) {
				c.ok, c.detail = true, fmt.Sprintf("ansible.cfg %s_executable = %s is the bridge's", prog, exe)
				break
			}
			c.detail = fmt.Sprintf("Ansible runs %q, not the bridge", p)
			c.fix = `make install, then eval "$(ansible-bridge env)" (or set ` + prog + `_executable in ansible.cfg to the shim)`
		}
		out = append(out, c)
	}
	return out
}

func checkSocketDir(env doctorEnv) check {
	dir := filepath.Dir(env.socket)
	c := check{name: "socket directory"}
	err := wire.CheckPrivateDir(dir, env.uid)
	switch {
	case err == nil:
		c.ok, c.detail = true, dir+" is ours and private"
	case errors.Is(err, os.ErrNotExist):
		c.ok, c.detail = true, dir+" does not exist yet (the first shim makes it, 0700)"
	default:
		c.detail = err.Error() + ": every shim runs the real ssh"
		c.fix = "remove it (if another user made it, ask root) or set ANSIBLE_BRIDGE_SOCKET to a path in a directory of your own with mode 0700"
	}
	return c
}

func checkDaemon(env doctorEnv) check {
	c := check{name: "daemon"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := wire.Dial(ctx, env.socket)
	switch {
	case err == nil:
		conn.Close()
		c.ok, c.detail = true, "answers at "+env.socket
	case errors.Is(err, wire.ErrUntrusted):
		c.detail = err.Error()
		c.fix = "see the socket directory check"
	default:
		// Not an error: the first shim starts it.
		c.ok, c.detail = true, "not running (the first shim starts it)"
	}
	return c
}

// fallbackLine is a shim log line: "TIME fallback prog=… real=… reason="…" …".
var fallbackLine = regexp.MustCompile(`fallback prog=(\S+) real=\S+ reason=("(?:[^"\\]|\\.)*")`)

// checkFallbacks summarises the shim log: each reason the shims ran the
// real binary, with its count. It fails only for what the bridge could
// have served: where OpenSSH's contract sends an invocation to the real
// binary (no ControlPath, -V, -Q, -G, Ansible's ControlPersist probe), it
// is expected.
func checkFallbacks(env doctorEnv) check {
	c := check{name: "fallbacks", ok: true}
	var expected, failed []string
	for _, f := range fallbackSummary(env.socket, time.Time{}) {
		if f.expected {
			expected = append(expected, f.line)
		} else {
			failed = append(failed, f.line)
		}
	}
	switch {
	case len(failed) > 0:
		c.ok = false
		c.detail = "the shims ran the real binary: " + strings.Join(failed, "; ")
		c.fix = "these invocations ran at stock speed; see README, Fallback (" + wire.SideFile(env.socket, "shim.log") + ")"
	case len(expected) > 0:
		c.detail = "only as OpenSSH's contract asks: " + strings.Join(expected, "; ")
	default:
		c.detail = "none recorded"
	}
	return c
}

// fallbackCount is one line of fallbackSummary: "3× ssh: unsupported: -L".
type fallbackCount struct {
	line     string
	expected bool // OpenSSH's contract, not something the bridge lacks
	daemon   bool // the daemon's decision, which status counts itself
}

// fallbackSummary reads the shim log of socket: each reason the shims ran
// the real binary (its first line: a usage error is several), with its
// count, sorted; since: only the entries from then on (zero: all). Fallbacks the user asked for (ANSIBLE_BRIDGE_DISABLE)
// and Ansible's ControlPersist probe are left out.
func fallbackSummary(socket string, since time.Time) []fallbackCount {
	f, err := os.Open(wire.SideFile(socket, "shim.log"))
	if err != nil {
		return nil
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(io.LimitReader(f, 64<<20))
	for sc.Scan() {
		m := fallbackLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if !since.IsZero() {
			stamp, _, _ := strings.Cut(sc.Text(), " ")
			if at, err := time.Parse(time.RFC3339Nano, stamp); err != nil || at.Before(since) {
				continue
			}
		}
		reason, err := strconv.Unquote(m[2])
		if err != nil {
			reason = m[2]
		}
		if strings.Contains(reason, `keyword "controlpersist"`) || reason == fakessh.DisableEnv+"=1" {
			continue // Ansible's probe for ControlPersist support; asked for
		}
		reason, _, _ = strings.Cut(strings.TrimSpace(reason), "\n")
		counts[m[1]+": "+strings.TrimRight(reason, "\r")]++
	}
	var out []fallbackCount
	for r, n := range counts {
		_, reason, _ := strings.Cut(r, ": ")
		out = append(out, fallbackCount{fmt.Sprintf("%d× %s", n, r), expectedFallback(reason), strings.HasPrefix(reason, fakessh.DaemonReason)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].line < out[j].line })
	return out
}

// expectedFallback reports whether a fallback reason is one OpenSSH's
// contract asks for: the connection-sharing rules' (the real ssh
// connects on its own, or multiplexes over its own master), and options
// that print and exit (-V, -Q, -G), and interactive sessions, which only
// the real binary answers.
func expectedFallback(reason string) bool {
	reason = strings.TrimPrefix(reason, fakessh.DaemonReason)
	switch reason {
	case "unsupported: -V", "unsupported: -Q", "unsupported: -G", fakessh.ReasonInteractive, fakessh.ReasonVerbose, fakessh.ReasonBatchOpen:
		return true
	}
	return bridge.SharingFallback(reason)
}

func checkReal(env doctorEnv, prog string) check {
	c := check{name: "real " + prog}
	if p := os.Getenv("ANSIBLE_BRIDGE_REAL_" + strings.ToUpper(prog)); p != "" {
		c.ok, c.detail = true, p+" (ANSIBLE_BRIDGE_REAL_"+strings.ToUpper(prog)+")"
		return c
	}
	// What a shim Ansible runs by name would fall back to.
	if p, err := fakessh.FindRealIn(prog, prog, env.path); err == nil {
		c.ok, c.detail = true, p
		return c
	}
	c.detail = "no " + prog + " on PATH besides the shim: fallbacks fail"
	c.fix = "install OpenSSH's client (apt-get install openssh-client)"
	return c
}

func checkFUSE(env doctorEnv) check {
	c := check{name: "FUSE (debug mount)"}
	_, devErr := os.Stat(env.fuseDev)
	fm := fakessh.LookPathIn("fusermount3", env.path)
	switch {
	case devErr != nil:
		c.detail = env.fuseDev + " missing: ansible-bridge mount will not work (everything else does)"
		c.fix = "load the fuse module, or run where /dev/fuse exists"
	case fm == "":
		c.detail = "fusermount3 not on PATH: ansible-bridge mount will not work (everything else does)"
		c.fix = "apt-get install fuse3"
	default:
		c.ok, c.detail = true, env.fuseDev+" and "+fm
	}
	return c
}

var ansibleCoreRE = regexp.MustCompile(`\[core (\d+)\.(\d+)[^\]]*\]`)
var pythonRE = regexp.MustCompile(`(?m)^\s*python version = (\S+)`)

func checkAnsible(env doctorEnv) check {
	c := check{name: "ansible-core"}
	out, err := env.ansibleVersion()
	if err != nil {
		c.detail = "ansible-playbook not found or failed: " + err.Error()
		c.fix = "install ansible-core (apt-get install ansible-core, or pip)"
		return c
	}
	m := ansibleCoreRE.FindStringSubmatch(out)
	if m == nil {
		c.detail = "cannot tell the version of: " + strings.SplitN(out, "\n", 2)[0]
		c.fix = "check that ansible-playbook on PATH is ansible-core's (ansible-playbook --version says [core X.Y.Z])"
		return c
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	py := "?"
	if p := pythonRE.FindStringSubmatch(out); p != nil {
		py = p[1]
	}
	ver := [2]int{major, minor}
	lo, hi := supportedAnsible[0], supportedAnsible[1]
	inRange := !(ver[0] < lo[0] || ver[0] == lo[0] && ver[1] < lo[1] || ver[0] > hi[0] || ver[0] == hi[0] && ver[1] > hi[1])
	c.detail = fmt.Sprintf("%s (python %s)", strings.Trim(m[0], "[]"), py)
	if inRange {
		c.ok = true
		c.detail += ": recognised"
		return c
	}
	c.detail += fmt.Sprintf(": not one the bridge recognises (%d.%d to %d.%d); it still works, with modules through the slow path", lo[0], lo[1], hi[0], hi[1])
	c.fix = "use ansible-core 2.14 to 2.22, or check `ansible-bridge status` for slow paths"
	return c
}

// ansibleExecutables reads ssh_executable, sftp_executable and
// scp_executable from the effective Ansible configuration.
func ansibleExecutables() map[string]string {
	out := map[string]string{}
	for _, k := range []string{"ssh_executable", "sftp_executable", "scp_executable"} {
		if v := os.Getenv("ANSIBLE_" + strings.ToUpper(k)); v != "" {
			out[k] = v
		}
	}
	for _, prog := range []string{"ssh", "sftp", "scp"} {
		if _, ok := out[prog+"_executable"]; ok {
			continue
		}
		if v := iniValue(ansibleCfgPath(), "ssh_connection", prog+"_executable"); v != "" {
			out[prog+"_executable"] = v
		}
	}
	return out
}

// ansibleCfgPath is the ansible.cfg Ansible would read: ANSIBLE_CONFIG,
// ./ansible.cfg, ~/.ansible.cfg, /etc/ansible/ansible.cfg.
func ansibleCfgPath() string {
	home, _ := os.UserHomeDir()
	for _, p := range []string{os.Getenv("ANSIBLE_CONFIG"), "ansible.cfg", filepath.Join(home, ".ansible.cfg"), "/etc/ansible/ansible.cfg"} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

// iniValue is key's value in section of an ini file, or "".
func iniValue(path, section, key string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			in = strings.TrimSpace(strings.Trim(line, "[]")) == section
			continue
		}
		if k, v, ok := strings.Cut(line, "="); in && ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
