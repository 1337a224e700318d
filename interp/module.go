package interp

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"

	"compress/zlib"
)

// ErrNotAnsiballZ: the wrapper given to RunModule holds a zip this
// package cannot decode.
var ErrNotAnsiballZ = errors.New("interp: not an AnsiballZ wrapper")

// zipMarker replaces the ZIPDATA literal in templates; agent.py's
// ZIP_MARKER is the same (TestAgentConstants).
const zipMarker = "@@ANSIBLE_BRIDGE_ZIPDATA@@"

// moduleRun is what RunModule sends of a wrapper: its zip, decoded, and
// its template (ansiballz.Wrapper.Template).
type moduleRun struct {
	// zip is the decoded module zip (module_utils and the module); it may
	// be shared with other runs and must not be modified.
	zip  []byte
	hash [32]byte // SHA-256 of zip
	// tpl is the wrapper with the zip literal's text replaced by
	// zipMarker, and where its per-task parts and payload lines are.
	tpl     ansiballz.Template
	fqn     string
	payload string // ansiballz.Wrapper.PayloadName
	// noTwin: the agent had no zip with this one's files; send it whole.
	noTwin bool
}

// prepare decodes w's zip and makes its template.
func prepare(w *ansiballz.Wrapper) (*moduleRun, error) {
	zip, hash, err := decodeZip(w.Zip())
	if err != nil {
		return nil, err
	}
	return &moduleRun{zip: zip, hash: hash, tpl: w.Template(zipMarker), fqn: w.ModuleFQN, payload: w.PayloadName}, nil
}

// zipCacheSize is how many decoded ZIPDATA literals decodeZip keeps.
const zipCacheSize = 8

// zipCache holds the last ZIPDATA literals decoded, most recent first: a
// playbook's tasks send the same module zip again and again, and decoding
// and hashing its ~140 KB each time cost ~0.2 ms of daemon CPU a task.
// Full, it holds ~2 MB, which an idle daemon need not keep (ForgetZips).
var zipCache struct {
	mu      sync.Mutex
	entries []decodedZip
}

// ForgetZips empties the cache of decoded module zips.
func ForgetZips() {
	zipCache.mu.Lock()
	defer zipCache.mu.Unlock()
	zipCache.entries = nil
}

// ZipsCached is how many decoded module zips the cache holds.
func ZipsCached() int {
	zipCache.mu.Lock()
	defer zipCache.mu.Unlock()
	return len(zipCache.entries)
}

type decodedZip struct {
	b64  []byte
	zip  []byte
	hash [32]byte
}

// decodeZip decodes a ZIPDATA literal and hashes the zip. The zip it
// returns may be shared with other runs: it must not be modified.
func decodeZip(b64 []byte) ([]byte, [32]byte, error) {
	zipCache.mu.Lock()
	for i, e := range zipCache.entries {
		if bytes.Equal(e.b64, b64) {
			copy(zipCache.entries[1:i+1], zipCache.entries[:i])
			zipCache.entries[0] = e
			zipCache.mu.Unlock()
			return e.zip, e.hash, nil
		}
	}
	zipCache.mu.Unlock()
	zip := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Decode(zip, b64)
	if err != nil {
		return nil, [32]byte{}, fmt.Errorf("%w: ZIPDATA: %w", ErrNotAnsiballZ, err)
	}
	zip = zip[:n]
	// The agent re-encodes the zip, so the text must be canonical.
	if base64.StdEncoding.EncodedLen(n) != len(b64) {
		return nil, [32]byte{}, fmt.Errorf("%w: ZIPDATA is not canonical base64", ErrNotAnsiballZ)
	}
	e := decodedZip{b64: bytes.Clone(b64), zip: zip, hash: sha256.Sum256(zip)}
	zipCache.mu.Lock()
	zipCache.entries = append([]decodedZip{e}, zipCache.entries[:min(len(zipCache.entries), zipCacheSize-1)]...)
	zipCache.mu.Unlock()
	return e.zip, e.hash, nil
}

// DirSpec is a directory RunModule creates (with missing parents) first.
type DirSpec struct {
	Path string
	Mode os.FileMode
}

// FileSpec is a file RunModule writes (atomically) first.
type FileSpec struct {
	Path string
	Data []byte
	Mode os.FileMode
}

// ModuleRequest is one AnsiballZ module run.
type ModuleRequest struct {
	// Wrapper is the AnsiballZ_*.py source as Ansible generated it,
	// taken apart by package ansiballz.
	Wrapper *ansiballz.Wrapper
	// ScriptPath is "" when the wrapper was piped on stdin (pipelining),
	// else the path it would have had on disk; it becomes sys.argv[0]
	// and __main__.__file__ as python would set them.
	ScriptPath string
	// Env holds the VAR=value prefixes of Ansible's command line, applied
	// on top of the agent's environment.
	Env map[string]string
	// Dirs are created if missing before the run (e.g. the task's
	// ansible-tmp dir).
	Dirs []DirSpec
	// Files are written atomically (hidden temp, fsync, rename) before
	// the run.
	Files []FileSpec
	// Written, if set, is called once the agent has written Dirs and
	// Files, as the task starts (not at all if it did not get that far).
	// It runs in the client's reader and must not block.
	Written func()
	// PTY, if set, runs the module on a new pseudo-terminal as sshd
	// does for ssh -tt (Ansible without pipelining); nil: pipes.
	PTY *PTY
	// Owner, if set, is the uid and gid Dirs and Files are given (an
	// agent running as root writes the login user's temp dirs).
	Owner *[2]int
	// IgnoreEnvChange runs the module even if the login environment
	// changed (see ErrRestart).
	IgnoreEnvChange bool
	// WatchPolicy asks whether, once the module has run, what the become
	// tools read (sudoers, PAM, passwords, groups) differs from what the
	// agent saw at its start (Result.PolicyChanged).
	WatchPolicy bool
	// Shell is the shell stock runs the module's python under (its -c):
	// if that python dies of a signal, the agent adds what this shell
	// would print about it (dash's "Killed", ...) to the output.
	Shell string
}

// PTY asks for a pseudo-terminal, as an ssh client does with -t: the
// process gets the terminal's slave as stdin, stdout and stderr and (unless
// NotControlling) as its controlling terminal (it is a session leader), TERM=Term (not set if
// Term is empty) and SSH_TTY=/dev/pts/N in its environment (under the
// request's Env), and the kernel's default terminal modes (ONLCR: output
// LF becomes CRLF; ECHO). Its output, stderr included, comes back as
// stdout; stderr stays empty.
type PTY struct {
	// Term is the terminal type, the client's TERM.
	Term string
	// Rows and Cols are the window size; left at 0x0 unless both are > 0.
	Rows, Cols int
	// NotControlling leaves the terminal the command's stdio only, not its
	// controlling terminal: su -c runs its command in a session of its own.
	NotControlling bool
}

// ptyJSON is a PTY on the wire.
type ptyJSON struct {
	Term string `json:"term"`
	Rows int    `json:"rows"`
	Cols int    `json:"cols"`
	// NoCTTY: PTY.NotControlling.
	NoCTTY bool `json:"noctty,omitempty"`
}

func (p *PTY) wire() *ptyJSON {
	if p == nil {
		return nil
	}
	return &ptyJSON{Term: p.Term, Rows: p.Rows, Cols: p.Cols, NoCTTY: p.NotControlling}
}

// Result is the outcome of a process run by the agent.
type Result struct {
	Stdout, Stderr []byte
	// ExitCode is the exit status; 128+n for a process killed by signal n.
	ExitCode int
	// Signal is the signal that killed the process, or 0.
	Signal int
	// FreshnessCheck is what the agent spent, before a module's task,
	// checking that nothing the agent and the module's zygote imported
	// had changed.
	FreshnessCheck time.Duration
	// PolicyChanged: see ModuleRequest.WatchPolicy.
	PolicyChanged bool
	// PasswdChanged: /etc/passwd changed since this agent's last module
	// (a home moved: what `echo ~user` said may be stale).
	PasswdChanged bool
}

type zipState struct {
	// base is the first template sent for this hash, its parameters
	// blanked (blankParams); later ones go as a delta against it.
	base []byte
}

type moduleReq struct {
	Op      string            `json:"op"`
	Hash    string            `json:"hash"`
	Zip     int               `json:"zip"`
	Twin    string            `json:"twin,omitempty"` // in place of the zip: the zipFilesKey of one sent before
	Tpl     int               `json:"tpl"`
	Raw     int               `json:"raw"`               // the template's (or delta's) size decompressed
	FQN     string            `json:"fqn,omitempty"`     // with the whole template: the module its zygote prepares
	Name    string            `json:"name,omitempty"`    // with the zip: the module's name in its payload's file names
	Params  [2]int            `json:"params"`            // the parameters' literal in the template
	Time    *[2]int           `json:"time,omitempty"`    // the task's start time in the template (2.19+: date_time's expression; before, a tuple)
	Payload [][2]int          `json:"payload,omitempty"` // the payload lines in the template (ansiballz.Wrapper.Payload)
	Delta   *[2]int           `json:"delta,omitempty"`   // common prefix and suffix with the base template
	Plain   bool              `json:"plain,omitempty"`   // the delta is sent as it is, not deflated
	Script  string            `json:"script,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Dirs    [][2]any          `json:"dirs,omitempty"`
	Files   [][3]any          `json:"files,omitempty"`
	PTY     *ptyJSON          `json:"pty,omitempty"`
	Owner   *[2]int           `json:"owner,omitempty"`
	NoEnv   bool              `json:"noenv,omitempty"`
	Shell   string            `json:"shell,omitempty"`
	Policy  bool              `json:"policy,omitempty"`
}

// RunModule runs an AnsiballZ module in a child of the zygote for its zip
// (see the package doc). The zip crosses the wire once per agent; later
// runs send only where their template differs from the first one.
func (c *Client) RunModule(ctx context.Context, req ModuleRequest) (*Result, error) {
	w, err := prepare(req.Wrapper)
	if err != nil {
		return nil, err
	}
	res, err := c.runModule(ctx, w, req)
	if errors.Is(err, errNoZip) {
		// The agent lost the zip (should not happen), or has none with
		// its files (its twin was dropped); send it again, whole.
		c.zmu.Lock()
		delete(c.zips, w.hash)
		c.zmu.Unlock()
		w.noTwin = true
		res, err = c.runModule(ctx, w, req)
	}
	clear(w.tpl.Src) // the task's arguments: the base is a copy
	if err != nil {
		return nil, fmt.Errorf("run module %s: %w", w.fqn, err)
	}
	return res, nil
}

// errNoZip: the agent holds no zip for the request's hash (code "nozip").
var errNoZip = errors.New("zip unknown to the agent")

// blankParams returns a copy of tpl with the parameters' literal at span
// replaced by a str literal of spaces of the same length, as agent.py's
// blank_params does: both sides keep this as the base template when the
// first task was no_log, so that neither keeps its arguments for the
// connection's life.
func blankParams(tpl []byte, span [2]int) []byte {
	out := bytes.Clone(tpl)
	if start, stop := span[0], span[1]; start >= 0 && stop-start >= 2 && stop <= len(out) {
		out[start], out[stop-1] = '\'', '\''
		for i := start + 1; i < stop-1; i++ {
			out[i] = ' '
		}
	}
	return out
}

func (c *Client) runModule(ctx context.Context, w *moduleRun, req ModuleRequest) (*Result, error) {
	mr := moduleReq{Op: "module", Hash: hex.EncodeToString(w.hash[:]), Params: w.tpl.Params, Payload: w.tpl.Payload, Script: req.ScriptPath, Env: req.Env, PTY: req.PTY.wire(), Owner: req.Owner, NoEnv: req.IgnoreEnvChange, Shell: req.Shell, Policy: req.WatchPolicy}
	if w.tpl.DateTime[1] != 0 {
		mr.Time = &w.tpl.DateTime
	}
	var fileData [][]byte
	for _, d := range req.Dirs {
		mr.Dirs = append(mr.Dirs, [2]any{d.Path, unixMode(d.Mode)})
	}
	for _, f := range req.Files {
		mr.Files = append(mr.Files, [3]any{f.Path, unixMode(f.Mode), len(f.Data)})
		fileData = append(fileData, f.Data)
	}
	stdout, stderr := &bufSink{}, &bufSink{}
	cl, err := c.newCall(stdout, stderr)
	if err != nil {
		return nil, err
	}
	if len(req.Dirs)+len(req.Files) > 0 {
		c.mu.Lock() // readLoop takes the call under c.mu
		cl.written = req.Written
		c.mu.Unlock()
	}
	// Deciding whether the zip goes and queueing the frame happen under
	// one lock, so the frame carrying the zip precedes any that relies on it.
	c.zmu.Lock()
	st := c.zips[w.hash]
	whole := st == nil // the template goes whole, and the zip or its twin's key with it
	var zip, ctpl []byte
	var files string
	if whole {
		// Ansible builds a module's zip again for every playbook run, its
		// files the same but their time stamps: the agent runs such a
		// twin from the zip it holds (agent.py's zip_entry), so it need
		// not cross the wire again.
		if files = zipFilesKey(w.zip); files != "" && c.held[files] && !w.noTwin {
			mr.Twin = files
		} else {
			zip = w.zip
		}
		mr.FQN, mr.Name = w.fqn, w.payload
		ctpl, err = compress(w.tpl.Src)
		mr.Raw = len(w.tpl.Src)
		// Blanked whatever the task (the agent blanks its copy too): a
		// module's own no_log parameters (a password) are known to its
		// argument_spec only.
		st = &zipState{base: blankParams(w.tpl.Src, w.tpl.Params)}
	} else {
		prefix, suffix := commonEnds(st.base, w.tpl.Src)
		delta := w.tpl.Src[prefix : len(w.tpl.Src)-suffix]
		if len(delta) <= plainDelta {
			// A task's parameters: deflating them cost the daemon more
			// than the bytes it saved.
			ctpl, mr.Plain = delta, true // send copies it into the frame
		} else {
			ctpl, err = compress(delta)
		}
		mr.Raw = len(delta)
		mr.Delta = &[2]int{prefix, suffix}
	}
	if err != nil {
		c.zmu.Unlock()
		c.forget(cl)
		return nil, err
	}
	mr.Zip, mr.Tpl = len(zip), len(ctpl)
	blobs := append([][]byte{zip, ctpl}, fileData...)
	err = c.send(cl, mr, blobs...)
	if err == nil && whole {
		c.zips[w.hash] = st
		if zip != nil {
			c.zipsSent.Add(1)
			if files != "" {
				c.held[files] = true
			}
		}
	}
	c.zmu.Unlock()
	if err != nil {
		return nil, err
	}
	r, err := c.await(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := r.codeErr(); err != nil {
		return nil, err
	}
	switch {
	case r.Error != "":
		return nil, remoteErr("module", "", r)
	case r.Exit == nil:
		return nil, errors.New("agent gave no exit status")
	}
	return &Result{Stdout: stdout.bytes(), Stderr: stderr.bytes(), ExitCode: *r.Exit, Signal: r.Signal,
		FreshnessCheck: time.Duration(r.CheckMicros) * time.Microsecond, PolicyChanged: r.PolicyChanged, PasswdChanged: r.PasswdChanged}, nil
}

// zipFilesKey is what a module zip holds, its time stamps aside, as
// agent.py's zip_files_key reads it: each entry's name, CRC-32 and size,
// hashed. "" if z does not read as a zip.
func zipFilesKey(z []byte) string {
	r, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return ""
	}
	h := sha256.New()
	for _, f := range r.File {
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", f.Name, f.CRC32, f.UncompressedSize64)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// commonEnds returns the lengths of the longest common prefix and suffix of
// a and b that do not overlap in either. Templates of one zip differ in
// their parameters and the wrapper's build time, so what lies between is
// a few KiB at most.
func commonEnds(a, b []byte) (prefix, suffix int) {
	n := min(len(a), len(b))
	for prefix < n && a[prefix] == b[prefix] {
		prefix++
	}
	for suffix < n-prefix && a[len(a)-1-suffix] == b[len(b)-1-suffix] {
		suffix++
	}
	return prefix, suffix
}

// zlibWriters are reused: a new writer allocates its tables, which costs
// more than compressing a template delta.
var zlibWriters = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed)
	return zw
}}

// plainDelta is the largest delta sent as it is (Plain).
const plainDelta = 4096

// compress zlib-compresses data.
func compress(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := zlibWriters.Get().(*zlib.Writer)
	defer zlibWriters.Put(zw)
	zw.Reset(&buf)
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// unixMode converts a FileMode's permission bits to the unix st_mode bits.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}
