package bridge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bootstrap"
	"github.com/ansible-bridge/ansible-bridge/bridge/journal"
	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/sirupsen/logrus"
)

// Config configures a Server.
type Config struct {
	// Idle is how long the daemon lives with no invocation in flight
	// before it exits (0: forever).
	Idle time.Duration
	// Dial opens target connections; nil means sshclient.Dial.
	Dial DialFunc
	// JournalSize is how many invocations the journal keeps (0:
	// journal.DefaultSize).
	JournalSize int
	// JournalOff keeps no journal (ANSIBLE_BRIDGE_JOURNAL=0).
	JournalOff bool
	// JournalKeep, if set, is how long a finished invocation stays in
	// the journal. Unset, it stays until its target's connections close,
	// and journal.DefaultKeep at most.
	JournalKeep time.Duration
	// Mount, if set, is where the debug file system is mounted while the
	// daemon runs (see package fusefs).
	Mount string
	// MaxInterpreters caps a target's running interpreters; the least
	// recently used idle one is retired to make room. 0 means
	// DefaultMaxInterpreters.
	MaxInterpreters int
	// MasterStub is the C front (fakessh.FrontBinary), run in its stub
	// mode as the process of each ControlPersist master, whose pid
	// `ssh -O check` names; "" names the daemon's for every master.
	MasterStub string
}

// Server is the bridge daemon: it serves shim invocations arriving on a
// unix socket over persistent SSH connections.
type Server struct {
	cfg     Config
	log     logrus.FieldLogger
	targets *registry
	started time.Time

	nextID atomic.Uint64
	// invocations counts the shims' calls (ssh, scp, sftp), not the
	// control requests (status, top, stop, mount).
	invocations atomic.Uint64
	// acceptWaits counts the shims that waited to be accepted: for the
	// budget of shims served at once (inFlightBudget), or after an accept
	// failed for want of descriptors or memory (status shows it).
	acceptWaits atomic.Uint64
	handovers   handoverCounts
	serving     atomic.Int64  // shims accepted and not yet done with
	freed       chan struct{} // a shim is done (awaitRoom)
	active      atomic.Int64
	inflight    sync.Map // id → *invocation being served
	journal     *journal.Journal
	mounts      mounts
	activity    chan struct{}
	stopOnce    sync.Once
	stopCh      chan struct{}
	// freeMemory returns freed memory to the system; tests replace it.
	freeMemory func()
	returned   atomic.Uint64 // freeMemory's calls, for status
	// collect runs a garbage collection; tests replace it.
	collect func()
	// collectIn counts the ticks until a collection is due (0: none): a
	// password typed for an invocation leaves copies in what it dropped
	// (buffers, packets), overwritten once collected (GODEBUG=clobberfree=1),
	// which an idle daemon with connections open may not do for minutes.
	collectIn atomic.Int32
	hadConns  bool // a connection was open at the last expireIdle
	freeAgain int  // ticks until memory is freed once more (0: none due)
	// connected are the labels of the targets with a connection open at
	// the last expireIdle, whose entries go when it closes.
	connected map[string]bool
}

// New returns a Server; Run starts it.
func New(cfg Config, log logrus.FieldLogger) *Server {
	dial := cfg.Dial
	if dial == nil {
		dial = sshclient.Dial
	}
	targets := newRegistry(log, dial, cfg.MaxInterpreters)
	targets.masterStub = cfg.MasterStub
	return &Server{
		cfg:        cfg,
		log:        log,
		targets:    targets,
		started:    time.Now(),
		journal:    journal.NewWith(journal.Config{Size: cfg.JournalSize, Keep: cfg.JournalKeep, Off: cfg.JournalOff}),
		activity:   make(chan struct{}, 1),
		freed:      make(chan struct{}, 1),
		stopCh:     make(chan struct{}),
		freeMemory: debug.FreeOSMemory,
		collect:    runtime.GC,
	}
}

// collectTicks: a collection two ticks after the invocation that typed a
// password ends, once the goroutines that served it are gone.
const collectTicks = 2

// Run serves ln until ctx ends, the idle timeout passes, or a client asks
// the daemon to stop. It closes ln and all target connections on return.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	go func() {
		select {
		case <-ctx.Done():
		case <-s.stopCh:
		}
		ln.Close()
	}()
	go s.idleWatch(ctx, cancel)
	if path, own := socketFile(ln); own != nil {
		go s.orphanWatch(ctx, cancel, path, own)
	}
	go s.persistWatch(ctx)
	// The first interpreter start waits for this (~8 ms of compression):
	// done now, it overlaps the first connection's handshake instead.
	go bootstrap.Payload()
	s.log.WithField("socket", ln.Addr().String()).Info("daemon listening")
	if s.cfg.Mount != "" {
		// The daemon serves without its debug view rather than not at all.
		if merr := s.Mount(ctx, s.cfg.Mount); merr != nil {
			s.log.WithError(merr).Warn("debug file system not mounted")
		}
	}
	var err error
	var wait time.Duration
	budget := inFlightBudget()
	for {
		if !s.awaitRoom(ctx, budget) {
			break
		}
		c, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() != nil || s.stopping() {
				break
			}
			if !acceptCanWait(aerr) {
				err = fmt.Errorf("accept: %w", aerr)
				break
			}
			wait = s.acceptWait(ctx, aerr, wait)
			continue
		}
		wait = 0
		wg.Add(1)
		s.serving.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, c)
			s.serving.Add(-1)
			select {
			case s.freed <- struct{}{}:
			default:
			}
		}()
	}
	s.unmountAll()
	s.targets.closeAll()
	cancel()
	wg.Wait()
	s.log.Info("daemon stopped")
	return err
}

// inFlightBudget is how many shims the daemon serves at once. Each holds
// a file descriptor for its connection and opens a few more for a moment
// (its ssh_config, known hosts, keys, a file it uploads), and the
// targets' connections and the daemon's own files need some too, all
// within ulimit -n (which the Go runtime raised to the hard limit). Past
// the budget, shims wait in the socket's queue: an ssh run alone would
// not fail for want of the daemon's descriptors, so one through the
// bridge must not either.
func inFlightBudget() int64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<20 {
		return 1 << 18
	}
	return max(16, (int64(rl.Cur)-64)/4)
}

// awaitRoom waits until fewer than budget shims are being served; false
// when the daemon stops meanwhile.
func (s *Server) awaitRoom(ctx context.Context, budget int64) bool {
	waited := false
	for s.serving.Load() >= budget {
		if !waited {
			waited = true
			if s.acceptWaits.Add(1) == 1 {
				s.log.WithField("budget", budget).Warn("as many shims as ulimit -n allows are being served; the next wait their turn")
			}
		}
		select {
		case <-s.freed:
		case <-ctx.Done():
			return false
		case <-s.stopCh:
			return false
		}
	}
	return true
}

// acceptCanWait reports whether an accept failed for a shortage that
// ends (out of file descriptors or memory) rather than for the
// listener's end: the shims queued on the socket are then served once an
// invocation in flight finishes and frees its descriptor, instead of the
// daemon exiting and taking every connection down with it.
func acceptCanWait(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// acceptWait counts and logs a failed accept, then waits before the next
// one: 5 ms after the first failure, twice the last wait after each
// further one, 1 s at most. It returns the wait.
func (s *Server) acceptWait(ctx context.Context, err error, last time.Duration) time.Duration {
	wait := min(max(2*last, 5*time.Millisecond), time.Second)
	if s.acceptWaits.Add(1); last == 0 {
		s.log.WithError(err).Warn("accept failed; waiting for an invocation to end (see ulimit -n)")
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return wait
}

// persistWatch expires targets idle for their ControlPersist.
func (s *Server) persistWatch(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			s.expireIdle(now)
		}
	}
}

// expireIdle expires the targets idle for their ControlPersist. When no
// connection is left open (expired, or closed by reset_connection or a
// dead peer), the memory freed goes back to the system at once: a run
// over many targets grows the heap (each connection's and interpreter
// client's buffers) and the runtime returns it only slowly, so an idle
// daemon kept its peak RSS. What stays per target after its connections
// close is its status row and counters (a few hundred bytes) and the
// bounded journal (Config.JournalSize entries, until their connection
// closes): the slots of interpreters that died with it go here too.
// Called once a second.
func (s *Server) expireIdle(now time.Time) {
	expired := false
	for _, t := range s.targets.all() {
		if t.expireIdle(now) {
			expired = true
		}
		t.forgetDead()
	}
	s.expireJournal(now)
	if s.collectIn.Load() > 0 && s.collectIn.Add(-1) == 0 {
		s.collect()
	}
	connected := s.targets.connected()
	switch {
	case !connected && (expired || s.hadConns):
		s.returnMemory()
		// The sessions' and interpreters' goroutines end a moment after
		// their connection: what they held is freed on a later tick.
		s.freeAgain = 2
	case s.freeAgain > 0:
		if s.freeAgain--; s.freeAgain == 0 && !connected {
			s.returnMemory()
		}
	}
	s.hadConns = connected
}

// returnMemory gives the memory freed back to the system, once nothing is
// connected: the module zips decoded for the runs that have ended go too
// (a run's next task brings its zip again).
func (s *Server) returnMemory() {
	interp.ForgetZips()
	s.freeMemory()
	s.returned.Add(1)
}

// expireJournal drops the journal's entries that are past their time,
// and (unless Config.JournalKeep says how long to keep them) those of
// the targets whose connections closed since the last call: what they
// captured may be a task's secrets.
func (s *Server) expireJournal(now time.Time) {
	s.journal.Expire(now)
	open := map[string]bool{}
	for _, t := range s.targets.all() {
		t.mu.Lock()
		if len(t.conns) > 0 {
			open[t.label] = true
		}
		t.mu.Unlock()
	}
	if len(open) == 0 {
		// Nothing that used a secret is left (journal.ForgetSecrets).
		defer s.journal.ForgetSecrets()
	}
	if s.cfg.JournalKeep > 0 {
		return
	}
	closed := false
	for label := range s.connected {
		if !open[label] {
			s.journal.DropTarget(label)
			closed = true
		}
	}
	if closed || len(open) == 0 {
		// Entries without a target (fallbacks, -O, failures before a
		// login) had no connection of their own: they go with those of
		// the run they came with, or at once when none is open.
		s.journal.DropTarget("")
	}
	s.connected = open
}

func (s *Server) stopping() bool {
	select {
	case <-s.stopCh:
		return true
	default:
		return false
	}
}

// Stop makes Run return.
func (s *Server) Stop() { s.stopOnce.Do(func() { close(s.stopCh) }) }

// noUserIdle is the daemon's idle exit when its uid has no passwd entry.
const noUserIdle = time.Second

// idleWatch cancels the daemon once no invocation (nor mux client
// session) has been in flight for cfg.Idle and no connection is left:
// each is a master ssh would keep for its ControlPersist (yes: for ever),
// with its control socket and forwards.
func (s *Server) idleWatch(ctx context.Context, cancel func()) {
	idle := s.cfg.Idle
	if _, err := passwdEntry(); err != nil {
		// ssh refuses to run for this uid, so every call goes to the
		// real ssh (which says so): there is nothing to keep warm.
		idle = noUserIdle
	}
	if idle <= 0 {
		return
	}
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.activity:
			timer.Reset(idle)
		case <-timer.C:
			// A real ssh's session over a master's control socket is
			// no invocation, but the daemon is its master.
			if s.idle() {
				s.log.WithField("idle", idle).Info("idle; exiting")
				cancel()
				return
			}
			timer.Reset(idle)
		}
	}
}

// orphanCheckEvery is how often orphanWatch looks at the socket.
var orphanCheckEvery = 5 * time.Second

// orphanWatch cancels the daemon once its socket is gone (removed with
// the directory a job's data lived in, or replaced) and nothing keeps it
// up (idle): no shim can reach it any more, so waiting out the idle
// timeout would only keep a process, and what it holds, for nothing.
func (s *Server) orphanWatch(ctx context.Context, cancel func(), path string, own os.FileInfo) {
	tick := time.NewTicker(orphanCheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if now, err := os.Stat(path); err == nil && os.SameFile(now, own) {
			continue
		}
		if s.idle() {
			s.log.WithField("socket", path).Info("socket removed or replaced, and nothing left to serve: exiting")
			cancel()
			return
		}
	}
}

// socketFile returns ln's socket's path and file, if it has one.
func socketFile(ln net.Listener) (string, os.FileInfo) {
	addr, ok := ln.Addr().(*net.UnixAddr)
	if !ok || addr.Name == "" || addr.Name[0] == '@' {
		return "", nil
	}
	own, err := os.Stat(addr.Name)
	if err != nil {
		return "", nil
	}
	return addr.Name, own
}

// idle reports whether the daemon has nothing to keep it up: no
// invocation, no mux client's session, no connection (a master ssh keeps).
func (s *Server) idle() bool {
	return s.active.Load() == 0 && !s.targets.busy() && !s.targets.connected()
}

func (s *Server) touch() {
	select {
	case s.activity <- struct{}{}:
	default:
	}
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	s.active.Add(1)
	s.touch()
	defer func() {
		s.active.Add(-1)
		s.touch()
	}()
	id := s.nextID.Add(1)
	log := s.log.WithField("session", id)
	if uid, err := wire.PeerUID(c); err != nil || uid != os.Getuid() {
		log.WithError(err).WithField("peer_uid", uid).Warn("refusing connection from another user")
		return
	}
	f, err := wire.Read(c)
	if err != nil || f.Type != wire.Hello {
		log.WithError(err).Warn("bad hello from shim")
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	iv := &invocation{id: id, conn: c, log: log, cancel: cancel, started: time.Now(), handovers: &s.handovers}
	iv.secrets = secretNoter{sink: s.journal, saw: &iv.sawSecret}
	s.inflight.Store(id, iv)
	defer s.inflight.Delete(id)
	err = json.Unmarshal(f.Payload, &iv.hello)
	clear(f.Payload) // the shim's whole environment: parsed, not kept
	if err != nil {
		log.WithError(err).Warn("malformed hello")
		return
	}
	iv.log = log.WithField("prog", iv.hello.Prog)
	if iv.hello.Prog != "ctl" {
		s.invocations.Add(1)
		iv.reg = s.targets
	}
	if iv.hello.Front && iv.hello.Parse() != "" {
		// What the front cannot pass on, the Go shim falls back on or
		// explains, as it would have from the start: the real binary
		// runs it (ssh -V, Ansible's ControlPersist probe).
		iv.countUnrouted(routeFallback)
		_ = iv.send(wire.Handover, nil)
		return
	}
	if iv.hello.Prog != "ctl" {
		e := s.journal.Begin("", "", append([]string{iv.hello.Prog}, iv.hello.Argv...))
		iv.mu.Lock() // Status reads it
		iv.entry = e
		iv.mu.Unlock()
	}
	code := s.dispatch(ctx, iv)
	// Before the exit status: the shim, and who waits for it, see the
	// invocation counted.
	iv.countUnrouted("")
	if code >= 0 {
		iv.exit(code)
	}
	iv.mu.Lock()
	tgt := iv.target
	iv.mu.Unlock()
	if tgt != nil {
		tgt.invocationDone(iv)
	}
	iv.entry.Finish(code)
	if iv.sawSecret.Load() {
		// Not pushed back by later ones: at most one every two ticks.
		s.collectIn.CompareAndSwap(0, collectTicks)
	}
	iv.log.WithFields(logrus.Fields{"exit": code, "ms": float64(time.Since(iv.started).Microseconds()) / 1000}).Debug("invocation done")
}

// dispatch runs the invocation and returns its exit status, or -1 when it
// already answered (fallback).
func (s *Server) dispatch(ctx context.Context, iv *invocation) int {
	if iv.hello.Prog != "ctl" {
		if reason := cmp.Or(iv.preloadReason(), iv.sandboxReason()); reason != "" {
			iv.fallback(reason)
			return -1
		}
	}
	switch iv.hello.Prog {
	case "ssh":
		return s.serveSSH(ctx, iv)
	case "scp":
		return s.serveSCP(ctx, iv)
	case "sftp":
		return s.serveSFTP(ctx, iv)
	case "ctl":
		return s.serveCtl(ctx, iv)
	}
	iv.fallback("unknown program " + iv.hello.Prog)
	return -1
}

// connFailure reports a connection error the way ssh does: its message
// on stderr and exit status 255, which Ansible reports as UNREACHABLE.
func connFailure(iv *invocation, err error) int {
	var ce *sshclient.ConnError
	if errors.As(err, &ce) {
		_, _ = iv.stderr().Write([]byte(ce.Stderr()))
	} else {
		iv.errorf("ssh: %v", err)
	}
	iv.log.WithError(err).Info("connection failed")
	return fakessh.ExitSSHError
}

// preloadReason says why the program the shim stands in for must run
// itself ("" if not): the dynamic loader would load what LD_PRELOAD or
// LD_AUDIT names into it (torsocks and proxychains hook its connect),
// where the daemon dials for it untouched.
func (iv *invocation) preloadReason() string {
	for _, v := range []string{"LD_PRELOAD", "LD_AUDIT"} {
		if iv.getenv(v) != "" {
			return v + " is set: the real " + iv.hello.Prog + " loads it (torsocks, proxychains)"
		}
	}
	return ""
}

// reasonSandbox: the shim and the daemon do not see the same files.
const reasonSandbox = "the shim runs in another mount namespace (a sandbox): the files it names are not the daemon's"

// What else makes the shim's world not the daemon's: ssh would open its
// files, connect, and name its host from where the shim runs.
const (
	reasonChroot   = "the shim runs under another root directory (a chroot): the files it names are not the daemon's"
	reasonNetwork  = "the shim runs in another network namespace: ssh would connect from there"
	reasonUTS      = "the shim runs in another UTS namespace: %l, %L and %C name its host, not the daemon's"
	reasonUserNS   = "the shim runs in another user namespace"
	reasonNoPeer   = "the shim's process is not visible to the daemon (another pid namespace)"
	reasonGroups   = "the shim's groups are not the daemon's (ssh opens its files with them): `ansible-bridge stop` and the next call starts a daemon with them"
	reasonPeerGone = "the shim's process could not be read"
	reasonPrivs    = "the shim's capabilities, no_new_privs or seccomp filter are not the daemon's (ssh opens its files and runs its commands with its own)"
	reasonLabel    = "the shim's security label (AppArmor, SELinux) is not the daemon's"
	reasonFileSize = "the shim's file size limit (ulimit -f) is not the daemon's (ssh writes its files under its own)"
)

// sandboxReason says why iv's shim does not run where the daemon does
// ("" if it does): another mount, network, UTS or user namespace, root
// directory, groups, privileges, security label or file size limit. A
// sandbox (bubblewrap, a container, `unshare --net`, a chroot sharing
// /tmp) that reaches a daemon outside it would have the daemon open its
// paths (keys the sandbox hides, an agent socket only it sees), dial its
// targets and run its proxies in the daemon's view instead, and a caller
// whose groups or privileges differ from the daemon's would read files
// it cannot (or not read ones it can). The /proc lookups take ~0.08 ms
// an invocation (2026-12-01: 53 µs for the namespaces, root and status,
// 30 µs for the label and limits).
func (iv *invocation) sandboxReason() string {
	own := ownWorld()
	if own == nil {
		return "" // no namespaces to compare (a kernel without them)
	}
	pid, err := wire.PeerPID(iv.conn)
	if err != nil || pid <= 0 {
		return reasonNoPeer
	}
	iv.pid = pid
	proc := "/proc/" + strconv.Itoa(pid)
	for i, ns := range namespaceKinds {
		peer, err := os.Readlink(proc + "/ns/" + ns.name)
		if err != nil {
			return reasonPeerGone
		}
		if peer != own.links[i] {
			return ns.reason
		}
	}
	var root syscall.Stat_t
	if err := syscall.Stat(proc+"/root", &root); err != nil {
		return reasonPeerGone
	}
	if root.Dev != own.root.Dev || root.Ino != own.root.Ino {
		return reasonChroot
	}
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		return reasonPeerGone
	}
	if !sameGroups(status, own.gid, own.groups) {
		return reasonGroups
	}
	if privileges(status) != own.privileges {
		return reasonPrivs
	}
	if securityLabel(proc) != own.label {
		return reasonLabel
	}
	limits, err := os.ReadFile(proc + "/limits")
	if err != nil {
		return reasonPeerGone
	}
	if fileSizeLimit(limits) != own.fileSize {
		return reasonFileSize
	}
	return ""
}

// privilegeFields are the /proc/PID/status fields that, beside the uid
// and groups, decide what a process may open and run: a root caller
// with capabilities dropped (a container's --cap-drop, setpriv) must not
// have the daemon read a key or overwrite a file it cannot.
var privilegeFields = []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"}

// privileges is a /proc/PID/status's privilegeFields, as one string.
func privileges(status []byte) string {
	var out []string
	for _, ln := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(ln, ":")
		if slices.Contains(privilegeFields, k) {
			out = append(out, k+"="+strings.TrimSpace(v))
		}
	}
	return strings.Join(out, " ")
}

// securityLabel is the LSM label of the process at proc ("" where the
// kernel has none to show).
func securityLabel(proc string) string {
	b, _ := os.ReadFile(proc + "/attr/current")
	return string(b)
}

// fileSizeLimit is the "Max file size" line of a /proc/PID/limits (soft
// and hard RLIMIT_FSIZE).
func fileSizeLimit(limits []byte) string {
	for _, ln := range strings.Split(string(limits), "\n") {
		if rest, ok := strings.CutPrefix(ln, "Max file size"); ok {
			return strings.Join(strings.Fields(rest), " ")
		}
	}
	return ""
}

var namespaceKinds = []struct{ name, reason string }{
	{"mnt", reasonSandbox}, {"net", reasonNetwork}, {"uts", reasonUTS}, {"user", reasonUserNS},
}

// sameGroups reports whether a /proc/PID/status shows effective gid gid
// and the supplementary groups groups (in any order).
func sameGroups(status []byte, gid int, groups []int) bool {
	var gidOK, groupsOK bool
	for _, ln := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(ln, ":")
		f := strings.Fields(v)
		switch k {
		case "Gid":
			gidOK = len(f) >= 2 && f[1] == strconv.Itoa(gid)
		case "Groups":
			if len(f) != len(groups) {
				return false
			}
			want := make(map[string]bool, len(groups))
			for _, g := range groups {
				want[strconv.Itoa(g)] = true
			}
			groupsOK = true
			for _, g := range f {
				groupsOK = groupsOK && want[g]
			}
		}
	}
	return gidOK && groupsOK
}

// daemonWorld is where the daemon runs: its namespaces (namespaceKinds'
// order), root directory, effective gid, groups, privileges, security
// label and file size limit.
type daemonWorld struct {
	links  []string
	root   syscall.Stat_t
	gid    int
	groups []int
	// As sandboxReason reads a shim's.
	privileges, label, fileSize string
}

// ownWorld is where the daemon runs, read once; nil where /proc does not
// show it.
var ownWorld = sync.OnceValue(func() *daemonWorld {
	w := &daemonWorld{gid: os.Getegid()}
	for _, ns := range namespaceKinds {
		l, err := os.Readlink("/proc/self/ns/" + ns.name)
		if err != nil {
			return nil
		}
		w.links = append(w.links, l)
	}
	if err := syscall.Stat("/", &w.root); err != nil {
		return nil
	}
	groups, err := os.Getgroups()
	if err != nil {
		return nil
	}
	w.groups = groups
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	limits, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return nil
	}
	w.privileges, w.label, w.fileSize = privileges(status), securityLabel("/proc/self"), fileSizeLimit(limits)
	return w
})
