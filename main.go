// Command ansible-bridge is a multi-call binary: invoked as ssh, scp or
// sftp it is the shim that hands the invocation to the bridge daemon;
// otherwise it runs the subcommands below.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/kballard/go-shellquote"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/shimentry"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"github.com/sirupsen/logrus"
	"golang.org/x/term"
)

// version is set by make build (-X main.version=$(git describe)); the
// build info adds the module version, VCS revision and Go version.
var version = "dev"

// revision is make build's `git rev-parse HEAD`, for builds whose build
// info has no VCS stamp (a git worktree, GOFLAGS=-buildvcs=false).
var revision = ""

// versionLine is what `ansible-bridge version` prints: the version make
// build stamped, then the module version, VCS revision (with "+dirty" for
// a modified tree) and time, and the Go version, from the build info.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return fmt.Sprintf("ansible-bridge %s (no build info) %s", version, runtime.Version())
	}
	mod := bi.Main.Version
	if mod == "" {
		mod = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	rev := settings["vcs.revision"]
	switch {
	case rev == "" && revision != "":
		rev = revision + " (make build)"
	case rev == "":
		rev = "unknown (built outside git, or with -buildvcs=false)"
	case settings["vcs.modified"] == "true":
		rev += "+dirty"
	}
	if t := settings["vcs.time"]; t != "" {
		rev += " " + t
	}
	return fmt.Sprintf("ansible-bridge %s\nmodule %s %s\nrevision %s\ngo %s", version, bi.Main.Path, mod, rev, bi.GoVersion)
}

func main() {
	// Invoked as ssh, scp or sftp, the binary never gets here: package
	// shimentry runs the shim from its init.
	os.Exit(runCLI(os.Args[1:]))
}

const usage = `usage: ansible-bridge <command> [args]

Installed as ssh, scp and sftp (see "shims"), ansible-bridge serves every
call Ansible makes over one persistent SSH connection per target.

commands:
  daemon [--socket PATH] [--idle DUR]   run the bridge daemon in the foreground
  shims DIR                             create ssh, scp and sftp in DIR
  env [DIR]                             print the shell lines that put the shims on PATH (default: the
                                        shims make install put beside this binary) and turn on pipelining
  status [--json]                       targets, connections, invocations per route, slow paths
  doctor                                check the setup (shims, socket dir, daemon, real ssh, FUSE, ansible-core)
  top [--interval DUR] [--once]         live view of targets, interpreters, invocations in flight
                                        (one plain screen when stdout is not a terminal)
  mount DIR                             mount the debug file system (temp dirs, journal, status)
  stop                                  stop the daemon
  version                               print the version, module version, VCS revision and Go version

environment:
  ANSIBLE_BRIDGE_SOCKET   daemon socket (default $XDG_RUNTIME_DIR/ansible-bridge/bridge.sock
                          or /tmp/ansible-bridge-UID/bridge.sock)
  ANSIBLE_BRIDGE_IDLE     daemon idle exit (default 10m)
  ANSIBLE_BRIDGE_MAX_INTERPRETERS
                          persistent interpreters per target (default 20)
  ANSIBLE_BRIDGE_LOG      daemon log file (default bridge.daemon.log next to bridge.sock)
  ANSIBLE_BRIDGE_MOUNT    a dir the daemon mounts the debug file system on
  ANSIBLE_BRIDGE_JOURNAL  0: no journal; a duration (1h): keep finished invocations
                          that long (default: until their connection closes, 10m at most)
  ANSIBLE_BRIDGE_DISABLE  1: the shims exec the real ssh/scp/sftp
  ANSIBLE_BRIDGE_REQUIRE  1: where the bridge would fall back for its own reasons
                          (no daemon, unusable socket dir), the shim fails instead
  ANSIBLE_BRIDGE_FASTPATH 0: no cached answers, held temp dirs or interpreters
                          (plain passthrough over the persistent connection)
  ANSIBLE_BRIDGE_REAL_SSH (_SCP, _SFTP)
                          the real binary to fall back to (default: the first
                          on PATH after the shim's directory that is not a shim)
  ANSIBLE_BRIDGE_CPUPROFILE
                          a file the daemon writes a CPU profile to
  ANSIBLE_BRIDGE_MEMPROFILE
                          a file the daemon writes, as it exits, a heap
                          profile of what it still holds
  ANSIBLE_BRIDGE_ARGV0    run as this program (ssh, scp, sftp, ansible-bridge) whatever
                          the binary's name; set for the daemon a shim starts
  ANSIBLE_BRIDGE_RESUME   set by the shim's C front for the Go shim it hands a
                          conversation to: not for users
  ANSIBLE_BRIDGE_IGNORED_SIGNALS
                          set by the shim's C front for the Go shim: the
                          signals its caller left ignored; not for users
  ANSIBLE_BRIDGE_BATCH_OPEN
                          set by the shim's C front for the Go shim: an sftp
                          batch on stdin the bridge cannot take; not for users
  ANSIBLE_BRIDGE_FALLBACK set by the shim for the real binary it falls back to, so
                          that a wrapper running the shim again is skipped: not for users
  ANSIBLE_BRIDGE_MASTER_STUB
                          set by the daemon for the C front it starts as a
                          ControlPersist master's process: not for users

also read: PATH (where the real ssh, scp and sftp are), XDG_RUNTIME_DIR (the
default socket), XDG_DATA_HOME (env's default DIR), ANSIBLE_CONFIG,
ANSIBLE_SSH_EXECUTABLE, ANSIBLE_SCP_EXECUTABLE and ANSIBLE_SFTP_EXECUTABLE
(doctor, and whether transfers come through the bridge), and from the
environment Ansible gives the shims, as ssh would: HOME, USER, LOGNAME,
SSH_AUTH_SOCK, TERM, ANSIBLE_SSH_TRANSFER_METHOD and those SendEnv names.
The daemon adds clobberfree=1 to GODEBUG (the Go runtime then overwrites
what it frees) unless GODEBUG names clobberfree.
`

func runCLI(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "daemon":
		return cmdDaemon(rest)
	case "shims":
		return cmdShims(rest)
	case "env":
		return cmdEnv(rest)
	case "status":
		return cmdCtl("status", rest)
	case "doctor":
		return cmdDoctor(rest)
	case "stop":
		return cmdCtl("stop", rest)
	case "mount":
		return cmdMount(rest)
	case "top":
		return cmdTop(rest)
	case "version", "--version":
		fmt.Println(versionLine(debug.ReadBuildInfo()))
		return 0
	case "help", "-h", "--help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "ansible-bridge: unknown command %q\n\n%s", cmd, usage)
	return 2
}

// execWithClobberFree re-executes the daemon with GODEBUG=clobberfree=1
// unless GODEBUG names clobberfree already. The garbage collector then
// overwrites what it frees, so that what the daemon drops after a
// connection ends, x/crypto/ssh's packet buffers among it (a task's
// arguments and output, no_log ones too), does not stay readable in its
// memory. Exec keeps the pid a shim waits on; if it fails, the daemon
// runs on as it is.
func execWithClobberFree() {
	godebug := os.Getenv("GODEBUG")
	for _, kv := range strings.Split(godebug, ",") {
		if strings.HasPrefix(strings.TrimSpace(kv), "clobberfree=") {
			return
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if godebug != "" {
		godebug += ","
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GODEBUG=") })
	_ = syscall.Exec(exe, os.Args, append(env, "GODEBUG="+godebug+"clobberfree=1"))
}

// writeHeapProfile writes the live heap (after a collection) to path:
// what the daemon still holds, e.g. after every connection closed.
func writeHeapProfile(path string) {
	runtime.GC()
	f, err := os.Create(path)
	if err == nil {
		err = pprof.WriteHeapProfile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge daemon: heap profile: %v\n", err)
	}
}

func cmdDaemon(args []string) int {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	socket := fs.String("socket", wire.SocketPath(), "unix socket to listen on")
	idle := fs.Duration("idle", envDuration("ANSIBLE_BRIDGE_IDLE", 10*time.Minute), "exit after this long with nothing in flight (0: never)")
	detached := fs.Bool("detached", false, "started by a shim: log to a file only")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	mount := fs.String("mount", os.Getenv("ANSIBLE_BRIDGE_MOUNT"), "mount the debug file system on this `dir` while running")
	maxInterp := fs.Int("max-interpreters", envInt("ANSIBLE_BRIDGE_MAX_INTERPRETERS", bridge.DefaultMaxInterpreters), "persistent interpreters per target at most")
	cpuProfile := fs.String("cpuprofile", os.Getenv("ANSIBLE_BRIDGE_CPUPROFILE"), "write a CPU profile (go tool pprof) of the daemon's run to this `file`")
	memProfile := fs.String("memprofile", os.Getenv("ANSIBLE_BRIDGE_MEMPROFILE"), "write a heap profile (go tool pprof) of what the daemon still holds when it exits to this `file`")
	journalFlag := fs.String("journal", os.Getenv("ANSIBLE_BRIDGE_JOURNAL"), "0: keep no journal; a `duration`: keep finished invocations that long (default: until their connection closes, 10m at most)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := wire.CheckSocketPath(*socket); err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge daemon: %v\n", err)
		return 2
	}
	journalOff, journalKeep, err := parseJournal(*journalFlag)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge daemon: %v\n", err)
		return 2
	}
	// A shim that starts the daemon may hold its caller's descriptors
	// (scp and sftp keep theirs, as OpenSSH's do): none of them is the
	// daemon's to keep open.
	fakessh.CloseInherited()
	execWithClobberFree()
	log := logrus.New()
	if lvl, err := logrus.ParseLevel(*logLevel); err == nil {
		log.SetLevel(lvl)
	}
	logPath := os.Getenv("ANSIBLE_BRIDGE_LOG")
	logFlags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if logPath == "" && *detached {
		// Nothing is written into the socket directory before it is
		// checked, and the log is not opened through a symlink.
		if err := wire.EnsurePrivateDir(filepath.Dir(*socket)); err != nil {
			fmt.Fprintf(os.Stderr, "ansible-bridge daemon: %v\n", err)
			return 1
		}
		logPath = wire.SideFile(*socket, "daemon.log")
		logFlags |= syscall.O_NOFOLLOW
	}
	if logPath != "" {
		f, err := os.OpenFile(logPath, logFlags, 0o600)
		if err != nil {
			fmt.Fprintf(os.Stderr, "ansible-bridge daemon: open log: %v\n", err)
			return 1
		}
		defer f.Close()
		log.SetOutput(f)
	}
	ln, err := bridge.Listen(*socket)
	if errors.Is(err, bridge.ErrRunning) {
		log.WithField("socket", *socket).Info("another daemon serves this socket")
		return 0
	}
	if err != nil {
		log.WithError(err).Error("listen")
		fmt.Fprintf(os.Stderr, "ansible-bridge daemon: %v\n", err)
		return 1
	}
	// Only the daemon that serves the socket: one that lost the race to
	// start must not truncate its profiles.
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "ansible-bridge daemon: cpu profile: %v\n", err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		// Every 4 KiB allocated sampled, not every 512 KiB: a daemon's
		// heap is a few MiB, and what a closed target leaves is small.
		runtime.MemProfileRate = 4 << 10
		defer writeHeapProfile(*memProfile)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	srv := bridge.New(bridge.Config{Idle: *idle, MaxInterpreters: *maxInterp, Mount: *mount, JournalOff: journalOff, JournalKeep: journalKeep,
		MasterStub: masterStub()}, log.WithField("pid", os.Getpid()))
	if err := srv.Run(ctx, ln); err != nil {
		log.WithError(err).Error("daemon failed")
		return 1
	}
	return 0
}

// masterStub is the C front beside this binary, which the daemon runs as
// each ControlPersist master's process; "" without one (a plain go
// build): `ssh -O check` then names the daemon's pid for every master.
func masterStub() string {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return ""
	}
	if front := filepath.Join(filepath.Dir(self), fakessh.FrontBinary); isExecutable(front) {
		return front
	}
	return ""
}

// parseJournal reads ANSIBLE_BRIDGE_JOURNAL: "" or "1" for the default,
// "0" for none, or how long to keep finished invocations.
func parseJournal(v string) (off bool, keep time.Duration, err error) {
	switch v {
	case "", "1":
		return false, 0, nil
	case "0":
		return true, 0, nil
	}
	keep, err = time.ParseDuration(v)
	if err != nil || keep <= 0 {
		return false, 0, fmt.Errorf("ANSIBLE_BRIDGE_JOURNAL=%q: want 0, 1 or a positive duration", v)
	}
	return false, keep, nil
}

func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return n
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second
	}
	return def
}

func cmdShims(args []string) int {
	if len(args) != 1 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: ansible-bridge shims DIR\n\ncreates ssh, scp and sftp in DIR as links to ansible-bridge-front (or ansible-bridge-shim) next to this binary, or to this binary")
		return 2
	}
	dir := args[0]
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge: %v\n", err)
		return 1
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge: %v\n", err)
		return 1
	}
	// The shim-only binary next to this one starts faster; without it
	// (e.g. after a plain go build) the links point at this binary.
	target := self
	if lean := filepath.Join(filepath.Dir(self), fakessh.ShimBinary); isExecutable(lean) {
		target = lean
		// The C front execs the Go shim beside it for what it leaves.
		if front := filepath.Join(filepath.Dir(self), fakessh.FrontBinary); isExecutable(front) {
			target = front
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge: %v\n", err)
		return 1
	}
	for _, name := range shimentry.Names {
		link := filepath.Join(dir, name)
		tmp := link + ".tmp"
		_ = os.Remove(tmp)
		if err := os.Symlink(target, tmp); err != nil {
			fmt.Fprintf(os.Stderr, "ansible-bridge: %v\n", err)
			return 1
		}
		if err := os.Rename(tmp, link); err != nil {
			fmt.Fprintf(os.Stderr, "ansible-bridge: %v\n", err)
			return 1
		}
	}
	fmt.Printf("created ssh, scp and sftp in %s (links to %s)\n", dir, target)
	return 0
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// defaultShimDir is where make install put the shims for this binary
// (PREFIX/bin/ansible-bridge: PREFIX/share/ansible-bridge/bin), else
// $XDG_DATA_HOME/ansible-bridge/bin or ~/.local/share/ansible-bridge/bin.
func defaultShimDir() string {
	if self, err := os.Executable(); err == nil {
		if self, err = filepath.EvalSymlinks(self); err == nil {
			d := filepath.Join(filepath.Dir(self), "..", "share", "ansible-bridge", "bin")
			if _, err := os.Stat(filepath.Join(d, "ssh")); err == nil {
				return filepath.Clean(d)
			}
		}
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "ansible-bridge", "bin")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "ansible-bridge", "bin")
}

func cmdEnv(args []string) int {
	fs := flag.NewFlagSet("env", flag.ContinueOnError)
	noPipelining := fs.Bool("no-pipelining", false, "leave ANSIBLE_PIPELINING alone")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ansible-bridge env [--no-pipelining] [DIR]\n\n"+
			"prints the shell lines that put the shims in DIR (default %s) first on PATH\n"+
			"and turn on pipelining unless ANSIBLE_PIPELINING is already set\n", defaultShimDir())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	dir := defaultShimDir()
	if fs.NArg() > 0 {
		dir = fs.Arg(0)
	}
	if _, err := os.Stat(filepath.Join(dir, "ssh")); err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge env: no ssh shim in %s: run `ansible-bridge shims %s` (or make install) first\n", dir, dir)
		return 1
	}
	path := shellquote.Join(dir)
	// ansible-bridge itself (status, doctor, stop) too, when its directory
	// is not on PATH yet (make install PREFIX=~/.local on a fresh account).
	if self, err := os.Executable(); err == nil {
		if bindir := filepath.Dir(self); !slices.Contains(filepath.SplitList(os.Getenv("PATH")), bindir) {
			path += ":" + shellquote.Join(bindir)
		}
	}
	fmt.Printf("# ansible-bridge: its ssh, scp and sftp first on PATH (and ansible-bridge on it)\nexport PATH=%s:\"$PATH\"\n", path)
	if !*noPipelining {
		// Through the bridge pipelining costs nothing in compatibility
		// (see README); a value the user set wins.
		fmt.Println("# and Ansible's pipelining on, unless ANSIBLE_PIPELINING is already set (--no-pipelining: leave it)")
		fmt.Println(`export ANSIBLE_PIPELINING="${ANSIBLE_PIPELINING:-True}"`)
	}
	return 0
}

// cmdCtl sends a control request to the daemon, without starting one.
func cmdCtl(name string, args []string) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Printf("usage: ansible-bridge %s%s\n", name, map[string]string{"status": " [--json]"}[name])
		if name == "status" {
			fmt.Print("\nthe daemon's targets, connections and invocations (it is not started)\n\n" + bridge.StatusColumns)
		}
		return 0
	}
	var c net.Conn
	var err error
	if name == "mount" {
		// The daemon holds the mount: start it if need be.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err = fakessh.DialDaemon(ctx, wire.SocketPath())
		cancel()
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err = wire.Dial(ctx, wire.SocketPath())
		cancel()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge: no daemon at %s: %v\n", wire.SocketPath(), err)
		if name == "status" && !slices.Contains(args, "--json") {
			printFallbacks(time.Time{})
		}
		if name == "stop" {
			return 0
		}
		return 1
	}
	defer c.Close()
	if name == "status" && !slices.Contains(args, "--json") {
		defer func() { printFallbacks(daemonStarted()) }()
	}
	cwd, _ := os.Getwd()
	hello, _ := json.Marshal(wire.HelloMsg{Prog: "ctl", Argv: append([]string{name}, args...), Cwd: cwd})
	if err := wire.Write(c, wire.Hello, hello); err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge: %v\n", err)
		return 1
	}
	for {
		f, err := wire.Read(c)
		if err != nil {
			if err == io.EOF {
				return 0
			}
			fmt.Fprintf(os.Stderr, "ansible-bridge: %v\n", err)
			return 1
		}
		switch f.Type {
		case wire.Stdout:
			os.Stdout.Write(f.Payload)
		case wire.Stderr:
			os.Stderr.Write(f.Payload)
		case wire.Exit:
			code, _ := wire.ExitCode(f.Payload)
			if name == "stop" {
				waitGone(wire.SocketPath())
			}
			return code
		}
	}
}

// cmdMount asks the daemon (started if need be) to mount its debug file
// system on DIR.
func cmdMount(args []string) int {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(os.Stderr, "usage: ansible-bridge mount DIR\n\nmounts the daemon's debug file system (temp dirs, journal, status) on DIR\nuntil the daemon stops")
		return 2
	}
	return cmdCtl("mount", args)
}

// cmdTop shows the daemon's status, refreshed, until q or ^C.
func cmdTop(args []string) int {
	fs := flag.NewFlagSet("top", flag.ContinueOnError)
	interval := fs.Duration("interval", time.Second, "refresh every `dur`")
	once := fs.Bool("once", false, "print one screen and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// A pipe or file gets one plain screen, as with --once.
	live := !*once && term.IsTerminal(int(os.Stdout.Fd()))
	quit := make(chan struct{})
	if live && term.IsTerminal(int(os.Stdin.Fd())) {
		if old, err := term.MakeRaw(int(os.Stdin.Fd())); err == nil {
			defer term.Restore(int(os.Stdin.Fd()), old)
			go func() {
				b := make([]byte, 1)
				for {
					if n, err := os.Stdin.Read(b); err != nil || (n == 1 && (b[0] == 'q' || b[0] == 3)) {
						close(quit)
						return
					}
				}
			}()
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	width := 1 << 20 // not a terminal: no cut
	for {
		if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 20 {
			width = w
		}
		var screen bytes.Buffer
		out, err := ctlOutput("status", "--json")
		var st bridge.Status
		if err == nil {
			err = json.Unmarshal(out, &st)
		}
		if err != nil {
			fmt.Fprintf(&screen, "ansible-bridge top: %v\n", err)
		} else {
			bridge.RenderTop(&screen, st, width, time.Now())
		}
		if !live {
			os.Stdout.Write(screen.Bytes())
			if err != nil {
				return 1
			}
			return 0
		}
		// Home, clear; raw mode needs CR LF.
		os.Stdout.WriteString("\x1b[H\x1b[2J" + strings.ReplaceAll(screen.String(), "\n", "\r\n"))
		select {
		case <-quit:
			return 0
		case <-sigs:
			return 0
		case <-time.After(*interval):
		}
	}
}

// printFallbacks adds to status what the shims ran the real binary for
// (their log) since the daemon started (zero: no daemon, the whole log),
// and why nothing could be recorded when the socket directory is not to
// be trusted. With a daemon, the fallbacks it decided are its status's
// own lines.
func printFallbacks(since time.Time) {
	sock := wire.SocketPath()
	if err := wire.CheckPrivateDir(filepath.Dir(sock), os.Getuid()); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Printf("every shim runs the real binary, unrecorded: %v (ansible-bridge doctor)\n", err)
		return
	}
	span := "since the daemon started"
	if since.IsZero() {
		span = "in the whole shim log"
	}
	for _, f := range fallbackSummary(sock, since) {
		if f.daemon && !since.IsZero() {
			continue
		}
		fmt.Printf("fallback to the real binary %s: %s\n", span, f.line)
	}
}

// daemonStarted is when the daemon answering on the socket started, or
// zero.
func daemonStarted() time.Time {
	out, err := ctlOutput("status", "--json")
	if err != nil {
		return time.Time{}
	}
	var st bridge.Status
	if json.Unmarshal(out, &st) != nil {
		return time.Time{}
	}
	return st.Started
}

// ctlOutput runs a control request and returns its stdout.
func ctlOutput(name string, args ...string) ([]byte, error) {
	c, err := net.DialTimeout("unix", wire.SocketPath(), 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("no daemon at %s", wire.SocketPath())
	}
	defer c.Close()
	hello, _ := json.Marshal(wire.HelloMsg{Prog: "ctl", Argv: append([]string{name}, args...)})
	if err := wire.Write(c, wire.Hello, hello); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for {
		f, err := wire.Read(c)
		if err != nil {
			return nil, err
		}
		switch f.Type {
		case wire.Stdout:
			out.Write(f.Payload)
		case wire.Exit:
			return out.Bytes(), nil
		}
	}
}

// waitGone waits (up to 10s) until nothing answers on the socket, so that
// `stop` returns once the daemon has let go of its connections.
func waitGone(path string) {
	deadline := time.Now().Add(10 * time.Second)
	for delay := time.Millisecond; time.Now().Before(deadline); delay = min(delay*2, 50*time.Millisecond) {
		c, err := net.Dial("unix", path)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(delay)
	}
}
