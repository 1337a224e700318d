package bridge

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	shellquote "github.com/kballard/go-shellquote"
)

// routeDD is Ansible's piped transfer (`dd of=PATH bs=65536`, the
// transfer method piped), written through SFTP atomically instead of by
// dd; into a held temp dir, kept in memory. A connection whose sftp
// subsystem cannot be had runs the dd (nosftp.go).
const routeDD = "dd"

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

// serveDD writes stdin to dst atomically and reports like dd does.
func (r *request) serveDD() int {
	ctx, iv, t, dst := r.ctx, r.iv, r.t, r.ddDst
	c, sc, err := t.useSFTP(ctx, iv)
	var ns *noSFTPError
	if errors.As(err, &ns) {
		// Stock's dd runs in a session of its own, sftp or none.
		t.countSlow(iv, "dd of=: "+ns.reason()+": dd runs on the target, as with stock")
		iv.entry.HideStdin() // as below: it may be a no_log task's file
		return r.execDD(dst)
	}
	if err != nil {
		r.count(routeDD)
		return connFailure(iv, err)
	}
	defer c.release()
	r.count(routeDD)
	// Which task an upload belongs to cannot be told: a no_log task's
	// file (copy content=) must not stay behind, so no upload's does.
	iv.entry.HideStdin()
	if err := iv.accept(""); err != nil {
		return fakessh.ExitSSHError
	}
	start := time.Now()
	var n int64
	held, rest, err := false, io.Reader(iv.stdin), error(nil)
	if iv.getenv(FastPathEnv) != "0" {
		held, rest, err = holdUpload(t, sc, iv, dst, iv.stdin, -1, 0o666&^0o022)
	}
	if err == nil && !held {
		n, err = putAtomic(sc, dst, rest, 0o666)
	}
	t.bytesIn.Add(n)
	if err != nil {
		_, _ = io.Copy(io.Discard, iv.stdin)
		iv.errorf("dd: failed to open '%s': %s", dst, sftpErrText(err))
		return 1
	}
	full, part := n/65536, 0
	if n%65536 != 0 {
		part = 1
	}
	secs := time.Since(start).Seconds()
	_, _ = fmt.Fprintf(iv.stderr(), "%d+%d records in\n%d+%d records out\n%d bytes copied, %.6g s, %s/s\n",
		full, part, full, part, n, secs, humanRate(float64(n)/max(secs, 1e-9)))
	return 0
}

// execDD runs the dd command itself. An upload into a temp dir of
// Ansible's on the target is noted as holdUpload notes it, once dd has
// written it: a module wrapper then runs from memory.
func (r *request) execDD(dst string) int {
	if err := r.t.materializeHeld(r.ctx, r.iv); err != nil {
		return materializeFailure(r.iv, err)
	}
	r.count(routeExec)
	var opts execOpts
	st, name := r.t.house.lookup(dst)
	if st == nil || name == "" || !st.isOnTarget() {
		return r.exec(r.command, opts)
	}
	type upload struct {
		data []byte
		size int64
	}
	read := make(chan upload, 1) // stdin read to its end
	opts.wrapStdin = func(in io.Reader) io.Reader {
		return &captureReader{r: in, keep: strings.HasPrefix(name, "AnsiballZ_"), done: func(b []byte, n int64) { read <- upload{b, n} }}
	}
	code := r.exec(r.command, opts)
	select {
	case u := <-read:
		if code == 0 {
			st.noteUpload(name, u.data, u.size, 0o666&^0o022)
		}
	default: // dd ended before its input did
	}
	return code
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
