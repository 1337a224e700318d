package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/pkg/sftp"
)

// maxHeldFile bounds what a shared temp dir keeps in memory per file;
// bigger uploads write the dir to the target and go there directly.
const maxHeldFile = 16 << 20

// sharedTemp is one of Ansible's ansible-tmp-* directories, created by
// the bridge in answer to Ansible's mkdir and held in memory until
// something needs it on disk.
type sharedTemp struct {
	dir, base string
	created   time.Time

	mu       sync.Mutex
	onTarget bool
	byAgent  bool                 // (being) written by a module run, not writeWith
	becomeAs string               // the become user whose step ran from it, if any
	files    map[string]*heldFile // by base name
	// changes counts uploads and mode changes: a module run that wrote
	// the dir marks it on the target only if nothing changed since it
	// took what to write (onTargetSpec), since a run of the same playbook
	// (another fork, an async step) may be uploading into this one.
	changes int
	// writing counts module runs that took the dir to write and have not
	// written it yet; idle is closed when it drops to 0. rm waits for
	// them (removed from memory only, the dir would reach the target
	// after), but not for their modules to end: an abandoned one (a task
	// timeout) may run on for ever, as stock's does, rm going ahead.
	writing int
	idle    chan struct{}
}

type heldFile struct {
	data     []byte
	mode     fs.FileMode
	size     int64
	mtime    time.Time
	onTarget bool // data was written to the target and dropped here
}

// housekeeping is a target's state for the fast paths: cached answers
// and shared temp dirs.
type housekeeping struct {
	mu    sync.Mutex
	homes map[string]string // `echo ~user` command → its output
	bases map[string]bool   // temp bases known to exist on the target
	temps map[string]*sharedTemp
	// viaBridge: transferKey values under which uploads came through the
	// bridge (transfers.go).
	viaBridge map[string]bool
}

func (h *housekeeping) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.homes, h.bases, h.temps = nil, nil, nil
}

// resetAnswers forgets the cached answers, which a fresh login may give
// differently, but keeps the temp dirs.
func (h *housekeeping) resetAnswers() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.homes, h.bases = nil, nil
}

func (h *housekeeping) home(cmd string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out, ok := h.homes[cmd]
	return out, ok
}

func (h *housekeeping) setHome(cmd, out string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.homes == nil {
		h.homes = map[string]string{}
	}
	h.homes[cmd] = out
}

func (h *housekeeping) baseKnown(base string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bases[base]
}

// knowBase records that base exists on the target.
func (h *housekeeping) knowBase(base string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bases == nil {
		h.bases = map[string]bool{}
	}
	h.bases[base] = true
}

// addTemp registers a temp dir, held in memory until something needs it on
// the target.
func (h *housekeeping) addTemp(base, dir string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.temps == nil {
		h.temps = map[string]*sharedTemp{}
	}
	h.temps[dir] = &sharedTemp{dir: dir, base: base, files: map[string]*heldFile{}, created: time.Now()}
}

// addTempOnTarget registers a temp dir Ansible's own mkdir made on the
// target: uploads into it through the bridge go to the target, and the
// bridge keeps a copy of a module wrapper to run it from memory.
func (h *housekeeping) addTempOnTarget(base, dir string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.temps == nil {
		h.temps = map[string]*sharedTemp{}
	}
	h.temps[dir] = &sharedTemp{dir: dir, base: base, files: map[string]*heldFile{}, created: time.Now(), onTarget: true}
}

func (h *housekeeping) dropTemp(dir string) {
	h.mu.Lock()
	st := h.temps[dir]
	delete(h.temps, dir)
	h.mu.Unlock()
	if st != nil {
		st.wipe()
	}
}

// wipe overwrites the held files' content: Ansible removed the dir, and
// a wrapper in it holds its task's arguments (perhaps no_log ones).
func (st *sharedTemp) wipe() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, f := range st.files {
		clear(f.data)
		f.data = nil
	}
}

// lookup finds the temp dir p is (dir) or is directly in (dir/name).
func (h *housekeeping) lookup(p string) (st *sharedTemp, name string) {
	p = strings.TrimSuffix(p, "/")
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.temps[p]; st != nil {
		return st, ""
	}
	if st := h.temps[path.Dir(p)]; st != nil {
		return st, path.Base(p)
	}
	return nil, ""
}

// mentioned returns the temp dirs whose path occurs in s ("" for all).
func (h *housekeeping) mentioned(s string) []*sharedTemp {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*sharedTemp
	for dir, st := range h.temps {
		if s == "" || strings.Contains(s, dir) {
			out = append(out, st)
		}
	}
	return out
}

// held returns the temp dirs still only in memory.
func (h *housekeeping) held() []*sharedTemp {
	var out []*sharedTemp
	for _, st := range h.mentioned("") {
		if st.held() {
			out = append(out, st)
		}
	}
	return out
}

// held reports whether the dir is still only in memory.
func (st *sharedTemp) held() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.onTarget
}

// hold stores a file put into the held dir; size is its size if known
// (-1: not). It returns false when the dir is on the target (or the file
// too big), and the caller must write to the target instead: errNotHeld
// then carries what was read already.
func (st *sharedTemp) hold(name string, r io.Reader, size int64, mode fs.FileMode) (bool, int64, error) {
	st.mu.Lock()
	if st.onTarget {
		st.mu.Unlock()
		return false, 0, nil
	}
	st.mu.Unlock()
	var buf bytes.Buffer
	if size >= 0 {
		// Read into one buffer of the file's size: a growing one
		// allocates, copies and clears each step (~9 for a wrapper).
		buf.Grow(int(min(size, maxHeldFile)) + bytes.MinRead)
	}
	n, err := io.Copy(&buf, io.LimitReader(r, maxHeldFile+1))
	if err != nil {
		return true, n, err
	}
	if n > maxHeldFile {
		return false, n, errNotHeld{buf.Bytes()}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.onTarget {
		// Another invocation (a concurrent run's passthrough command)
		// wrote the dir to the target while this upload was read: held
		// now, the file would never reach it.
		return false, n, errNotHeld{buf.Bytes()}
	}
	st.files[name] = &heldFile{data: buf.Bytes(), mode: mode, size: n, mtime: time.Now()}
	st.changes++
	return true, n, nil
}

// errNotHeld means an upload goes to the target after all; prefix is what
// was read of it before that was known.
type errNotHeld struct{ prefix []byte }

func (errNotHeld) Error() string { return "upload not held in the bridge" }

// chmodUX applies `chmod u+x` to held paths; false means a path is not
// held (the caller runs the real chmod).
func (st *sharedTemp) chmodUX(name string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.onTarget {
		return false
	}
	if name == "" {
		return true // the dir is 0700 already
	}
	f := st.files[name]
	if f == nil {
		return false
	}
	f.mode |= 0o100
	st.changes++
	return true
}

// file returns a file whose content the bridge has: held, or a copy of
// one written to the target (noteUpload).
func (st *sharedTemp) file(name string) (*heldFile, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	f, ok := st.files[name]
	return f, ok && f.data != nil
}

// ranAs is the become user whose step ran from the dir ("" if none).
func (st *sharedTemp) ranAs() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.becomeAs
}

func (st *sharedTemp) setRanAs(user string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.becomeAs = user
}

func (st *sharedTemp) isOnTarget() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.onTarget
}

// noteUpload records a file written to the target: its size and mode,
// and its content if data is not nil.
func (st *sharedTemp) noteUpload(name string, data []byte, size int64, mode fs.FileMode) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.files[name] = &heldFile{data: data, mode: mode, size: size, mtime: time.Now(), onTarget: true}
}

// heldWriter is one way of writing a held temp dir to the target.
type heldWriter interface {
	// mkdirs makes base as `umask 77 && mkdir -p` would, and dir in it,
	// 0700 even if it was there already.
	mkdirs(base, dir string) error
	// put writes a file, created with its final mode.
	put(name string, data []byte, mode fs.FileMode) error
}

// writeWith writes the dir and its files to the target through w, in
// order, the way Ansible's own commands would have left them: base and
// dir 0700 (umask 77), files with the modes they were given.
func (st *sharedTemp) writeWith(w heldWriter) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.onTarget {
		return nil
	}
	if err := w.mkdirs(st.base, st.dir); err != nil {
		return err
	}
	for _, n := range slices.Sorted(maps.Keys(st.files)) {
		f := st.files[n]
		dst := path.Join(st.dir, n)
		if err := w.put(dst, f.data, f.mode); err != nil {
			return fmt.Errorf("write %s: %w", dst, err)
		}
	}
	st.onTarget = true
	st.dropData()
	return nil
}

// sftpWriter writes through SFTP.
type sftpWriter struct{ sc *sftp.Client }

func (w sftpWriter) mkdirs(base, dir string) error {
	if err := mkdirAllPrivate(w.sc, base); err != nil {
		return fmt.Errorf("mkdir %s: %w", base, err)
	}
	if err := w.sc.Mkdir(dir); err != nil {
		// A module run of a concurrent invocation may have made it (the
		// interpreter writes the dir it runs from): then it is ours.
		if fi, serr := w.sc.Lstat(dir); serr != nil || !fi.IsDir() {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
	}
	if err := w.sc.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return nil
}

func (w sftpWriter) put(name string, data []byte, mode fs.FileMode) error {
	if _, err := putAtomic(w.sc, name, bytes.NewReader(data), mode); err != nil {
		return err
	}
	return w.sc.Chmod(name, mode)
}

// agentWriter writes through an interpreter of the login user.
type agentWriter struct {
	ctx context.Context
	ag  *interp.Client
}

func (w agentWriter) mkdirs(base, dir string) error {
	// Mkdir is mkdir -p: created dirs get 0700, an existing one stays.
	if err := w.ag.Mkdir(w.ctx, base, 0o700); err != nil {
		return fmt.Errorf("mkdir %s: %w", base, err)
	}
	if err := w.ag.Mkdir(w.ctx, dir, 0o700); err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	if err := w.ag.Chmod(w.ctx, dir, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return nil
}

func (w agentWriter) put(name string, data []byte, mode fs.FileMode) error {
	return w.ag.PutFile(w.ctx, name, data, mode)
}

// shellWriter writes through run, which runs a shell script with stdin
// on the target: the login user's mkdir and cat.
type shellWriter func(script string, stdin []byte) error

func (run shellWriter) mkdirs(base, dir string) error {
	if err := run("umask 77 && mkdir -p "+shQuote(base)+" "+shQuote(dir)+" && chmod 700 "+shQuote(dir), nil); err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	return nil
}

func (run shellWriter) put(name string, data []byte, mode fs.FileMode) error {
	p := shQuote(name)
	return run(fmt.Sprintf("umask 77 && cat > %s && chmod %o %s", p, mode.Perm(), p), data)
}

// mkdirAllPrivate is `umask 77 && mkdir -p`: missing parents are 0700.
func mkdirAllPrivate(sc *sftp.Client, dir string) error {
	st, err := sc.Stat(dir)
	if err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s: not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := path.Dir(dir); parent != dir {
		if err := mkdirAllPrivate(sc, parent); err != nil {
			return err
		}
	}
	if err := sc.Mkdir(dir); err != nil {
		return err
	}
	return sc.Chmod(dir, 0o700)
}

// materializeHeld writes held temp dirs to the target before a
// command runs there: every one of them, not only those it names,
// since a module piped on stdin (pipelining with become) names its temp
// dir only in its arguments.
func (t *target) materializeHeld(ctx context.Context, iv *invocation) error {
	t.syncRemovals(ctx)
	pending := t.house.held()
	if len(pending) == 0 {
		return nil
	}
	if ag := t.anyAgent(); ag != nil {
		// The login user's own writes, as Ansible's commands would have
		// made them: sftp's policy is not theirs (internal-sftp -R, -P).
		for _, st := range pending {
			iv.log.WithField("tmp", st.dir).Debug("writing shared temp dir to the target through the interpreter")
			if err := st.writeWith(agentWriter{ctx, ag}); err != nil {
				return err
			}
		}
		return nil
	}
	c, sc, err := t.useSFTP(ctx, iv)
	var ns *noSFTPError
	if errors.As(err, &ns) {
		return t.materializeBySession(ctx, iv, pending, ns)
	}
	if err != nil {
		return err
	}
	defer c.release()
	for _, st := range pending {
		iv.log.WithField("tmp", st.dir).Debug("writing shared temp dir to the target")
		if err := st.writeWith(sftpWriter{sc}); err != nil {
			// sftp's policy (internal-sftp -R, -P) may forbid what the
			// login user's own commands may do; if they may not either,
			// theirs is the error.
			return t.materializeBySession(ctx, iv, pending, err)
		}
	}
	return nil
}

// slowHeldBySession is why a held temp dir was written by shell commands.
const slowHeldBySession = "a held temp dir the target's sftp cannot write (none, read-only, a request it refuses), no interpreter up: written by shell commands"

// materializeBySession writes the pending temp dirs through shell
// commands, sftp having failed (why): the login user's mkdir and cat,
// each in a session of its own, as Ansible's commands would.
func (t *target) materializeBySession(ctx context.Context, iv *invocation, pending []*sharedTemp, why error) error {
	iv.log.WithError(why).Info("sftp cannot write a held temp dir to the target; shell commands write it")
	t.countSlow(iv, slowHeldBySession)
	run := shellWriter(func(script string, stdin []byte) error {
		c, sess, err := t.newSession(ctx, iv, nil)
		if err != nil {
			return err
		}
		defer c.release()
		defer sess.Close()
		if err := sess.Start("/bin/sh -c " + shQuote(script)); err != nil {
			return err
		}
		var errb bytes.Buffer
		read := make(chan struct{})
		go func() {
			_, _ = io.Copy(&errb, sess.Stderr())
			close(read)
		}()
		go func() { _, _ = io.Copy(io.Discard, sess.Stdout()) }()
		in := sess.Stdin()
		_, _ = in.Write(stdin)
		_ = in.Close()
		err = sess.Wait()
		<-read
		if err != nil {
			return fmt.Errorf("%s: %w", strings.TrimSpace(errb.String()), err)
		}
		return nil
	})
	for _, st := range pending {
		if err := st.writeWith(run); err != nil {
			return err
		}
	}
	return nil
}

// shQuote quotes s as one word for sh, and for the login shells that
// take single quotes as sh does (bash, zsh, fish, csh alike).
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// syncRemovals waits until the interpreter has run the removals sent
// without an answer, so that a command reaching the target another way
// (a session of its own, SFTP) sees the temp dirs gone, as after stock's
// rm. The agent serves requests in order: the ping's answer comes after
// them.
func (t *target) syncRemovals(ctx context.Context) {
	ag := t.unsynced.Swap(nil)
	if ag == nil {
		return
	}
	if err := ag.Ping(ctx); err != nil {
		t.log.WithError(err).Debug("waiting for deferred removals")
	}
}

// onTargetSpec is what a module run must create before it starts: the
// dir (modules may use it as their tmpdir) and its files but skip (the
// wrapper, which runs from memory), and the change count to pass to
// markOnTarget once they are written. Unless the dir is on the target
// already, the run counts as writing it until written.
func (st *sharedTemp) onTargetSpec(skip string) ([]interp.DirSpec, []interp.FileSpec, int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.onTarget {
		return nil, nil, -1
	}
	st.byAgent = true
	if st.writing == 0 {
		st.idle = make(chan struct{})
	}
	st.writing++
	dirs := []interp.DirSpec{{Path: st.dir, Mode: 0o700}}
	var files []interp.FileSpec
	names := slices.Sorted(maps.Keys(st.files))
	for _, n := range names {
		if n == skip {
			continue
		}
		f := st.files[n]
		files = append(files, interp.FileSpec{Path: path.Join(st.dir, n), Data: f.data, Mode: f.mode})
	}
	return dirs, files, st.changes
}

// written records that a module run that took the dir to write
// (onTargetSpec, change count changes) has written it, or will not.
func (st *sharedTemp) written(changes int) {
	if changes < 0 {
		return // on the target already: the run took nothing
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.writing--; st.writing == 0 {
		close(st.idle)
	}
}

// markOnTarget records that a module run that took the dir to write
// (onTargetSpec, change count changes) is over: written if ok. If the dir
// changed since, it stays held: the next command that needs it writes it
// whole (over what is there).
func (st *sharedTemp) markOnTarget(changes int, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if changes < 0 {
		return // on the target already: the run took nothing
	}
	if ok && !st.onTarget && st.changes == changes {
		st.onTarget = true
		st.dropData()
	}
}

// settled waits until no module run is writing the dir to the target
// (their modules may still run).
func (st *sharedTemp) settled(ctx context.Context) error {
	st.mu.Lock()
	idle := st.idle
	busy := st.writing > 0
	st.mu.Unlock()
	if !busy {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dropData frees the files' contents once they are on the target,
// keeping what the debug mount lists. st.mu is held.
func (st *sharedTemp) dropData() {
	for _, f := range st.files {
		f.data, f.onTarget = nil, true
	}
}

func (st *sharedTemp) writtenByAgent() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byAgent
}
