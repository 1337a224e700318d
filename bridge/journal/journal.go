package journal

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

const (
	// DefaultSize is how many invocations a Journal keeps unless New is
	// told otherwise.
	DefaultSize = 200
	// CaptureLimit is how many bytes of each of stdin, stdout and
	// stderr an entry keeps.
	CaptureLimit = 64 << 10
)

// A Journal keeps the last invocations of the daemon. It is safe for
// concurrent use; a nil *Journal records nothing.
type Journal struct {
	red Redactor
	now func() time.Time

	mu      sync.Mutex
	size    int
	entries []*Entry // oldest first, at most size
	last    uint64   // the last sequence number handed out
}

// New returns a Journal keeping the last n invocations (DefaultSize if n
// is not positive).
func New(n int) *Journal {
	if n <= 0 {
		n = DefaultSize
	}
	return &Journal{size: n, now: time.Now}
}

// AddSecret registers a secret that is never to be shown: every view the
// journal returns from now on, of old entries as well as new ones, has
// it replaced by Mask (see Redactor.Add for the forms matched).
func (j *Journal) AddSecret(s string) {
	if j == nil {
		return
	}
	j.red.Add(s)
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
	if j == nil {
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
	if len(j.entries) == 0 || seq < j.entries[0].seq {
		return nil
	}
	i := seq - j.entries[0].seq // sequence numbers are consecutive
	if i >= uint64(len(j.entries)) {
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
	data []byte
	size int64
}

func (c *capture) append(b []byte) {
	c.size += int64(len(b))
	if room := CaptureLimit - len(c.data); room > 0 {
		c.data = append(c.data, b[:min(room, len(b))]...)
	}
}

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
	e.stdin = capture{}
	e.stdin.append(b)
	if e.module == "" {
		var s wrapperScanner
		s.write(b)
		s.close()
		e.module, e.args, _ = s.result()
	}
	e.scan = nil
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
	if e.stdin.size == 0 && e.module == "" {
		e.scan = &wrapperScanner{}
	}
	e.stdin.append(b)
	if e.scan != nil {
		e.scan.write(b)
		e.scanned(false)
	}
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
	if m, a, ok := e.scan.result(); ok && e.module == "" {
		e.module, e.args = m, a
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
	e.out.append(b)
	e.touch()
}

// AppendStderr records more of stderr.
func (e *Entry) AppendStderr(b []byte) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err.append(b)
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
// wrapper src (a run file, `python AnsiballZ_x.py`). It reports whether
// src was one.
func (e *Entry) SetModuleSource(src []byte) bool {
	if e == nil {
		return false
	}
	m, a, ok := DecodeAnsiballZ(src)
	if !ok {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.module, e.args = m, a
	e.scan = nil
	e.touch()
	return true
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
	e.done, e.exit, e.end = true, exit, now
	e.touch()
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
		Seq:        e.seq,
		Target:     e.target,
		Route:      e.route,
		Argv:       append([]string(nil), e.argv...),
		Done:       e.done,
		Exit:       e.exit,
		Started:    e.started,
		Total:      end.Sub(e.started),
		ModuleName: e.module,
	}
	if e.remote.IsZero() {
		v.Queued = v.Total
	} else {
		v.Queued = e.remote.Sub(e.started)
		v.Remote = end.Sub(e.remote)
	}
	raw := [3]capture{e.stdin, e.out, e.err}
	args := e.args
	done, ver := e.done, e.ver
	e.mu.Unlock()

	// Captures only grow (or are replaced), so the prefixes taken above
	// stay valid without the lock.
	caps := [3]*Capture{&v.Stdin, &v.Stdout, &v.Stderr}
	for i, c := range raw {
		cut := c.size > int64(len(c.data))
		*caps[i] = Capture{Data: clone(red.redact(c.data, cut)), Size: c.size, Truncated: cut}
	}
	v.Target = red.String(v.Target)
	v.Route = red.String(v.Route)
	for i, a := range v.Argv {
		v.Argv[i] = red.String(a)
	}
	if args != nil {
		v.ModuleArgs = clone(red.Redact(args))
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
