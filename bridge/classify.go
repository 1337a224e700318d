package bridge

import (
	"path"
	"regexp"
	"strings"
	"sync"

	shellquote "github.com/kballard/go-shellquote"
)

// cmdKind names the Ansible housekeeping commands the bridge answers
// itself (see routes.go).
type cmdKind int

const (
	cmdOther     cmdKind = iota
	cmdEchoHome          // echo ~[user]
	cmdMkTemp            // ( umask 77 && mkdir -p BASE && mkdir DIR && echo NAME=DIR )
	cmdChmodUX           // chmod u+x PATH... (u+rwx from ansible-core 2.19)
	cmdRmTemp            // rm -f -r DIR/ > /dev/null 2>&1
	cmdRunPython         // [VAR=value...] PYTHON [SCRIPT]
	cmdSetFacl           // setfacl -m u:USER:r-x PATH... (unprivileged become; runs on the target)
)

// Each command above may end in " && sleep 0": ansible-core up to 2.21
// appends it to every command (2.22 no longer does), and it changes
// neither the output nor the exit status.

// ansibleCmd is a recognised command line.
type ansibleCmd struct {
	kind cmdKind
	// cmdMkTemp: the base directory, the new directory and its name.
	base, dir, name string
	// cmdChmodUX, cmdRmTemp: the paths named.
	paths []string
	// cmdRunPython: interpreter words, script path ("" when piped on
	// stdin) and VAR=value prefixes in order.
	python []string
	script string
	env    [][2]string
}

// safePath matches paths that mean the same to the shell with or without
// the backquoted echo Ansible wraps them in: nothing to expand.
var safePath = lazyRegexp(`^/[A-Za-z0-9_./@+,:-]*$`)

var mkTempRe = lazyRegexp("^\\( umask 77 && mkdir -p \"` echo ([^`\"]+) `\"&& mkdir \"` echo ([^`\"]+) `\" && echo ([A-Za-z0-9_.-]+)=\"` echo ([^`\"]+) `\" \\)$")

var envWord = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*=`)

// classify recognises the commands Ansible's sh shell plugin sends. The
// command is what ssh would send: `/bin/sh -c '<inner>'`.
func classify(command string) ansibleCmd {
	words, err := shellquote.Split(command)
	if err != nil || len(words) != 3 || words[0] != "/bin/sh" || words[1] != "-c" {
		return ansibleCmd{}
	}
	inner, _ := strings.CutSuffix(words[2], " && sleep 0")
	if m := mkTempRe().FindStringSubmatch(inner); m != nil {
		base, dir, name, echoed := m[1], m[2], m[3], m[4]
		if dir == echoed && path.Dir(dir) == base && path.Base(dir) == name &&
			safePath().MatchString(base) && safePath().MatchString(dir) {
			return ansibleCmd{kind: cmdMkTemp, base: base, dir: dir, name: name}
		}
		return ansibleCmd{}
	}
	body := inner
	if body == "echo ~" || (strings.HasPrefix(body, "echo ~") && safeUser(body[len("echo ~"):])) {
		return ansibleCmd{kind: cmdEchoHome}
	}
	if rest, ok := strings.CutSuffix(body, "/ > /dev/null 2>&1"); ok && strings.HasPrefix(rest, "rm -f -r ") {
		p := rest[len("rm -f -r "):]
		if safePath().MatchString(p) {
			return ansibleCmd{kind: cmdRmTemp, paths: []string{p}}
		}
		return ansibleCmd{}
	}
	bw, err := shellquote.Split(body)
	if err != nil || len(bw) == 0 {
		return ansibleCmd{}
	}
	// Quoting must not have changed anything: the words are the text.
	plain := body == strings.Join(bw, " ")
	if len(bw) >= 3 && bw[0] == "chmod" && (bw[1] == "u+x" || bw[1] == "u+rwx") {
		if !plain || !safePaths(bw[2:]) {
			return ansibleCmd{}
		}
		return ansibleCmd{kind: cmdChmodUX, paths: bw[2:]}
	}
	if len(bw) >= 4 && bw[0] == "setfacl" && bw[1] == "-m" && facl().MatchString(bw[2]) {
		if !plain || !safePaths(bw[3:]) {
			return ansibleCmd{}
		}
		return ansibleCmd{kind: cmdSetFacl, paths: bw[3:]}
	}
	return classifyPython(bw)
}

func safePaths(paths []string) bool {
	for _, p := range paths {
		if !safePath().MatchString(p) {
			return false
		}
	}
	return true
}

// facl is the ACL entry Ansible's _fixup_perms2 grants a become user.
var facl = lazyRegexp(`^u:[A-Za-z0-9_][A-Za-z0-9_.-]*:r-[xX]$`)

// classifyInner recognises a module run in the command a become wrapper
// runs (no outer shell, no "&& sleep 0").
func classifyInner(inner string) ansibleCmd {
	words, err := shellquote.Split(inner)
	if err != nil || len(words) == 0 || strings.Join(words, " ") != inner {
		return ansibleCmd{}
	}
	return classifyPython(words)
}

// classifyPython recognises `[VAR=value...] PYTHON [SCRIPT.py]`, where
// PYTHON is an interpreter path or `/usr/bin/env [VAR=value...] pythonX`.
// The csh shell plugin (ansible_shell_type=csh) writes the prefixes as
// `env [VAR=value...] PYTHON`: env sets them as the shell would.
func classifyPython(words []string) ansibleCmd {
	c := ansibleCmd{kind: cmdRunPython}
	if len(words) > 1 && words[0] == "env" {
		words = words[1:]
	}
	for len(words) > 0 && envWord().MatchString(words[0]) {
		k, v, _ := strings.Cut(words[0], "=")
		c.env = append(c.env, [2]string{k, v})
		words = words[1:]
	}
	if len(words) == 0 {
		return ansibleCmd{}
	}
	if last := words[len(words)-1]; len(words) > 1 && strings.HasSuffix(last, ".py") && safePath().MatchString(last) {
		c.script = last
		words = words[:len(words)-1]
	}
	py := words[len(words)-1]
	if !isPython(path.Base(py)) {
		return ansibleCmd{}
	}
	if len(words) > 1 && words[0] != "/usr/bin/env" {
		return ansibleCmd{}
	}
	for _, w := range words {
		if !safePath().MatchString(w) && !envWord().MatchString(w) && !isPython(w) {
			return ansibleCmd{}
		}
	}
	c.python = words
	return c
}

var pythonRe = lazyRegexp(`^python[0-9.]*$`)

func isPython(name string) bool { return pythonRe().MatchString(name) }

var userRe = lazyRegexp(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

func safeUser(u string) bool { return userRe().MatchString(u) }

// lazyRegexp compiles expr on first use, not at package init: Ansible
// starts this binary as ssh several times per task, and the shim uses
// none of these.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
