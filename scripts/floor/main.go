// Command floor stands in for ssh, sftp and scp and answers each call that
// stock Ansible (ansible-core 2.14) makes for a `command` task at once,
// with the canned result the real OpenSSH and target would give. Put on
// PATH in place of OpenSSH it measures Ansible's own overhead, the floor
// that no ssh replacement can beat. scripts/bench builds it and links ssh,
// sftp and scp to it (it dispatches on argv[0]): it builds the C port,
// c/floor.c, not this program.
//
// Why C: starting any Go binary costs about 5 ms of wall time per call on
// the bench machine (runtime init: cpuid in a VM, cgroup reads, threads),
// against about 0.1 ms for a static C binary (musl; 0.5 ms with glibc,
// whose start probes the CPU with cpuid), and Ansible starts ssh
// several times per task: the loop playbook ran in 0.80x the Go floor's
// wall time with a C floor. A Go floor would measure its own start, and
// the project is moving its ssh shim's hot path to C, so the floor must be
// C to stay a floor. This program is the reference the port follows: the
// package's tests compile c/floor.c with cc and require of it, over their
// cases, the calls Ansible makes (testdata/) and mutations of them, the
// same stdout, stderr and exit status as run gives, byte for byte.
//
// Answers (see /work/shared/reference/ansible-2.14-traces/ for the calls):
//
//   - ssh -o ControlPersist (Ansible's probe): what OpenSSH prints for an
//     option without a value, exit 255;
//   - ssh -O check|stop|exit: like a running ControlMaster;
//   - /bin/sh -c 'echo ~user && sleep 0': the home directory;
//   - /bin/sh -c '( umask 77 && mkdir … echo NAME="` echo DIR `" ) && sleep 0':
//     NAME=DIR;
//   - /bin/sh -c 'chmod …' and /bin/sh -c 'rm -f -r …': nothing, exit 0;
//   - /bin/sh -c 'PYTHON DIR/AnsiballZ_M.py && sleep 0', or pipelined
//     /bin/sh -c 'PYTHON && sleep 0' with the wrapper on stdin (read and
//     discarded): the module's JSON result, as the real command module
//     prints it for `hostname` (ping is known too);
//   - sftp -b - with put lines: echoes them as batch mode does, exit 0;
//   - scp SRC [host]:DST: exit 0.
//
// Later versions' shapes are answered too: ansible-core 2.22 writes each
// command without " && sleep 0" (and a bare /bin/sh -c PYTHON), 2.19+
// chmod u+rwx, and 2.19+'s pipelined wrapper names its module in its
// _ansiballz_main call, read by interp/ansiballz.
//
// With -tt the output gets a terminal's CRLF line endings and stderr gets
// "Shared connection to HOST closed.", as through a ControlMaster. Anything
// else is refused loudly (exit 127 for a remote command), never guessed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/become"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
)

// env is what the answers depend on besides argv and stdin.
type env struct {
	hostname  string           // the target's hostname, printed by `hostname`
	localUser string           // login user when argv names none
	pid       int              // the "master" pid for -O check
	now       func() time.Time // module start/end times
}

func main() {
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	user := os.Getenv("USER")
	if user == "" {
		user = "root"
	}
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr, env{
		hostname: host, localUser: user, pid: os.Getpid(), now: time.Now,
	}))
}

// run answers one invocation and returns its exit status.
func run(argv []string, stdin io.Reader, stdout, stderr io.Writer, e env) int {
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "floor: no argv[0]")
		return 2
	}
	switch filepath.Base(argv[0]) {
	case "ssh":
		return e.ssh(argv[1:], stdin, stdout, stderr)
	case "sftp":
		return e.sftp(argv[1:], stdin, stdout, stderr)
	case "scp":
		return e.scp(argv[1:], stderr)
	}
	fmt.Fprintf(stderr, "floor: run me as ssh, sftp or scp (a symlink), not %q\n", argv[0])
	return 2
}

// parsed is an OpenSSH command line.
type parsed struct {
	opts    map[byte][]string // option letter → values, in order
	flags   map[byte]int      // flag letter → count
	operand []string          // destination and the rest
}

// parseArgs splits argv like OpenSSH's getopt: withArg holds the letters
// that take a value.
func parseArgs(args []string, withArg string) (parsed, error) {
	p := parsed{opts: map[byte][]string{}, flags: map[byte]int{}}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			if !strings.ContainsRune(withArg, rune(c)) {
				p.flags[c]++
				continue
			}
			v := a[j+1:]
			if v == "" {
				if i+1 >= len(args) {
					return p, fmt.Errorf("option requires an argument -- %c", c)
				}
				i++
				v = args[i]
			}
			p.opts[c] = append(p.opts[c], v)
			break
		}
	}
	p.operand = args[i:]
	return p, nil
}

// checkOptions rejects an -o keyword without a value as OpenSSH does;
// Ansible relies on that for its ControlPersist probe.
func checkOptions(p parsed, stderr io.Writer) bool {
	for _, o := range p.opts['o'] {
		kw, val, _ := strings.Cut(strings.TrimSpace(o), "=")
		if i := strings.IndexAny(kw, " \t"); i >= 0 {
			kw, val = kw[:i], kw[i+1:]
		}
		if strings.TrimSpace(val) == "" {
			fmt.Fprintf(stderr, "command-line line 0: no argument after keyword %q\r\n", strings.ToLower(kw))
			return false
		}
	}
	return true
}

// optValue returns the value of -o Key=value (case-insensitive key), the
// last one given, unquoted.
func optValue(p parsed, key string) string {
	v := ""
	for _, o := range p.opts['o'] {
		k, val, ok := strings.Cut(o, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), key) {
			v = strings.Trim(strings.TrimSpace(val), `"`)
		}
	}
	return v
}

const sshWithArg = "bceilmopBDEFIJLOPQRSwW"

func (e env) ssh(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	p, err := parseArgs(args, sshWithArg)
	if err != nil {
		fmt.Fprintf(stderr, "ssh: %v\r\n", err)
		return fakessh.ExitSSHError
	}
	if !checkOptions(p, stderr) {
		return fakessh.ExitSSHError
	}
	if len(p.operand) == 0 {
		fmt.Fprint(stderr, "usage: ssh [-46AaCfGgKkMNnqsTtVvXxYy] destination [command [argument ...]]\n")
		return fakessh.ExitSSHError
	}
	dest := p.operand[0]
	user, host, ok := strings.Cut(dest, "@")
	if !ok {
		user, host = "", dest
	}
	if u := optValue(p, "User"); user == "" && u != "" {
		user = u
	}
	if l := p.opts['l']; user == "" && len(l) > 0 {
		user = l[len(l)-1]
	}
	if user == "" {
		user = e.localUser
	}
	if ctl := p.opts['O']; len(ctl) > 0 {
		switch ctl[len(ctl)-1] {
		case "check":
			fmt.Fprintf(stderr, "Master running (pid=%d)\r\n", e.pid)
		case "stop":
			fmt.Fprint(stderr, "Stop listening request sent.\r\n")
		case "exit":
			fmt.Fprint(stderr, "Exit request sent.\r\n")
		default:
			fmt.Fprintf(stderr, "floor: no canned answer for ssh -O %s\n", ctl[len(ctl)-1])
			return fakessh.ExitSSHError
		}
		return 0
	}
	tty := p.flags['t'] >= 2
	out := stdout
	if tty {
		out = crlfWriter{stdout}
	}
	rc := e.remote(strings.Join(p.operand[1:], " "), user, tty, stdin, out, stderr)
	if tty {
		fmt.Fprintf(stderr, "Shared connection to %s closed.\r\n", host)
	}
	return rc
}

var (
	// ansible-core up to 2.21 appends " && sleep 0"; 2.22 does not.
	homeRE   = regexp.MustCompile(`^echo ~([A-Za-z0-9_.][A-Za-z0-9_.-]*)?(?: && sleep 0)?$`)
	mkdirRE  = regexp.MustCompile("^\\( umask 77 && mkdir .* && echo ([^=\\s]+)=\"` echo (.+?) `\" \\)(?: && sleep 0)?$")
	pythonRE = regexp.MustCompile(`^(/\S*python[0-9.]*)(?: (\S+/AnsiballZ_(\w+)\.py))?(?: && sleep 0)?$`)
	// The pipelined AnsiballZ wrapper names its module in runpy.run_module.
	modNameRE = regexp.MustCompile(`mod_name='ansible\.modules\.(\w+)'`)
)

// remote answers a remote command line.
func (e env) remote(cmd, user string, tty bool, stdin io.Reader, stdout, stderr io.Writer) int {
	if strings.Contains(cmd, "BECOME-SUCCESS-") {
		return e.become(cmd, user, tty, stdin, stdout, stderr)
	}
	inner, ok := shInner(cmd)
	if !ok {
		fmt.Fprintf(stderr, "floor: no canned answer for remote command %q\n", cmd)
		return 127
	}
	return e.answer(inner, user, stdin, stdout, stderr)
}

// become answers a become wrapper as a tool that needs no password (or
// takes any) would: its prompt and a line read, if Ansible has a
// password; the success marker; then the inner command's answer.
func (e env) become(cmd, user string, tty bool, stdin io.Reader, stdout, stderr io.Writer) int {
	w, err := become.Parse(cmd)
	if err != nil {
		fmt.Fprintf(stderr, "floor: no canned answer for become command %q: %v\n", cmd, err)
		return 127
	}
	if w.Password == become.PasswordAnswered {
		prompt := stderr // sudo -S
		if tty {
			prompt = stdout
		}
		fmt.Fprint(prompt, w.Prompt)
		b := make([]byte, 1)
		for {
			if n, err := stdin.Read(b); err != nil || (n == 1 && b[0] == '\n') {
				break
			}
		}
	}
	fmt.Fprintln(stdout, w.Success)
	return e.answer(w.Inner, user, stdin, stdout, stderr)
}

// answer answers the command a remote /bin/sh -c runs.
func (e env) answer(inner, user string, stdin io.Reader, stdout, stderr io.Writer) int {
	if m := homeRE.FindStringSubmatch(inner); m != nil {
		u := m[1]
		if u == "" {
			u = user
		}
		fmt.Fprintln(stdout, homeOf(u))
		return 0
	}
	if m := mkdirRE.FindStringSubmatch(inner); m != nil {
		fmt.Fprintf(stdout, "%s=%s\n", m[1], m[2])
		return 0
	}
	if strings.HasPrefix(inner, "chmod u+x ") || strings.HasPrefix(inner, "chmod u+rwx ") || strings.HasPrefix(inner, "rm -f -r ") {
		return 0
	}
	if m := pythonRE.FindStringSubmatch(inner); m != nil {
		module := m[3]
		if m[2] == "" { // pipelined: the wrapper comes on stdin
			data, err := io.ReadAll(stdin)
			if err != nil {
				fmt.Fprintf(stderr, "floor: read stdin: %v\n", err)
				return 1
			}
			if w, err := ansiballz.Parse(data); err == nil {
				module = strings.TrimPrefix(w.ModuleFQN, "ansible.modules.")
			} else if mm := modNameRE.FindSubmatch(data); mm != nil {
				module = string(mm[1])
			}
		}
		return e.module(module, stdout)
	}
	fmt.Fprintf(stderr, "floor: no canned answer for remote command %q\n", inner)
	return 127
}

// module prints a module's result as AnsiballZ does: an empty line, then
// the JSON line.
func (e env) module(name string, stdout io.Writer) int {
	var result any
	rc := 0
	switch name {
	case "command":
		start := e.now()
		end := start.Add(2 * time.Millisecond)
		const layout = "2006-01-02 15:04:05.000000"
		result = commandResult{
			Changed: true, Stdout: e.hostname, Stderr: "", RC: 0, Cmd: []string{"hostname"},
			Start: start.Format(layout), End: end.Format(layout), Delta: "0:00:00.002000", Msg: "",
			Invocation: invocation{ModuleArgs: commandArgs{
				RawParams: "hostname", StdinAddNewline: true, StripEmptyEnds: true,
			}},
		}
	case "ping":
		var ping struct {
			Ping       string `json:"ping"`
			Invocation struct {
				ModuleArgs struct {
					Data string `json:"data"`
				} `json:"module_args"`
			} `json:"invocation"`
		}
		ping.Ping, ping.Invocation.ModuleArgs.Data = "pong", "pong"
		result = ping
	default:
		result = map[string]any{"failed": true, "msg": fmt.Sprintf("floor: no canned result for module %q", name)}
		rc = 1
	}
	js, err := json.Marshal(result)
	if err != nil {
		panic(err) // fixed types: cannot happen
	}
	// Python's json.dumps separators.
	fmt.Fprintf(stdout, "\n%s\n", pySeparators(js))
	return rc
}

// commandResult is ansible.modules.command's result, fields in its order.
type commandResult struct {
	Changed    bool       `json:"changed"`
	Stdout     string     `json:"stdout"`
	Stderr     string     `json:"stderr"`
	RC         int        `json:"rc"`
	Cmd        []string   `json:"cmd"`
	Start      string     `json:"start"`
	End        string     `json:"end"`
	Delta      string     `json:"delta"`
	Msg        string     `json:"msg"`
	Invocation invocation `json:"invocation"`
}

type invocation struct {
	ModuleArgs commandArgs `json:"module_args"`
}

type commandArgs struct {
	RawParams       string  `json:"_raw_params"`
	UsesShell       bool    `json:"_uses_shell"`
	StdinAddNewline bool    `json:"stdin_add_newline"`
	StripEmptyEnds  bool    `json:"strip_empty_ends"`
	Argv            *string `json:"argv"`
	Chdir           *string `json:"chdir"`
	Executable      *string `json:"executable"`
	Creates         *string `json:"creates"`
	Removes         *string `json:"removes"`
	Stdin           *string `json:"stdin"`
}

// pySeparators turns compact JSON into Python's default ", " and ": "
// separators (outside strings).
func pySeparators(js []byte) string {
	var b strings.Builder
	inStr, esc := false, false
	for _, c := range js {
		b.WriteByte(c)
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ',' || c == ':'):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// homeOf is the home directory of a user on the lab target.
func homeOf(user string) string {
	if user == "root" {
		return "/root"
	}
	return "/home/" + user
}

// shInner returns X from Ansible's `/bin/sh -c 'X'` (POSIX single quotes,
// with '"'"' for a quote inside).
func shInner(cmd string) (string, bool) {
	const prefix = "/bin/sh -c "
	if !strings.HasPrefix(cmd, prefix) {
		return "", false
	}
	return shUnquote(cmd[len(prefix):])
}

// shUnquote undoes shell quoting of one word: '…', "…" and backslashes.
func shUnquote(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", false
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return "", false
			}
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case ' ', '\t', '\n':
			return "", false // more than one word
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// crlfWriter turns \n into \r\n, as a terminal's output processing does.
type crlfWriter struct{ w io.Writer }

func (c crlfWriter) Write(p []byte) (int, error) {
	if _, err := c.w.Write([]byte(strings.ReplaceAll(string(p), "\n", "\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

const sftpWithArg = "cDilosSbBFJPRX"

// sftp answers `sftp -b BATCH … host`: each put line is echoed as batch
// mode does, and succeeds.
func (e env) sftp(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	p, err := parseArgs(args, sftpWithArg)
	if err != nil {
		fmt.Fprintf(stderr, "sftp: %v\n", err)
		return fakessh.ExitSSHError
	}
	if !checkOptions(p, stderr) {
		return fakessh.ExitSSHError
	}
	batch := p.opts['b']
	if len(batch) == 0 || len(p.operand) != 1 {
		fmt.Fprintln(stderr, "floor: sftp only answers -b BATCH with one destination")
		return 1
	}
	in := stdin
	if f := batch[len(batch)-1]; f != "-" {
		fh, err := os.Open(f)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", f, err)
			return 1
		}
		defer fh.Close()
		in = fh
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fmt.Fprintf(stdout, "sftp> %s\n", line)
		cmd, _, _ := strings.Cut(strings.TrimLeft(line, "-@"), " ")
		if cmd != "put" {
			fmt.Fprintf(stderr, "floor: no canned answer for sftp command %q\n", line)
			return 1
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(stderr, "floor: read batch: %v\n", err)
		return 1
	}
	return 0
}

const scpWithArg = "cDFiJloPSX"

// scp answers an upload `scp … SRC [host]:DST`.
func (e env) scp(args []string, stderr io.Writer) int {
	p, err := parseArgs(args, scpWithArg)
	if err != nil {
		fmt.Fprintf(stderr, "scp: %v\n", err)
		return fakessh.ExitSSHError
	}
	if !checkOptions(p, stderr) {
		return fakessh.ExitSSHError
	}
	if len(p.operand) != 2 || strings.Contains(p.operand[0], ":") || !strings.Contains(p.operand[1], ":") {
		fmt.Fprintf(stderr, "floor: scp only answers an upload SRC HOST:DST, not %q\n", p.operand)
		return 1
	}
	return 0
}
