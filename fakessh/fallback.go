package fakessh

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

// fallback execs the real prog found on PATH after our own directory
// (FindReal). The reason goes to the shim log next to the daemon socket
// (wire.SideFile), not to stderr, which is the real program's own, -v or
// not. It returns only on failure, with ssh's exit status for errors.
func fallback(prog string, argv []string, reason string) int {
	return execReal(prog, argv, reason, true)
}

// execReal is fallback; disable sets ANSIBLE_BRIDGE_DISABLE for the real
// binary, so that the shims it runs (a loop) go to the real ones too.
// Unset, an scp or sftp given -S the ssh shim reaches the daemon again.
func execReal(prog string, argv []string, reason string, disable bool) int {
	real, err := FindReal(prog)
	logFallback(prog, argv, reason, real, err)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge: %s: %s, and no real %s found: %v\r\n", prog, reason, prog, err)
		return ExitSSHError
	}
	env := os.Environ()
	if disable {
		env = append(env, DisableEnv+"=1")
	}
	for _, sig := range ignoredAtStart {
		signal.Ignore(sig) // as the caller left it: a handler is not exec'd
	}
	err = syscall.Exec(real, append([]string{Argv0(prog)}, argv...), env)
	fmt.Fprintf(os.Stderr, "ansible-bridge: exec %s: %v\r\n", real, err)
	return ExitSSHError
}

// Argv0 is argv[0] as the caller ran prog ("/usr/local/bin/scp"), which
// scp starts its messages with, or prog when the shim was run under
// another name.
func Argv0(prog string) string {
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == prog {
		return os.Args[0]
	}
	return prog
}

// siblingSSH is the ssh shim beside the running scp or sftp shim, or ""
// when there is none.
func siblingSSH() string {
	self := os.Args[0]
	if !strings.Contains(self, "/") {
		self = LookPathIn(self, os.Getenv("PATH"))
	}
	if self == "" {
		return ""
	}
	ssh := filepath.Join(filepath.Dir(self), "ssh")
	if !IsBridgeBinary(ssh) {
		return ""
	}
	if abs, err := filepath.Abs(ssh); err == nil {
		return abs
	}
	return ssh
}

// bridgeFallback is fallback for the bridge's own reasons (not OpenSSH's
// contract): in strict mode (RequireEnv) the shim fails instead, with
// one line on stderr and ssh's exit status for errors.
func bridgeFallback(prog string, argv []string, reason string) int {
	if os.Getenv(RequireEnv) != "1" {
		return fallback(prog, argv, reason)
	}
	logFallback(prog, argv, reason, "(not run: "+RequireEnv+"=1)", nil)
	fmt.Fprintf(os.Stderr, "ansible-bridge: %s: %s=1 and the bridge cannot serve: %s\r\n", prog, RequireEnv, reason)
	return ExitSSHError
}

// LookPathIn finds prog as a shell would with the given PATH, or "".
func LookPathIn(prog, path string) string {
	if strings.Contains(prog, "/") {
		return prog
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// IsBridgeBinary reports whether p is (a link to) ansible-bridge or the
// shim binary: a shim.
func IsBridgeBinary(p string) bool {
	if p == "" {
		return false
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	b := filepath.Base(real)
	return b == "ansible-bridge" || b == ShimBinary || b == FrontBinary
}

// FindReal returns the prog the caller's ssh (scp, sftp) would be
// without the bridge: the first on PATH after the directory the shim was
// run from that is not this binary or another of the bridge's. A wrapper
// earlier on PATH that execs the shim by its path is skipped: run again,
// it would exec the shim again, for ever. Where the shim's directory is
// not on PATH (ssh_executable naming it elsewhere), or nothing follows
// it, the whole PATH.
// ANSIBLE_BRIDGE_REAL_SSH (SCP, SFTP) overrides the search.
func FindReal(prog string) (string, error) {
	if p := os.Getenv("ANSIBLE_BRIDGE_REAL_" + strings.ToUpper(prog)); p != "" {
		return p, nil
	}
	argv0 := ""
	if len(os.Args) > 0 {
		argv0 = os.Args[0]
	}
	return FindRealIn(prog, argv0, os.Getenv("PATH"))
}

// FindRealIn is FindReal, without its override, for a shim run as argv0
// with PATH path (doctor: argv0 prog, as Ansible runs it).
func FindRealIn(prog, argv0, path string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	selfInfo, err := os.Stat(self)
	if err != nil {
		return "", err
	}
	dirs := filepath.SplitList(path)
	for i, dir := range dirs {
		if dir == "" {
			dirs[i] = "."
		}
	}
	after := shimDirIndex(prog, argv0, dirs) + 1
	for _, dir := range append(dirs[after:len(dirs):len(dirs)], dirs[:after]...) {
		cand := filepath.Join(dir, prog)
		fi, err := os.Stat(cand)
		// The shims' own directory links to the front, not to this binary.
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 || os.SameFile(fi, selfInfo) || IsBridgeBinary(cand) {
			continue
		}
		return cand, nil
	}
	return "", fmt.Errorf("%s not found on PATH", prog)
}

// shimDirIndex is the index in dirs of the directory the shim was run
// from, or -1 when it is not among them. argv0 naming prog by a path
// gives it (the same directory, not the same string); a bare name (found
// on PATH) or another name (the daemon, ANSIBLE_BRIDGE_ARGV0) means the
// first directory holding a bridge shim for prog.
func shimDirIndex(prog, argv0 string, dirs []string) int {
	if strings.Contains(argv0, "/") && filepath.Base(argv0) == prog {
		own, err := os.Stat(filepath.Dir(argv0))
		if err != nil {
			return -1
		}
		for i, dir := range dirs {
			if fi, err := os.Stat(dir); err == nil && os.SameFile(fi, own) {
				return i
			}
		}
		return -1
	}
	for i, dir := range dirs {
		if IsBridgeBinary(filepath.Join(dir, prog)) {
			return i
		}
	}
	return -1
}

func logFallback(prog string, argv []string, reason, real string, findErr error) {
	if prog == "ssh" && len(argv) == 2 && argv[0] == "-o" && argv[1] == "ControlPersist" {
		return // Ansible's probe of ssh's ControlPersist support, every run: expected
	}
	sock := wire.SocketPath()
	if wire.EnsurePrivateDir(filepath.Dir(sock)) != nil {
		return
	}
	f, err := os.OpenFile(wire.SideFile(sock, "shim.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	target := real
	if findErr != nil {
		target = "(none: " + findErr.Error() + ")"
	}
	fmt.Fprintf(f, "%s fallback prog=%s real=%s reason=%q argc=%d\n",
		time.Now().Format(time.RFC3339), prog, target, reason, len(argv))
}
