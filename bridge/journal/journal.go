package journal

import (
	"cmp"
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
)

const (
	// DefaultSize is how many invocations a Journal keeps unless New is
	// told otherwise.
	DefaultSize = 200
	// CaptureLimit is how many bytes of each of stdin, stdout and
	// stderr an entry keeps.
	CaptureLimit = 64 << 10
	// WrapperCaptureLimit is how many bytes of stdin an entry keeps once
	// it is known to be a module's AnsiballZ wrapper: the wrapper's code.
	// The rest up to CaptureLimit is the zip's base64, its module and
	// arguments are kept apart (ModuleArgs), and 200 wrappers kept to
	// CaptureLimit were a third of the daemon's heap at a fleet's peak.
	WrapperCaptureLimit = 8 << 10
	// DefaultKeep is how long a finished entry is kept at most unless
	// Config.Keep says otherwise.
	DefaultKeep = 10 * time.Minute
)

// Config configures a Journal.
type Config struct {
	// Size is how many invocations are kept (0: DefaultSize).
	Size int
	// Keep is how long a finished entry is kept (0: DefaultKeep).
	Keep time.Duration
	// Off records nothing: Begin returns a nil *Entry. The Journal still
	// redacts (Redact) what callers show next to it.
	Off bool
}

// A Journal keeps the last invocations of the daemon. It is safe for
// concurrent use; a nil *Journal records nothing.
type Journal struct {
	red  Redactor
	now  func() time.Time
	keep time.Duration
	off  bool

	mu      sync.Mutex
	size    int
	entries []*Entry // oldest first, at most size
	last    uint64   // the last sequence number handed out
}

// New returns a Journal keeping the last n invocations (DefaultSize if n
// is not positive).
func New(n int) *Journal {
	return NewWith(Config{Size: n})
}

// NewWith returns a Journal configured by c.
func NewWith(c Config) *Journal {
	if c.Size <= 0 {
		c.Size = DefaultSize
	}
	if c.Keep <= 0 {
		c.Keep = DefaultKeep
	}
	return &Journal{size: c.Size, now: time.Now, keep: c.Keep, off: c.Off}
}

// AddSecret registers a secret that is never to be shown: every view the
// journal returns from now on, of old entries as well as new ones, has
// it replaced by Mask (see Redactor.Add for the forms matched). Kept
// entries that hold it are rewritten with it masked, so that the journal
// keeps no copy of it either; the caller may overwrite s afterwards.
func (j *Journal) AddSecret(s []byte) {
	if j == nil || len(s) == 0 {
		return
	}
	j.red.Add(s)
	for _, e := range j.kept() {
		e.mu.Lock()
		e.scrub()
		e.mu.Unlock()
	}
}

// Expire drops the finished entries that ended Config.Keep ago or
// earlier. The daemon calls it periodically.
func (j *Journal) Expire(now time.Time) {
	if j == nil {
		return
	}
	j.drop(func(e *Entry) bool { return !now.Before(e.end.Add(j.keep)) })
}

// DropTarget drops the finished entries of target ("user@host:port"),
// whose connections have closed.
func (j *Journal) DropTarget(target string) {
	if j == nil {
		return
	}
	j.drop(func(e *Entry) bool { return e.target == target })
}

// drop removes the finished entries for which gone (called with e.mu
// held) is true, overwriting what they captured.
func (j *Journal) drop(gone func(*Entry) bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	kept := j.entries[:0]
	for _, e := range j.entries {
		e.mu.Lock()
		if e.done && gone(e) {
			e.wipe()
			e.mu.Unlock()
			continue
		}
		e.mu.Unlock()
		kept = append(kept, e)
	}
	clear(j.entries[len(kept):])
	j.entries = kept
}

// ForgetSecrets lets go of every secret registered, with the key their
// verifiers are made with, unless an invocation is still being recorded
// (its end masks what it captured). The daemon calls it once no
// connection is left: kept entries hold their secrets masked already,
// and a password or no_log value is registered again when it is used
// again. Until then the Redactor's HMACs would let whoever reads the
// daemon's memory test guesses of every password it ever saw.
func (j *Journal) ForgetSecrets() {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range j.entries {
		e.mu.Lock()
		done := e.done
		e.mu.Unlock()
		if !done {
			return
		}
	}
	j.red.reset()
}

// Redact applies the journal's secrets to b, for callers that show
// other data next to the journal's.
func (j *Journal) Redact(b []byte) []byte {
	if j == nil {
		return b
	}
	return j.red.Redact(b)
}

// Begin records the start of an invocation and returns its entry.
// target is "user@host:port", route how the daemon serves the
// invocation (both may be set later), argv the shim's argument vector.
func (j *Journal) Begin(target, route string, argv []string) *Entry {
	if j == nil || j.off {
		return nil
	}
	e := &Entry{
		j:       j,
		target:  target,
		route:   route,
		argv:    append([]string(nil), argv...),
		started: j.now(),
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.last++
	e.seq = j.last
	if len(j.entries) == j.size {
		old := j.entries[0]
		old.mu.Lock()
		old.wipe()
		old.mu.Unlock()
		j.entries[0] = nil
		j.entries = j.entries[1:]
	}
	j.entries = append(j.entries, e)
	return e
}

// find returns the entry with sequence number seq, if still kept.
func (j *Journal) find(seq uint64) *Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	// Sequence numbers ascend, with gaps where entries expired.
	i := sort.Search(len(j.entries), func(i int) bool { return j.entries[i].seq >= seq })
	if i == len(j.entries) || j.entries[i].seq != seq {
		return nil
	}
	return j.entries[i]
}

// kept returns the entries, oldest first.
func (j *Journal) kept() []*Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]*Entry(nil), j.entries...)
}

// Snapshot returns views of all kept entries, oldest first.
func (j *Journal) Snapshot() []EntryView {
	if j == nil {
		return nil
	}
	es := j.kept()
	out := make([]EntryView, len(es))
	for i, e := range es {
		out[i] = e.view()
	}
	return out
}

// Get returns the view of entry seq; false if it is not (or no longer)
// kept.
func (j *Journal) Get(seq uint64) (EntryView, bool) {
	if j == nil {
		return EntryView{}, false
	}
	e := j.find(seq)
	if e == nil {
		return EntryView{}, false
	}
	return e.view(), true
}

// Summary is the short form of an entry, cheap enough to list often.
type Summary struct {
	Seq     uint64
	Target  string
	Route   string
	Started time.Time
	Done    bool
}

// List returns summaries of all kept entries, oldest first.
func (j *Journal) List() []Summary {
	if j == nil {
		return nil
	}
	es := j.kept()
	out := make([]Summary, len(es))
	for i, e := range es {
		e.mu.Lock()
		out[i] = Summary{Seq: e.seq, Target: e.target, Route: e.route, Started: e.started, Done: e.done}
		e.mu.Unlock()
		out[i].Target = j.red.String(out[i].Target)
		out[i].Route = j.red.String(out[i].Route)
	}
	return out
}

// EntryView is a snapshot of an entry, with secrets masked.
type EntryView struct {
	// Seq numbers invocations from 1 in the order they began.
	Seq uint64
	// Target is "user@host:port".
	Target string
	// Route is how the daemon served the invocation: "module", "exec",
	// "housekeeping", "sftp", "scp", "control", "passthrough",
	// "fallback", ...
	Route string
	// Argv is the shim's argument vector.
	Argv []string
	// Stdin, Stdout and Stderr are what passed, up to CaptureLimit each.
	Stdin, Stdout, Stderr Capture
	// Done is set once the invocation finished; Exit is its exit status
	// then.
	Done bool
	Exit int
	// Started is when Begin was called.
	Started time.Time
	// Queued is the time from Started to the remote start (or until now
	// or the end, when there was none yet); Remote the time from the
	// remote start to the end (or until now); Total from Started to the
	// end (or until now).
	Queued, Remote, Total time.Duration
	// ModuleName is the fully qualified name of the AnsiballZ module run
	// (e.g. ansible.modules.command), "" when none was recognised.
	ModuleName string
	// ModuleArgs is its ANSIBLE_MODULE_ARGS, pretty-printed JSON.
	ModuleArgs json.RawMessage
	// NoLog is set when the module ran with Ansible's no_log (or its
	// arguments could not be read): ModuleArgs and the captures' Data
	// are then empty, their Size still counts.
	NoLog bool
	// StdinHidden is set when stdin was an upload (`dd of=`), whose
	// content the journal never keeps: Stdin.Data is empty.
	StdinHidden bool
}

// Capture is the kept part of a byte stream.
type Capture struct {
	// Data is the first bytes of the stream, with secrets masked.
	Data []byte
	// Size is how many bytes passed in all.
	Size int64
	// Truncated is set when Data lacks some of them.
	Truncated bool
}

// An Entry records one invocation while it runs. Its methods are safe
// for concurrent use, and do nothing on a nil *Entry.
type Entry struct {
	j   *Journal
	seq uint64

	mu                   sync.Mutex
	target, route        string
	argv                 []string
	stdin, out, err      capture
	scan                 *wrapperScanner // on stdin; nil when done with
	module               string
	args                 json.RawMessage
	started, remote, end time.Time
	done                 bool
	exit                 int
	noLog                bool // no_log: nothing but sizes is kept
	hideStdin            bool // stdin is scanned and counted, not kept
	awaiting             bool // AwaitModule: stdin is kept unseen, not scanned
	// wrapperIn: stdin is the module's wrapper, its arguments' values
	// with it (pipelining).
	wrapperIn bool

	ver      uint64     // counts changes
	cache    *EntryView // of a finished entry
	cacheGen uint64     // the redactor generation cache was made with
}

// touch records a change; e.mu is held.
func (e *Entry) touch() {
	e.ver++
	e.cache = nil
}

type capture struct {
	data  []byte
	size  int64
	limit int // bytes kept at most; 0: CaptureLimit
}

func (c *capture) append(b []byte) {
	c.size += int64(len(b))
	limit := cmp.Or(c.limit, CaptureLimit)
	room := limit - len(c.data)
	if room <= 0 {
		return
	}
	b = b[:min(room, len(b))]
	if need := len(c.data) + len(b); need > cap(c.data) {
		// Grown here, not by append, which would leave the old copy
		// readable; and as needed: most invocations print a line, and
		// wiping a whole CaptureLimit for each cost the daemon more than
		// the rest of its answer.
		grown := make([]byte, len(c.data), min(limit, max(need, 2*cap(c.data), 256)))
		copy(grown, c.data)
		clear(c.data)
		c.data = grown
	}
	c.data = append(c.data, b...)
}

// keepHead keeps the first n bytes at most, from now on too; what it
// drops is overwritten.
func (c *capture) keepHead(n int) {
	c.limit = n
	if len(c.data) <= n {
		return
	}
	head := make([]byte, n)
	copy(head, c.data)
	clear(c.data[:cap(c.data)])
	c.data = head
}

// count records that b passed without keeping it.
func (c *capture) count(b []byte) { c.size += int64(len(b)) }

// wipe overwrites and drops the kept bytes; the size stays.
func (c *capture) wipe() {
	clear(c.data[:cap(c.data)])
	c.data = nil
}

// take records b: kept unless keep is false.
func (c *capture) take(b []byte, keep bool) {
	if keep {
		c.append(b)
	} else {
		c.count(b)
	}
}

// keepProgram cuts argv to the program's name, letting go of the rest:
// a shorter slice alone would keep the command line (a no_log task's
// environment: values) reachable through its backing array.
func keepProgram(argv []string) []string {
	n := min(1, len(argv))
	clear(argv[n:])
	return argv[:n]
}

// markNoLog drops what a no_log task must not leave behind, the command
// line (its environment: values) but the program's name too; e.mu is held.
func (e *Entry) markNoLog() {
	e.noLog = true
	e.argv = keepProgram(e.argv)
	e.wipe()
}

// Conceal keeps of the entry only what a no_log task's keeps: for an
// invocation whose command and output the daemon cannot tell from a
// no_log task's (raw, script, a command a user typed).
func (e *Entry) Conceal() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.markNoLog()
	e.awaiting = false
	e.scan = nil
	e.touch()
}

// Argv returns the entry's command line as its view shows it: secrets
// masked, the program's name only for a concealed or no_log one. nil for
// a nil entry (no journal).
func (e *Entry) Argv() []string {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	argv := append([]string(nil), e.argv...)
	e.mu.Unlock()
	for i, a := range argv {
		argv[i] = e.j.red.String(a)
	}
	return argv
}

// HideCommand cuts argv to the program's name and drops the stdin kept:
// for an invocation handed to the real binary, whose command the daemon
// did not read (it may be a no_log task's, with its environment).
func (e *Entry) HideCommand() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.argv = keepProgram(e.argv)
	e.stdin.wipe()
	e.hideStdin = true
	e.awaiting = false
	e.scan = nil
	e.touch()
}

// wipe overwrites and drops everything captured, for an entry leaving
// the journal; e.mu is held.
func (e *Entry) wipe() {
	e.stdin.wipe()
	e.out.wipe()
	e.err.wipe()
	clear(e.args)
	e.args = nil
	e.scan = nil
	e.cache = nil
}

// scrub rewrites the captures and arguments with the secrets known now
// masked, overwriting the bytes that held them; e.mu is held.
func (e *Entry) scrub() {
	red := &e.j.red
	for _, c := range []*capture{&e.stdin, &e.out, &e.err} {
		if m := red.Redact(c.data); len(c.data) > 0 && &m[0] != &c.data[0] {
			c.wipe()
			c.data = append(make([]byte, 0, len(m)), m...)
			clear(m)
		}
	}
	if m := red.Redact(e.args); len(e.args) > 0 && &m[0] != &e.args[0] {
		clear(e.args)
		e.args = m
	}
	e.touch()
}

// setModule records a decoded wrapper; e.mu is held. async_status is kept
// as a no_log module's: its result is another task's, whose no_log it does
// not carry (Ansible polls an async task with it, built with the task's
// environment but without its no_log, and censors the result itself).
func (e *Entry) setModule(module string, args json.RawMessage, noLog bool) {
	e.module, e.args = module, args
	if noLog || ansiballz.IsAsyncStatus(module) {
		e.markNoLog()
	}
	if e.wrapperIn {
		e.stdin.keepHead(WrapperCaptureLimit)
	}
}

// keep reports whether a stream's bytes are kept: not for no_log.
func (e *Entry) keep() bool { return !e.noLog }

// Seq returns the entry's sequence number (0 for a nil entry).
func (e *Entry) Seq() uint64 {
	if e == nil {
		return 0
	}
	return e.seq
}

// SetTarget sets the target, when it is known only after Begin.
func (e *Entry) SetTarget(target string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.target = target
	e.touch()
}

// SetRoute sets the route, when it is known only after Begin.
func (e *Entry) SetRoute(route string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.route = route
	e.touch()
}

// SetStdin records b as the whole of stdin, replacing what was recorded
// so far. An AnsiballZ wrapper's module and arguments are picked out.
func (e *Entry) SetStdin(b []byte) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stdin.wipe()
	e.stdin = capture{}
	e.stdin.take(b, e.keep() && !e.hideStdin)
	if e.module == "" {
		var s wrapperScanner
		s.write(b)
		s.close()
		if f := s.result(); f.ok || s.marked {
			e.setModule(f.module, f.args, f.noLog || !f.ok)
		}
	}
	e.scan = nil
	e.touch()
}

// HideStdin keeps stdin's content out of the entry (an upload's, which
// may be a no_log task's file): it is still counted, and scanned for a
// module wrapper. Call it before stdin flows.
func (e *Entry) HideStdin() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hideStdin = true
	e.stdin.wipe()
	e.touch()
}

// AppendStdin records more of stdin. An AnsiballZ wrapper's module and
// arguments are picked out as they pass.
func (e *Entry) AppendStdin(b []byte) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stdin.size == 0 && e.module == "" && !e.awaiting {
		e.scan = &wrapperScanner{}
	}
	// Scanned first: a wrapper recognised in this chunk is kept to
	// WrapperCaptureLimit, or not at all when no_log, from its first
	// byte (kept to CaptureLimit and then cut, it cost 64 KiB a task).
	if e.scan != nil {
		e.scan.write(b)
		e.scanned(false)
	}
	e.stdin.take(b, e.keep() && !e.hideStdin)
	e.touch()
}

// scanned takes the scanner's result once there is one, or once stdin
// ends (with end set).
func (e *Entry) scanned(end bool) {
	if end {
		e.scan.close()
	}
	if !e.scan.stopped {
		return
	}
	// A wrapper whose arguments cannot be read may be a no_log one.
	if f := e.scan.result(); (f.ok || e.scan.marked) && e.module == "" {
		e.wrapperIn = true
		e.setModule(f.module, f.args, f.noLog || !f.ok)
	}
	e.scan = nil
}

// AppendStdout records more of stdout.
func (e *Entry) AppendStdout(b []byte) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.out.take(b, e.keep())
	e.touch()
}

// AppendStderr records more of stderr.
func (e *Entry) AppendStderr(b []byte) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err.take(b, e.keep())
	e.touch()
}

// Stdin returns a writer that appends to stdin, for io.TeeReader and
// io.MultiWriter. It never fails.
func (e *Entry) Stdin() io.Writer { return writerFunc(e.AppendStdin) }

// Stdout returns a writer that appends to stdout. It never fails.
func (e *Entry) Stdout() io.Writer { return writerFunc(e.AppendStdout) }

// Stderr returns a writer that appends to stderr. It never fails.
func (e *Entry) Stderr() io.Writer { return writerFunc(e.AppendStderr) }

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}

// SetModuleSource records the module and arguments of the AnsiballZ
// wrapper src (a run file, `python AnsiballZ_x.py`, or what the daemon
// read of stdin after AwaitModule and did not take apart); for a no_log
// module, only its name. It reports whether src was one. It ends
// AwaitModule.
func (e *Entry) SetModuleSource(src []byte) bool {
	if e == nil {
		return false
	}
	var s wrapperScanner
	s.write(src)
	s.close()
	f := s.result()
	e.mu.Lock()
	defer e.mu.Unlock()
	awaited := e.awaiting
	e.awaiting = false
	e.scan = nil
	e.touch()
	if !f.ok && !s.marked {
		if awaited && !e.hideStdin && e.keep() {
			// Not a wrapper after all: stdin is kept as any other, not to
			// the wrapper's limit AwaitModule set.
			e.stdin.wipe()
			e.stdin.limit = 0
			e.stdin.data = append([]byte(nil), src[:min(len(src), CaptureLimit)]...)
		}
		return false
	}
	e.setModule(f.module, f.args, f.noLog || !f.ok)
	return true
}

// SetModule records the module and arguments of the AnsiballZ wrapper w,
// which the daemon took apart (a run file's, or stdin's after
// AwaitModule); for a no_log module, only its name. It ends AwaitModule.
func (e *Entry) SetModule(w *ansiballz.Wrapper) {
	if e == nil {
		return
	}
	var args json.RawMessage
	noLog, ok := false, false
	if params, err := w.Params(); err == nil {
		args, noLog, ok = moduleArgs(params)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// A wrapper whose arguments cannot be read may be a no_log one.
	e.setModule(w.ModuleFQN, args, noLog || !ok)
	e.awaiting = false
	e.scan = nil
	e.touch()
}

// AwaitModule tells the entry that the daemon reads stdin whole and takes
// apart the AnsiballZ wrapper it may be: stdin is not scanned for one,
// and what is kept of it is not shown, until SetModule or
// SetModuleSource says what it was (or Finish, which scans what was
// kept). Call it before stdin flows.
func (e *Entry) AwaitModule() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.awaiting = true
	e.wrapperIn = true
	// Kept to a wrapper's limit as it flows: kept to CaptureLimit and
	// cut at SetModule, it cost 64 KiB a task. SetModuleSource keeps
	// more of what proves not to be a wrapper.
	e.stdin.limit = WrapperCaptureLimit
	e.scan = nil
	e.touch()
}

// MarkRemoteStart records that the remote side started working on the
// invocation: the time before it counts as queued.
func (e *Entry) MarkRemoteStart() {
	if e == nil {
		return
	}
	now := e.j.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.remote.IsZero() {
		e.remote = now
	}
	e.touch()
}

// Finish records the end of the invocation and its exit status. Only the
// first call counts.
func (e *Entry) Finish(exit int) {
	if e == nil {
		return
	}
	now := e.j.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return
	}
	if e.scan != nil {
		e.scanned(true)
	}
	if e.awaiting {
		// Nobody said what stdin was: what was kept of it tells.
		var s wrapperScanner
		s.write(e.stdin.data)
		s.close()
		if f := s.result(); (f.ok || s.marked) && e.module == "" {
			e.setModule(f.module, f.args, f.noLog || !f.ok)
		}
		e.awaiting = false
	}
	e.done, e.exit, e.end = true, exit, now
	if e.module != "" && !e.noLog {
		// A module's own no_log parameters (a password) are known to its
		// argument_spec only: its result masks them (2.22 lists them).
		// Without one (it crashed, or was cut off) no value can be told
		// safe to show.
		if hasResult(e.out.data) {
			for _, v := range maskedArgs(e.args, e.out.data) {
				e.j.red.Add(v)
				wipe(v)
			}
		} else if e.args != nil {
			names := argNames(e.args)
			clear(e.args)
			e.args = names
			if e.wrapperIn {
				// The wrapper on stdin holds the same values.
				e.stdin.wipe()
				e.hideStdin = true
			}
		}
	}
	e.scrub()
}

// view returns the entry's redacted view; finished entries' views are
// cached until a secret is added.
func (e *Entry) view() EntryView {
	red := &e.j.red
	gen := red.generation()
	e.mu.Lock()
	if e.cache != nil && e.cacheGen == gen {
		v := *e.cache
		e.mu.Unlock()
		return v
	}
	end := e.end
	if !e.done {
		end = e.j.now()
	}
	v := EntryView{
		Seq:         e.seq,
		Target:      e.target,
		Route:       e.route,
		Argv:        append([]string(nil), e.argv...),
		Done:        e.done,
		Exit:        e.exit,
		Started:     e.started,
		Total:       end.Sub(e.started),
		ModuleName:  e.module,
		NoLog:       e.noLog,
		StdinHidden: e.hideStdin,
	}
	if e.remote.IsZero() {
		v.Queued = v.Total
	} else {
		v.Queued = e.remote.Sub(e.started)
		v.Remote = end.Sub(e.remote)
	}
	caps := [3]*Capture{&v.Stdin, &v.Stdout, &v.Stderr}
	for i, c := range [3]*capture{&e.stdin, &e.out, &e.err} {
		// Under the lock: scrub and wipe overwrite the bytes in place.
		if i == 0 && (e.awaiting || !e.done && e.wrapperIn && e.args != nil) {
			// Not shown before it is known not to be a no_log task's,
			// nor a module's wrapper before its result says which of
			// its arguments' values are secrets.
			*caps[i] = Capture{Size: c.size, Truncated: c.size > 0}
			continue
		}
		cut := c.size > int64(len(c.data)) && !e.noLog && !(i == 0 && e.hideStdin)
		*caps[i] = Capture{Data: clone(red.redact(c.data, cut)), Size: c.size, Truncated: cut}
	}
	var args json.RawMessage
	if e.done {
		args = clone(e.args)
	} else if e.args != nil {
		// Which values its argument_spec marks no_log (a password) only
		// its result says: until then, the names alone (the module may
		// run on long after a timeout ended its task).
		args = argNames(e.args)
	}
	done, ver := e.done, e.ver
	e.mu.Unlock()

	v.Target = red.String(v.Target)
	v.Route = red.String(v.Route)
	for i, a := range v.Argv {
		v.Argv[i] = red.String(a)
	}
	if args != nil {
		v.ModuleArgs = red.Redact(args)
	}
	if done {
		e.mu.Lock()
		if e.ver == ver {
			c := v
			e.cache, e.cacheGen = &c, gen
		}
		e.mu.Unlock()
	}
	return v
}

// clone copies b unless it is empty.
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
