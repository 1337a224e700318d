package fakessh

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
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
	// A candidate that ran this shim again (a wrapper execing it by its
	// path, the shims' directory not on PATH) is skipped, with those
	// before it: run again, it would exec the shim again, for ever.
	var skip []string
	depth := 0
	m, marked := parseFallbackMark(os.Getenv(FallbackEnv))
	if marked {
		depth = m.depth + 1
		if m.loopedBack(prog, os.Getpid(), os.Getppid(), os.Args[1:]) {
			skip = m.tried
		}
	}
	real, err := findReal(prog, skip)
	if err == nil && depth > maxFallbackDepth {
		// A wrapper that runs the shim as its child with another argv
		// each time: not found as the same call, but it nests for ever.
		err = fmt.Errorf("%w: %d fallbacks nested in one another (a wrapper that runs this shim again with other arguments?); set ANSIBLE_BRIDGE_REAL_%s to the real %s",
			errLoop, depth, strings.ToUpper(prog), prog)
	}
	logFallback(prog, argv, reason, real, err)
	if errors.Is(err, errLoop) {
		fmt.Fprintf(os.Stderr, "ansible-bridge: %s: %s, and %v\r\n", prog, reason, err)
		return ExitSSHError
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge: %s: %s, and no real %s found: %v\r\n", prog, reason, prog, err)
		return ExitSSHError
	}
	mark := fallbackMark{prog: prog, pid: os.Getpid(), digest: argvDigest(argv), depth: depth, tried: append(skip, real)}
	env := append(withoutEnv(os.Environ(), FallbackEnv), FallbackEnv+"="+mark.String())
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
// it, the whole PATH, where a wrapper that execs the shim by its path is
// found again: execReal's FallbackEnv then skips it.
// ANSIBLE_BRIDGE_REAL_SSH (SCP, SFTP) overrides the search.
func FindReal(prog string) (string, error) {
	return findReal(prog, nil)
}

// errLoop: every candidate for the real binary ran the shim again.
var errLoop = errors.New("fallback loop")

// findReal is FindReal without the candidates in skip, which ran the shim
// again; with none left, an error wrapping errLoop.
func findReal(prog string, skip []string) (string, error) {
	override := "ANSIBLE_BRIDGE_REAL_" + strings.ToUpper(prog)
	if p := os.Getenv(override); p != "" {
		if slices.Contains(skip, p) {
			return "", fmt.Errorf("%w: %s=%s runs this shim again; set it to the real %s", errLoop, override, p, prog)
		}
		return p, nil
	}
	argv0 := ""
	if len(os.Args) > 0 {
		argv0 = os.Args[0]
	}
	real, err := findRealIn(prog, argv0, os.Getenv("PATH"), skip)
	if err != nil && len(skip) > 0 {
		return "", fmt.Errorf("%w: %s runs this shim again and no other %s is on PATH; set %s to the real %s",
			errLoop, strings.Join(skip, ", "), prog, override, prog)
	}
	return real, err
}

// FindRealIn is FindReal, without its override, for a shim run as argv0
// with PATH path (doctor: argv0 prog, as Ansible runs it).
func FindRealIn(prog, argv0, path string) (string, error) {
	return findRealIn(prog, argv0, path, nil)
}

func findRealIn(prog, argv0, path string, skip []string) (string, error) {
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
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 || os.SameFile(fi, selfInfo) || IsBridgeBinary(cand) || isTried(cand, fi, skip) {
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
		time.Now().Format(time.RFC3339Nano), prog, target, reason, len(argv))
}

// FallbackEnv marks the environment of the real binary a fallback execs:
// the program, this process's pid, a digest of the argv it was given,
// how many fallbacks it is nested in, and the candidates tried so far. A
// shim for that program started in the same process (a wrapper that
// execs the shim, whatever it passes) or as its child with that argv
// (one that runs it) was run again by that candidate, and skips it. A
// ProxyCommand's ssh -W, or the ssh an scp or sftp runs, has another
// argv (or program) and is served as any call; past maxFallbackDepth
// nested fallbacks, it is taken for a loop too.
const FallbackEnv = "ANSIBLE_BRIDGE_FALLBACK"

// maxFallbackDepth bounds the fallbacks nested in one another: a jump
// host chain nests one per hop, a wrapper that runs the shim as its child
// with other arguments each time nests for ever.
const maxFallbackDepth = 8

type fallbackMark struct {
	prog   string
	pid    int
	digest string
	depth  int
	tried  []string
}

// String is the mark as FallbackEnv holds it: "PROG PID DIGEST DEPTH"
// and the candidates as a PATH list (no PATH entry holds its separator).
func (m fallbackMark) String() string {
	return fmt.Sprintf("%s %d %s %d %s", m.prog, m.pid, m.digest, m.depth, strings.Join(m.tried, string(os.PathListSeparator)))
}

func parseFallbackMark(s string) (fallbackMark, bool) {
	f := strings.SplitN(s, " ", 5)
	if len(f) != 5 {
		return fallbackMark{}, false
	}
	pid, err := strconv.Atoi(f[1])
	depth, derr := strconv.Atoi(f[3])
	if err != nil || derr != nil || pid <= 0 || depth < 0 || f[4] == "" {
		return fallbackMark{}, false
	}
	return fallbackMark{prog: f[0], pid: pid, digest: f[2], depth: depth, tried: filepath.SplitList(f[4])}, true
}

// loopedBack reports whether a shim for prog with argv, in process pid
// with parent ppid, is the marked fallback's candidate running the shim
// again: in the same process (no real ssh, scp or sftp execs itself), or
// as its child with the same argv.
func (m fallbackMark) loopedBack(prog string, pid, ppid int, argv []string) bool {
	return m.prog == prog && (m.pid == pid || m.pid == ppid && m.digest == argvDigest(argv))
}

func argvDigest(argv []string) string {
	h := fnv.New64a()
	for _, a := range argv {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// isTried reports whether cand (fi) is one of tried, by name or, should
// a wrapper have changed PATH, as the same file.
func isTried(cand string, fi os.FileInfo, tried []string) bool {
	for _, p := range tried {
		if p == cand {
			return true
		}
		if ti, err := os.Stat(p); err == nil && os.SameFile(ti, fi) {
			return true
		}
	}
	return false
}

func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
