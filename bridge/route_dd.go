package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/interp"
	shellquote "github.com/kballard/go-shellquote"
)

// routeDD is Ansible's piped transfer (`dd of=PATH bs=65536`, the
// transfer method piped). Into a held temp dir it is kept in memory;
// anything else is the real dd, run by the login user's interpreter when
// one is up (no session to open), else in a session of its own, as stock
// runs it. Never through SFTP: sshd's sftp subsystem has a policy of its
// own (absent, read-only, a umask, request lists: internal-sftp -R -u
// -P -p) that a shell command's dd does not meet.
const routeDD = "dd"

// slowDDNoInterpreter is why a dd ran in a session of its own.
const slowDDNoInterpreter = "dd of=: no interpreter of the login user is up: dd runs in a session of its own, as with stock"

var ddRoute = route{
	name:  routeDD,
	match: func(r *request) bool { return r.ddDst != "" },
	serve: func(r *request) (int, bool) { return r.serveDD(), true },
}

// ddTarget recognises Ansible's piped transfer, `dd of=PATH bs=65536`.
func ddTarget(command string) (string, bool) {
	words, err := shellquote.Split(command)
	if err != nil || len(words) != 3 || words[0] != "dd" || words[2] != "bs=65536" ||
		!strings.HasPrefix(words[1], "of=") || len(words[1]) == 3 {
		return "", false
	}
	return words[1][3:], true
}

// serveDD holds an upload into a held temp dir and reports like dd does;
// anything else runs the dd (runDD).
func (r *request) serveDD() int {
	iv, t, dst := r.iv, r.t, r.ddDst
	// Which task an upload belongs to cannot be told: a no_log task's
	// file (copy content=) must not stay behind, so no upload's does.
	iv.entry.HideStdin()
	st, name := t.house.lookup(dst)
	if st == nil || name == "" {
		return r.runDD(nil)
	}
	// An upload into Ansible's temp dir: its transfers come through the
	// bridge (transfers.go).
	t.house.learnTransfers(transferKey(iv.hello.HelloMsg))
	umask, known := t.loginUmask()
	if st.isOnTarget() || !known || iv.getenv(FastPathEnv) == "0" {
		return r.runDD(nil)
	}
	if err := iv.accept(""); err != nil {
		return fakessh.ExitSSHError
	}
	start := time.Now()
	// dd's open(O_CREAT, 0666) under the login shell's umask.
	ok, n, err := st.hold(name, iv.stdin, -1, 0o666&^umask)
	var read errNotHeld
	switch {
	case ok && err == nil:
		r.count(routeDD)
		t.bytesIn.Add(n)
		ddReport(iv, n, time.Since(start))
		return 0
	case ok && !errors.As(err, &read):
		// The shim's stdin failed; ssh would not have sent it whole.
		iv.log.WithError(err).Warn("reading a dd upload")
		return fakessh.ExitSSHError
	}
	// Too big to hold, or the dir went to the target meanwhile.
	return r.runDD(read.prefix)
}

// ddReport is what dd prints on stderr for n bytes copied in d.
func ddReport(iv *invocation, n int64, d time.Duration) {
	full, part := n/65536, 0
	if n%65536 != 0 {
		part = 1
	}
	secs := d.Seconds()
	_, _ = fmt.Fprintf(iv.stderr(), "%d+%d records in\n%d+%d records out\n%d bytes copied, %.6g s, %s/s\n",
		full, part, full, part, n, secs, humanRate(float64(n)/max(secs, 1e-9)))
}

// runDD runs the dd command itself, prefix (read from stdin already)
// first: in the login user's interpreter if one is up, else in a session.
// An upload into a temp dir of Ansible's on the target is noted as
// holdUpload notes one, once dd has written it: a module wrapper then
// runs from memory.
func (r *request) runDD(prefix []byte) int {
	ctx, iv, t := r.ctx, r.iv, r.t
	if err := t.materializeHeld(ctx, iv); err != nil {
		return materializeFailure(iv, err)
	}
	type upload struct {
		data []byte
		size int64
	}
	read := make(chan upload, 1) // stdin read to its end
	wrap := func(in io.Reader) io.Reader { return in }
	st, name := t.house.lookup(r.ddDst)
	if st != nil && name != "" && st.isOnTarget() {
		wrap = func(in io.Reader) io.Reader {
			return &captureReader{r: in, keep: strings.HasPrefix(name, "AnsiballZ_"), done: func(b []byte, n int64) { read <- upload{b, n} }}
		}
	}
	var code int
	if ag := t.anyAgent(); ag != nil {
		code = r.ddIn(ag, prefix, wrap)
	} else {
		t.countSlow(iv, slowDDNoInterpreter)
		r.count(routeExec)
		code = r.exec(r.command, execOpts{stdinPrefix: prefix, wrapStdin: wrap})
	}
	select {
	case u := <-read:
		if code == 0 {
			umask, _ := t.loginUmask()
			st.noteUpload(name, u.data, u.size, 0o666&^umask)
		}
	default: // dd ended before its input did
	}
	return code
}

// ddIn runs the dd command in ag, prefix first, its stdin through wrap;
// ag is the login user's interpreter: started
// by the login shell, it has that shell's umask, environment and login
// directory, as the dd of a session would.
func (r *request) ddIn(ag *interp.Client, prefix []byte, wrap func(io.Reader) io.Reader) int {
	iv := r.iv
	r.count(routeDD)
	if err := iv.accept(""); err != nil {
		return fakessh.ExitSSHError
	}
	n := &countReader{r: wrap(io.MultiReader(bytes.NewReader(prefix), iv.stdin))}
	code, err := ag.Exec(r.ctx, interp.ExecRequest{Command: r.command, Stdin: n, Stdout: iv.stdout(), Stderr: iv.stderr()})
	r.t.bytesIn.Add(n.n)
	if err != nil {
		if errors.Is(err, interp.ErrAgentGone) {
			iv.log.WithError(err).Warn("dd in the interpreter failed")
			return fakessh.ExitSSHError
		}
		iv.errorf("ansible-bridge: persistent interpreter failed: %v", err)
		return fakessh.ExitSSHError
	}
	return code
}

// countReader counts what is read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// loginUmask is the umask the login shell gives its commands, as a
// running interpreter of the login user reports it; false if none is up.
func (t *target) loginUmask() (fs.FileMode, bool) {
	ag := t.anyAgent()
	if ag == nil || ag.Info().Umask == nil {
		return 0o022, false
	}
	return fs.FileMode(*ag.Info().Umask) & 0o777, true
}

func humanRate(bps float64) string {
	units := []string{"B", "kB", "MB", "GB"}
	i := 0
	for bps >= 1000 && i < len(units)-1 {
		bps /= 1000
		i++
	}
	return fmt.Sprintf("%.3g %s", bps, units[i])
}
