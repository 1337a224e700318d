package bridge

// A module run in an interpreter, shared by the module and become routes:
// the held or piped wrapper, the request, its result, and what ends it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path"
	"strings"
	"sync"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
)

// maxPipedModule bounds how much piped stdin is read to look for an
// AnsiballZ wrapper before the command is passed through instead.
const maxPipedModule = 64 << 20

// taskContext is the context of a command run in an interpreter. With a
// PTY it ends when the shim goes away, and the interpreter kills the
// task's process group: sshd hangs up a stock session's PTY when its
// channel closes, and the command dies of SIGHUP. Without a PTY the task
// runs on, as a stock command does once its channel closes (docs/limits.md,
// "When a client dies"); so does one whose become tool runs it in a
// session of its own (ownSession: su -c), which the hangup ends instead.
func (r *request) taskContext(pty, ownSession bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.ctx)
	if !pty {
		return ctx, cancel
	}
	r.signalLine()
	if ownSession {
		return ctx, cancel
	}
	gone := r.iv.hangup()
	go func() {
		select {
		case <-gone:
			r.iv.log.Info("shim gone under a task with a PTY; killing the task as sshd's hangup would")
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// heldWrapper returns the AnsiballZ wrapper at script taken apart, if
// the bridge has its content; else nil.
func (t *target) heldWrapper(script string) *ansiballz.Wrapper {
	st, name := t.house.lookup(script)
	if st == nil || name == "" {
		return nil
	}
	f, ok := st.file(name)
	if !ok {
		return nil
	}
	w, err := ansiballz.Parse(f.data)
	if err != nil {
		return nil
	}
	return w
}

// startupEnv names a variable of env that a process reads as it starts,
// which a task forked from a running interpreter cannot take: python's
// PYTHON* (PYTHONPATH, PYTHONUTF8, ...) and the locale's LC_CTYPE, which
// decides the C locale's coercion and UTF-8 mode and the encodings of
// files, names and stdio; the dynamic loader's LD_* (LD_LIBRARY_PATH for
// a library a module loads) and glibc's GLIBC_TUNABLES. "" if none. (TZ
// the interpreter applies: tzset.)
func startupEnv(env [][2]string) string {
	for _, kv := range env {
		switch k := kv[0]; {
		case strings.HasPrefix(k, "PYTHON"), strings.HasPrefix(k, "LD_"),
			k == "LC_ALL", k == "LC_CTYPE", k == "LANG", k == "GLIBC_TUNABLES":
			return k
		}
	}
	return ""
}

// slowNoLogEnv is why a no_log module step with an `environment:` ran in
// a python of its own: its values would reach the interpreter, which
// overwrites them once handled only where they are ASCII (forget_str).
const slowNoLogEnv = "a no_log task's environment: the module runs in a python of its own, as with stock, so that its values end with it"

// slowAsyncEnv is why an async_status step with an `environment:` ran in
// a python of its own: Ansible polls an async task with one built with the
// task's environment but not its no_log, so the values may be a no_log
// task's.
const slowAsyncEnv = "an async_status poll's environment: (its task's, which may be no_log): the module runs in a python of its own, as with stock, so that its values end with it"

// secretEnv says why a module step's VAR=value prefixes may be a no_log
// task's (its arguments say so or cannot be read, or it polls another
// task), or "".
func secretEnv(c ansibleCmd, w *ansiballz.Wrapper) string {
	switch {
	case len(c.env) == 0:
		return ""
	case ansiballz.IsAsyncStatus(w.ModuleFQN):
		return slowAsyncEnv
	case !w.PlainArgs():
		return slowNoLogEnv
	}
	return ""
}

// slowNoPTY is why a step asking for a terminal ran as sent.
const slowNoPTY = "sshd refuses this login a terminal (no-pty, restrict, PermitTTY no): a -tt step runs as sent, without one, as with stock"

// terminalRefused tells whether a step that asks for a terminal must run
// as sent (exec) rather than on a terminal of the bridge's own: sshd
// refuses this login one (or could not be asked), and then it runs
// without one, as stock's does. err is a login that failed, already
// reported as ssh reports it.
func (r *request) terminalRefused() (bool, error) {
	if !r.tty() {
		return false, nil
	}
	c, err := r.t.use(r.ctx, r.iv, func(*sshConn) error { return nil })
	if err != nil {
		return true, err
	}
	defer c.release()
	ok, err := c.ptyGranted()
	if err != nil {
		r.iv.log.WithError(err).Info("whether sshd grants a terminal is not known: the step runs as sent")
		return true, nil
	}
	if !ok {
		r.t.countSlow(r.iv, slowNoPTY)
	}
	return !ok, nil
}

// slowStartupEnv is why a module step ran in a python of its own.
const slowStartupEnv = "environment a process reads as it starts (PYTHON*, LANG, LC_ALL, LC_CTYPE, LD_*, GLIBC_TUNABLES): the module runs in a python of its own, as with stock"

// moduleRequest is the interpreter request for a module run: the wrapper
// taken apart, the VAR=value prefixes, a PTY as -tt asks, the shell
// that would have run the python (its death by a signal is that shell's
// to report), and, if withDirs, the held temp dirs the module needs
// (neededDirs).
// It also returns the held dirs the request writes to the target, as of
// which change, for moduleResult to pass to markOnTarget; an rm of them
// waits until the agent has written them (req.Written), not for the
// module's end.
func (r *request) moduleRequest(c ansibleCmd, w *ansiballz.Wrapper, shell string, withDirs bool) (interp.ModuleRequest, []heldSnapshot) {
	iv, t := r.iv, r.t
	req := interp.ModuleRequest{Wrapper: w, ScriptPath: c.script, Shell: shell}
	if len(c.env) > 0 {
		req.Env = map[string]string{}
		for _, kv := range c.env {
			req.Env[kv[0]] = kv[1]
		}
	}
	var held []heldSnapshot
	if withDirs {
		own, needed := t.neededDirs(c, w)
		for _, h := range needed {
			skip := ""
			if h == own && !keepRemoteFiles(w) {
				skip = path.Base(c.script)
			}
			dirs, files, changes := h.onTargetSpec(skip)
			req.Dirs = append(req.Dirs, dirs...)
			req.Files = append(req.Files, files...)
			held = append(held, heldSnapshot{h, changes})
		}
	}
	if len(held) > 0 {
		// Once: moduleResult calls it too, for a run the agent never
		// wrote (an error, a cancel), and a run may be tried twice.
		var once sync.Once
		req.Written = func() {
			once.Do(func() {
				for _, h := range held {
					h.st.written(h.changes)
				}
			})
		}
	}
	if r.tty() {
		req.PTY = &interp.PTY{Term: iv.getenv("TERM"), Rows: iv.hello.Rows, Cols: iv.hello.Cols}
	}
	return req, held
}

// neededDirs returns the held temp dir the module's script is in (own,
// nil if piped) and the held dirs the run writes to the target: own and
// those its parameters or environment name (a piped copy finds its
// source there). A concurrent run's dirs are left alone: written by
// this run, they could reach the target after that run's rm, and that
// run's next module would no longer find its wrapper held. Parameters
// the bridge cannot read mean every held dir.
func (t *target) neededDirs(c ansibleCmd, w *ansiballz.Wrapper) (own *sharedTemp, dirs []*sharedTemp) {
	if c.script != "" {
		own, _ = t.house.lookup(c.script)
	}
	held := t.house.held()
	if len(held) == 0 || len(held) == 1 && held[0] == own {
		return own, held // the usual case: no parameters to read
	}
	names, ok := namedPaths(w)
	for _, kv := range c.env {
		names += "\x00" + kv[1]
	}
	for _, h := range held {
		if h == own || !ok || strings.Contains(names, h.dir) {
			dirs = append(dirs, h)
		}
	}
	return own, dirs
}

// namedPaths returns the string values of a wrapper's module parameters,
// NUL-separated; false if they cannot be read.
func namedPaths(w *ansiballz.Wrapper) (string, bool) {
	js, err := w.Params()
	if err != nil {
		return "", false
	}
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		return "", false
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v)
			b.WriteByte(0)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				b.WriteString(k)
				b.WriteByte(0)
				walk(e)
			}
		}
	}
	walk(v)
	return b.String(), true
}

// heldSnapshot is a held dir as a module run wrote it to the target.
type heldSnapshot struct {
	st      *sharedTemp
	changes int
}

// moduleResult passes a module run's result to the shim, as ssh would
// have, and returns the exit status.
func (r *request) moduleResult(req interp.ModuleRequest, held []heldSnapshot, res *interp.Result, err error) int {
	iv := r.iv
	if req.Written != nil {
		req.Written()
	}
	for _, h := range held {
		h.st.markOnTarget(h.changes, err == nil)
	}
	if err != nil && errors.Is(err, context.Canceled) && r.ctx.Err() == nil {
		// taskContext ended it: nobody is left to tell.
		iv.log.Info("task killed: the shim went away")
		return fakessh.ExitSSHError
	}
	if err != nil {
		iv.log.WithError(err).Warn("module run in the interpreter failed")
		if errors.Is(err, interp.ErrAgentGone) {
			// The connection (or the interpreter) died under the step:
			// say what ssh says when its master's connection dies.
			r.lostConnection(req.PTY != nil)
			return fakessh.ExitSSHError
		}
		iv.errorf("ansible-bridge: persistent interpreter failed: %v", err)
		return fakessh.ExitSSHError
	}
	if iv.target != nil {
		iv.target.freshness.Add(res.FreshnessCheck.Microseconds())
		if res.PasswdChanged {
			// A home may have moved: the next `echo ~user` runs again.
			iv.target.house.resetAnswers()
		}
	}
	_, _ = iv.stdout().Write(res.Stdout)
	_, _ = iv.stderr().Write(res.Stderr)
	// Passed on: a no_log task's result must not linger in freed memory.
	clear(res.Stdout)
	clear(res.Stderr)
	if req.PTY != nil {
		r.sharedClosed()
	}
	return res.ExitCode
}

// readPiped reads what a pipelined step sends a python on its stdin, and
// it taken apart as recognised does (nil: not a wrapper the bridge runs,
// or stdin failed), and tells the journal what it was. The caller
// overwrites a wrapper's parameters once it has run (Wrapper.Wipe; no
// copy of the stream is kept).
func (t *target) readPiped(iv *invocation, stdin io.Reader) ([]byte, *ansiballz.Wrapper) {
	data, err := readAllOnce(io.LimitReader(stdin, maxPipedModule), int(t.pipedSize.Load()))
	t.pipedSize.Store(int64(len(data)))
	var w *ansiballz.Wrapper
	if err == nil {
		w = t.recognised(iv, data)
	}
	if w != nil {
		iv.entry.SetModule(w)
	} else {
		iv.entry.SetModuleSource(data)
	}
	return data, w
}

// readAllOnce is io.ReadAll without the copies its growing buffer
// leaves in freed memory (a wrapper holds its task's arguments, perhaps
// no_log ones). It reads into one buffer a little larger than hint (the
// last wrapper's size: the next is the same module's, or one like it),
// and should that fill, into one twice as large, overwriting the first.
func readAllOnce(r io.Reader, hint int) ([]byte, error) {
	buf := make([]byte, 0, max(hint+hint/8+4<<10, 64<<10))
	for {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), 2*cap(buf))
			copy(grown, buf)
			clear(buf)
			buf = grown
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// keepRemoteFiles tells whether the task runs with ANSIBLE_KEEP_REMOTE_FILES,
// which Ansible passes in the module's internal arguments.
func keepRemoteFiles(w *ansiballz.Wrapper) bool {
	return bytes.Contains(w.ParamsLiteral(), []byte(`"_ansible_keep_remote_files": true`))
}

// lostConnection tells the shim what an ssh multiplexing client prints
// when its master's connection dies under a session: "Shared connection to
// HOST closed." with a terminal, nothing without (Ansible always runs ssh
// with ControlMaster, so that is what stock shows).
func (r *request) lostConnection(tty bool) {
	if tty {
		r.sharedClosed()
	}
}

// ttNoTerminal: -tt without a terminal, as Ansible runs modules when
// pipelining is off. Only a module run from a held file is served then.
func (r *request) ttNoTerminal() bool { return r.inv.TTY >= 2 && !r.iv.hello.StdinTTY }
