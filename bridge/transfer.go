package bridge

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/pkg/sftp"
)

// connectSFTP resolves inv, and returns a batch run on the SFTP client
// of one of its target's connections, in the remote login directory;
// release must be called when done.
func (s *Server) connectSFTP(ctx context.Context, iv *invocation, inv *fakessh.SSHInvocation, route string) (b *batchRun, release func(), err error) {
	_, t, err := s.resolveTarget(iv, inv)
	if err != nil {
		return nil, nil, err
	}
	t.countRoute(iv, route)
	iv.log = iv.log.WithField("route", route)
	c, sc, err := t.useSFTP(ctx, iv)
	if err != nil {
		return nil, nil, err
	}
	b = &batchRun{iv: iv, t: t, sc: sc, lcwd: iv.hello.Cwd, rcwd: c.home, home: c.home, fast: iv.getenv(FastPathEnv) != "0"}
	return b, c.release, nil
}

// serveSFTP runs an sftp batch (-b) over the target's SFTP channel when
// the bridge serves every command in it as sftp would (see
// notServedInFull); the real sftp runs any other batch.
func (s *Server) serveSFTP(ctx context.Context, iv *invocation) int {
	inv := iv.hello.SFTP
	if inv == nil || len(inv.Unsupported) > 0 || len(inv.SSH.Unsupported) > 0 {
		iv.fallback("sftp arguments the bridge does not serve")
		return -1
	}
	if reason := sftpUnserved(inv); reason != "" {
		iv.handBack(nil, reason)
		return -1
	}
	b, release, err := s.connectSFTP(ctx, iv, &inv.SSH, routeSFTP)
	if err != nil {
		return transferNotServed(iv, err)
	}
	defer release()
	var cmds []fakessh.BatchCommand
	if inv.BatchFile != "-" {
		// Read before anything is accepted: the real sftp may take it.
		// Only a regular file: a FIFO's batch, as stdin's, sftp runs as
		// it comes; and /dev/stdin or /dev/fd/N would be the daemon's.
		name := localPath(iv, inv.BatchFile)
		if why := localUnserved(name); why != "" {
			iv.handBack(nil, "sftp: a batch file that is "+why)
			return -1
		}
		if st, err := os.Stat(name); err == nil && !st.Mode().IsRegular() {
			iv.handBack(nil, "sftp: a batch file that is not a regular file")
			return -1
		}
		data, err := os.ReadFile(name)
		if err != nil {
			iv.handBack(nil, "sftp: the batch file cannot be read")
			return -1
		}
		cmds, _ = fakessh.ParseSFTPBatch(bytes.NewReader(data))
		if reason := b.notServedInFull(cmds); reason != "" {
			iv.handBack(nil, reason)
			return -1
		}
	}
	if err := iv.accept(""); err != nil {
		return fakessh.ExitSSHError
	}
	watch := b.watchShim(ctx)
	if inv.BatchFile == "-" {
		var raw []byte
		read := make(chan error, 1)
		go func() {
			var err error
			if raw, err = io.ReadAll(io.LimitReader(iv.stdin, maxReplay+1)); err == nil {
				cmds, err = fakessh.ParseSFTPBatch(io.MultiReader(bytes.NewReader(raw), iv.stdin))
			}
			read <- err
		}()
		var err error
		select {
		case err = <-read:
		case <-watch.done:
			return 1 // sftp dies of a signal while it reads its batch
		}
		if err != nil {
			iv.errorf("%v", err)
			return 1
		}
		if reason := b.notServedInFull(cmds); reason != "" {
			if len(raw) <= maxReplay {
				iv.handBack(raw, reason)
				return -1
			}
			b.t.countSlow(iv, "sftp: a batch over "+strconv.Itoa(maxReplay>>10)+" KiB served by the bridge: "+reason)
		}
	} else {
		// Nothing reads stdin now; let the shim finish sending it.
		go func() { _, _ = io.Copy(io.Discard, iv.stdin) }()
	}
	for _, c := range cmds {
		if watch.ended() {
			return 1
		}
		if !c.Quiet {
			_, _ = fmt.Fprintf(iv.stdout(), "sftp> %s\n", c.Text)
		}
		cctx, done := watch.command(ctx)
		quit, err := b.run(cctx, c)
		interrupted := done()
		switch {
		case watch.ended():
			return 1
		case interrupted && c.Name == "put":
			// sftp's upload stops where it is and counts as done.
			err = nil
		case interrupted:
			err = errReported // the get stops, a failure with no message
		}
		if err != nil {
			if errors.Is(err, errReported) {
				err = nil
			}
			if err != nil {
				iv.errorf("%v", err)
			}
			if !c.IgnoreError {
				return 1
			}
		}
		if quit {
			break
		}
	}
	return 0
}

// maxReplay bounds a batch read from stdin that the daemon hands back to
// the shim for the real sftp: a pipe holds it whole. The shims send the
// real sftp any larger one before reading it.
const maxReplay = fakessh.BatchMax

// transferNotServed is notServed for scp and sftp: when their ssh cannot
// log in, they say the connection closed after its message, as fatal()
// words it (scp with its name first).
func transferNotServed(iv *invocation, err error) int {
	prefix := ""
	if iv.hello.Prog == "scp" {
		prefix = scpName(iv) + ": "
	}
	var ns *noSFTPError
	if errors.As(err, &ns) {
		lines, ok := ns.opensshLines()
		if !ok {
			// What the subsystem said on stderr is ssh's to relay.
			iv.handBack(nil, iv.hello.Prog+": "+ns.reason())
			return -1
		}
		if ns.refused && iv.master.Load() && iv.settings != nil && iv.settings.ControlPersist == sshclient.PersistNo {
			// The master runs the session itself and says it (channel
			// 0 is its control socket), as the ssh route does.
			iv.errorf("subsystem request failed on channel 1")
		}
		for _, l := range lines {
			iv.errorf("%s%s", prefix, l)
		}
		return fakessh.ExitSSHError
	}
	code := notServed(iv, err)
	if code == fakessh.ExitSSHError {
		iv.errorf("%sConnection closed", prefix)
	}
	return code
}

// sftpUnserved names why the real sftp must run inv whatever its batch
// holds, or returns "": what the bridge serves writes no progress lines
// (-N), starts in the login directory (host:path would fetch or cd), and
// copies plain files, neither resumed (-a) nor slowed (-l) nor with
// modes and times kept (-p).
func sftpUnserved(inv *fakessh.SFTPInvocation) string {
	switch {
	case inv.Recursive:
		return "sftp -r"
	case inv.Preserve:
		return "sftp -p"
	case len(inv.Unserved) > 0:
		return "sftp " + strings.Join(inv.Unserved, " ")
	case inv.InitialPath != "":
		return "sftp host:path"
	case !inv.Quiet:
		return "sftp -N"
	}
	return ""
}

// notServedInFull names why the real sftp must run cmds, or returns "":
// the bridge serves a batch of single-file put and get without flags
// (the shape Ansible sends) onto destinations it writes as sftp would
// (see putPlan and getPlan), and nothing else, whose output (ls, df,
// help), recursion, globbing, resuming and error texts would differ
// from sftp's.
func (b *batchRun) notServedInFull(cmds []fakessh.BatchCommand) string {
	for _, c := range cmds {
		switch c.Name {
		case "", "bye", "exit", "quit":
		case "put", "get":
			if c.Flags != "" {
				return "sftp: " + c.Name + " -" + c.Flags
			}
			for _, a := range c.Args {
				if strings.ContainsAny(a, "*?[") {
					return "sftp: " + c.Name + " with a glob"
				}
			}
			if len(c.Args) == 0 {
				continue // sftp's own error, which the bridge words too
			}
			var why string
			if c.Name == "put" {
				_, why = b.putPlan(c.Args[0], argOr(c.Args, 1))
			} else {
				_, why = b.getPlan(c.Args[0], argOr(c.Args, 1))
			}
			if why != "" {
				return "sftp: " + c.Name + " " + why
			}
		default:
			return "sftp: the batch command " + strconv.Quote(c.Name)
		}
	}
	return ""
}

func argOr(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}

// errReported marks an error whose message was already printed.
var errReported = errors.New("reported")

// batchRun is an sftp batch or an scp copy being run over sc: the local
// and remote working directories, the remote home (for ~), and the
// options that shape its transfers.
type batchRun struct {
	iv               *invocation
	t                *target
	sc               *sftp.Client
	lcwd, rcwd, home string
	scp              bool // scp, not sftp: errors start with its argv[0] (scpName), paths as given
	fast             bool // shared temp dirs may hold uploads
}

// shimWatch stops a served copy as the tool's signal handlers stop it.
// scp, on SIGINT, SIGTERM or SIGHUP, and sftp, on SIGTERM or SIGHUP or on
// SIGINT between commands, kill their ssh and exit 1 (killchild); sftp on
// SIGINT during a command says "Interrupt", abandons that command and
// reads on (cmd_interrupt). A shim that goes away stops the copy too.
// The shim waits for the daemon's exit status after a signal, so that no
// byte is written after it exits, as none is after scp's.
type shimWatch struct {
	done        chan struct{} // closed when the tool ends
	mu          sync.Mutex
	cancel      context.CancelFunc // the command running, nil between
	stopped     bool               // the tool ends: every command is over
	interrupted bool               // the running command was interrupted
}

// watchShim starts a shimWatch of b's shim until ctx ends.
func (b *batchRun) watchShim(ctx context.Context) *shimWatch {
	w := &shimWatch{done: make(chan struct{})}
	go func() {
		for {
			select {
			case <-b.iv.hangup():
				w.stop()
				return
			case sig := <-b.iv.signals:
				if b.scp || sig != "INT" || !w.interrupt() {
					w.stop()
					return
				}
				_, _ = io.WriteString(b.iv.stderr(), "\rInterrupt  \n")
			case <-ctx.Done():
				return
			}
		}
	}()
	return w
}

// command returns the context for one command; done ends it and says
// whether a signal interrupted it.
func (w *shimWatch) command(ctx context.Context) (context.Context, func() (interrupted bool)) {
	ctx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	w.cancel, w.interrupted = cancel, false
	if w.stopped {
		cancel()
	}
	w.mu.Unlock()
	return ctx, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.cancel = nil
		cancel()
		return w.interrupted
	}
}

// interrupt cancels the running command, if one is; false if none is.
func (w *shimWatch) interrupt() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel == nil {
		return false
	}
	w.interrupted = true
	w.cancel()
	return true
}

func (w *shimWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.stopped = true
		close(w.done)
	}
	if w.cancel != nil {
		w.cancel()
	}
}

// ended reports whether the tool ends (a signal it dies of, or no shim).
func (w *shimWatch) ended() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

func (b *batchRun) remote(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return path.Join(b.home, strings.TrimPrefix(p[1:], "/"))
	}
	if path.IsAbs(p) {
		return p
	}
	return path.Join(b.rcwd, p)
}

func (b *batchRun) local(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(b.lcwd, p)
}

func localPath(iv *invocation, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(iv.hello.Cwd, p)
}

// run executes one batch command; quit is true for bye/exit/quit.
func (b *batchRun) run(ctx context.Context, c fakessh.BatchCommand) (quit bool, err error) {
	arg := func(i int) string { return argOr(c.Args, i) }
	// need words a missing path as sftp's parse_args does.
	need := func(n int) error {
		switch {
		case len(c.Args) >= n:
			return nil
		case c.Name == "put" || c.Name == "get":
			return msgf("You must specify at least one path after a %s command.", c.Name)
		case n == 2:
			return msgf("You must specify two paths after a %s command.", c.Name)
		}
		return msgf("You must specify a path after a %s command.", c.Name)
	}
	switch c.Name {
	case "":
		return false, nil // blank line or comment: echoed only
	case "invalid":
		return false, fmt.Errorf("%s", strings.TrimRight(c.Err, "\r\n"))
	case "bye", "exit", "quit":
		return true, nil
	case "reput", "reget":
		// Only in a batch too large to hand back: a plain copy would
		// overwrite what resuming keeps.
		return false, msgf("%s: not served by ansible-bridge in a batch over %d KiB", c.Name, maxReplay>>10)
	case "put":
		if err := need(1); err != nil {
			return false, err
		}
		// Planned again: an earlier command may have changed the
		// destination since the batch was checked.
		p, why := b.putPlan(arg(0), arg(1))
		if why != "" {
			return false, msgf("ansible-bridge: put %s: %s", arg(0), why)
		}
		return false, b.put(ctx, arg(0), p)
	case "get":
		if err := need(1); err != nil {
			return false, err
		}
		p, why := b.getPlan(arg(0), arg(1))
		if why != "" {
			return false, msgf("ansible-bridge: get %s: %s", arg(0), why)
		}
		return false, b.get(ctx, arg(0), p)
	case "cd", "chdir":
		dir := b.remote(cmp.Or(arg(0), "~"))
		st, err := b.sc.Stat(dir)
		if err != nil {
			return false, msgf("Can't change directory: %s", sftpErrText(err))
		}
		if !st.IsDir() {
			return false, msgf("Can't change directory: \"%s\" is not a directory", dir)
		}
		b.rcwd = dir
	case "lcd", "lchdir":
		dir := b.local(arg(0))
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return false, msgf("Couldn't change local directory to \"%s\": No such file or directory", dir)
		}
		b.lcwd = dir
	case "pwd":
		_, _ = fmt.Fprintf(b.iv.stdout(), "Remote working directory: %s\n", b.rcwd)
	case "lpwd":
		_, _ = fmt.Fprintf(b.iv.stdout(), "Local working directory: %s\n", b.lcwd)
	case "mkdir":
		if err := need(1); err != nil {
			return false, err
		}
		if err := b.sc.Mkdir(b.remote(arg(0))); err != nil {
			return false, fmt.Errorf("remote mkdir \"%s\": %s", b.remote(arg(0)), sftpErrText(err))
		}
	case "lmkdir":
		if err := need(1); err != nil {
			return false, err
		}
		if err := os.Mkdir(b.local(arg(0)), 0o777); err != nil {
			return false, msgf("Couldn't create local directory \"%s\": %s", b.local(arg(0)), sftpErrText(err))
		}
	case "rmdir":
		if err := need(1); err != nil {
			return false, err
		}
		if err := b.sc.RemoveDirectory(b.remote(arg(0))); err != nil {
			return false, fmt.Errorf("remote rmdir \"%s\": %s", b.remote(arg(0)), sftpErrText(err))
		}
	case "rm":
		if err := need(1); err != nil {
			return false, err
		}
		p := b.remote(arg(0))
		if err := b.sc.Remove(p); err != nil {
			return false, msgf("Couldn't delete file: %s", sftpErrText(err))
		}
	case "rename":
		if err := need(2); err != nil {
			return false, err
		}
		if err := b.sc.Rename(b.remote(arg(0)), b.remote(arg(1))); err != nil {
			return false, msgf("Couldn't rename file \"%s\" to \"%s\": %s", b.remote(arg(0)), b.remote(arg(1)), sftpErrText(err))
		}
	case "ln", "symlink":
		if err := need(2); err != nil {
			return false, err
		}
		var err error
		if c.Name == "symlink" || strings.Contains(c.Flags, "s") {
			err = b.sc.Symlink(arg(0), b.remote(arg(1)))
		} else {
			err = b.sc.Link(b.remote(arg(0)), b.remote(arg(1)))
		}
		if err != nil {
			return false, msgf("Couldn't link file \"%s\" to \"%s\": %s", arg(0), b.remote(arg(1)), sftpErrText(err))
		}
	case "chmod":
		if err := need(2); err != nil {
			return false, err
		}
		var mode uint32
		if _, err := fmt.Sscanf(arg(0), "%o", &mode); err != nil || mode > 0o7777 {
			return false, userMsg("You must supply a numeric argument to the chmod command.")
		}
		p := b.remote(arg(1))
		if err := b.sc.Chmod(p, os.FileMode(mode)); err != nil {
			return false, msgf("Couldn't setstat on \"%s\": %s", p, sftpErrText(err))
		}
	case "ls", "dir":
		return false, b.ls(b.remote(cmp.Or(arg(0), ".")))
	case "progress", "version", "help", "?", "lumask":
		if c.Name == "version" {
			_, _ = fmt.Fprintf(b.iv.stdout(), "SFTP protocol version 3\n")
		}
	default:
		return false, userMsg("Invalid command.")
	}
	return false, nil
}

// A transferPlan is where a served put or get lands: path, named in
// messages as the tool names it (display), and whether a file is there
// already. An existing file is written in place, as OpenSSH writes it
// (through a symlink, keeping its inode, owner, mode and links); a new
// one is made whole beside it and renamed into place.
type transferPlan struct {
	path, display string
	exists        bool
	held          bool // into a temp dir the bridge holds
	missing       bool // a get whose source is not there: the tool says so
}

// putPlan resolves an upload of the local file src to the remote dst
// (as given; "" for src's name), or names why the bridge leaves it to
// the real tool: a source that is not a regular file, a destination that
// is not one (a device, a directory named with a trailing slash that is
// not there), a directory that does not exist. Their messages and
// effects are the real tool's.
func (b *batchRun) putPlan(src, dst string) (p transferPlan, why string) {
	lsrc := b.local(src)
	if why := localUnserved(lsrc); why != "" {
		return p, why
	}
	if st, err := os.Stat(lsrc); err != nil || !st.Mode().IsRegular() {
		return p, "a local source that is not a regular file"
	}
	name := path.Base(filepath.ToSlash(src))
	if dst == "" {
		dst = name
	}
	if !b.remoteServed(dst) {
		return p, "a remote path starting with ~"
	}
	p = transferPlan{path: b.remote(dst), display: dst}
	if b.fast {
		// Into Ansible's temp dir: held by the bridge, or noted if on
		// the target (holdUpload).
		switch st, file := b.t.house.lookup(p.path); {
		case st != nil && file != "":
			p.held = true
			if !st.isOnTarget() {
				return b.named(p), ""
			}
		case st != nil:
			// Into the held dir itself, under src's name: the dir must
			// be on the target for the checks below.
			if err := b.t.materializeHeld(context.Background(), b.iv); err != nil {
				return p, "held temp dirs that cannot be written to the target"
			}
		}
	}
	if st, err := b.sc.Stat(p.path); err == nil && st.IsDir() {
		p.path, p.display = path.Join(p.path, name), pathAppend(p.display, name)
	} else if strings.HasSuffix(dst, "/") {
		return p, "a destination ending in / that is not a directory"
	}
	p = b.named(p)
	lst, err := b.sc.Lstat(p.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if dir, err := b.sc.Stat(path.Dir(p.path)); err != nil || !dir.IsDir() {
			return p, "a destination whose directory is not there"
		}
		return p, ""
	case err != nil:
		return p, "a destination the bridge cannot look at"
	case lst.Mode()&fs.ModeSymlink != 0:
		lst, err = b.sc.Stat(p.path)
	}
	if err != nil || !lst.Mode().IsRegular() {
		return p, "a destination that is not a regular file"
	}
	p.exists = true
	return p, ""
}

// getPlan resolves a download of the remote file src to the local dst
// (as given; "" for src's name), or names why the bridge leaves it to
// the real tool, as putPlan does.
func (b *batchRun) getPlan(src, dst string) (p transferPlan, why string) {
	if !b.remoteServed(src) {
		return p, "a remote path starting with ~"
	}
	rsrc := b.remote(src)
	if strings.HasSuffix(src, "/") {
		return p, "a remote source ending in /"
	}
	if err := b.t.materializeHeld(context.Background(), b.iv); err != nil {
		return p, "held temp dirs that cannot be written to the target"
	}
	if st, err := b.sc.Stat(rsrc); err != nil {
		// Whatever the stat's error, the tool reports the name alone.
		return transferPlan{missing: true}, ""
	} else if !st.Mode().IsRegular() {
		return p, "a remote source that is not a regular file"
	}
	name := path.Base(rsrc)
	if dst == "" {
		dst = name
	}
	p = transferPlan{path: b.local(dst), display: dst}
	if st, err := os.Stat(p.path); err == nil && st.IsDir() {
		p.path, p.display = filepath.Join(p.path, name), pathAppend(p.display, name)
	} else if strings.HasSuffix(dst, "/") {
		return p, "a local destination ending in / that is not a directory"
	}
	if why := localUnserved(p.path); why != "" {
		return p, why
	}
	lst, err := os.Lstat(p.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if dir, err := os.Stat(filepath.Dir(p.path)); err != nil || !dir.IsDir() {
			return p, "a local destination whose directory is not there"
		}
		return p, ""
	case err != nil:
		return p, "a local destination the bridge cannot look at"
	case lst.Mode()&fs.ModeSymlink != 0:
		lst, err = os.Stat(p.path)
	}
	if err != nil || !lst.Mode().IsRegular() {
		return p, "a local destination that is not a regular file"
	}
	p.exists = true
	return p, ""
}

// named gives p the display name the tool prints for a remote path: scp
// the path as given, sftp its absolute path.
func (b *batchRun) named(p transferPlan) transferPlan {
	if !b.scp {
		p.display = p.path
	}
	return p
}

// remoteServed: scp takes ~ and ~/ as the login directory, and leaves
// ~user to its server; sftp takes a ~ literally, as a name. The bridge
// serves scp's login directory and leaves the rest to the real tool.
func (b *batchRun) remoteServed(p string) bool {
	return !strings.HasPrefix(p, "~") || b.scp && (p == "~" || strings.HasPrefix(p, "~/"))
}

// pathAppend is OpenSSH's path_append: dir and name, one slash between.
func pathAppend(dir, name string) string {
	if dir == "" || strings.HasSuffix(dir, "/") {
		return dir + name
	}
	return dir + "/" + name
}

// localUnserved names why the daemon must not open the local path p for
// the shim: under /dev, /proc and /sys a name can mean the opener's own
// descriptors, terminal or process (/dev/stdout, /proc/self), which are
// the shim's, not the daemon's.
func localUnserved(p string) string {
	real := p
	for q := p; ; q = filepath.Dir(q) {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			real = filepath.Join(r, strings.TrimPrefix(p, q))
			break
		}
		if q == filepath.Dir(q) {
			break
		}
	}
	for _, name := range []string{filepath.Clean(p), real} {
		for _, d := range []string{"/dev", "/proc", "/sys"} {
			if name == d || strings.HasPrefix(name, d+"/") {
				return "a local path in " + d
			}
		}
	}
	return ""
}

// put uploads the local file src as sftp's put does, where putPlan
// says.
func (b *batchRun) put(ctx context.Context, src string, p transferPlan) error {
	f, err := os.Open(b.local(src))
	if err != nil {
		return msgf("open local \"%s\": %s", src, sftpErrText(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return msgf("local \"%s\" is not a regular file", src)
	}
	var r io.Reader = ctxReader{ctx, f}
	if p.held {
		held, rest, err := holdUpload(b.t, b.sc, b.iv, p.path, r, st.Size(), st.Mode().Perm())
		if err != nil {
			return &uploadError{"dest open", p.display, sftpErrText(err)}
		}
		if held {
			return nil
		}
		r = rest
	}
	var n int64
	if p.exists {
		n, err = putInPlace(b.sc, p.path, r)
	} else {
		n, err = putAtomic(b.sc, p.path, r, st.Mode().Perm())
	}
	b.t.bytesIn.Add(n)
	if p.held && err != nil && sftpErrText(err) == "Permission denied" && !b.t.sftpNoWrite.Swap(true) {
		b.iv.log.WithError(err).Info("the target's sftp refuses to write into Ansible's temp dir: its temp dirs are no longer held")
	}
	var wf *writeFailed
	switch {
	case errors.As(err, &wf):
		return &uploadError{"write remote", p.display, sftpErrText(err)}
	case err != nil:
		return &uploadError{"dest open", p.display, sftpErrText(err)}
	}
	return nil
}

// putInPlace writes r over the existing remote file dst, as sftp's
// upload opens it (write, create, truncate): its mode stays.
func putInPlace(sc *sftp.Client, dst string, r io.Reader) (int64, error) {
	f, err := sc.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return 0, err
	}
	n, err := f.ReadFrom(r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, &writeFailed{err}
	}
	return n, nil
}

// get downloads the remote file src as sftp's get does, where getPlan
// says: the remote file is opened first, and named if it cannot be.
func (b *batchRun) get(ctx context.Context, src string, p transferPlan) error {
	rsrc := b.remote(src)
	display := rsrc
	if b.scp {
		display = visSafe(src)
	}
	switch {
	case p.missing && b.scp:
		return fmt.Errorf("%s: No such file or directory", display) // strerror(ENOENT)
	case p.missing:
		return msgf("File \"%s\" not found.", rsrc)
	}
	rf, err := b.sc.Open(rsrc)
	if err != nil {
		return msgf("remote open \"%s\": %s", display, sftpErrText(err))
	}
	defer rf.Close()
	var n int64
	if p.exists {
		n, err = getInPlace(ctx, rf, p.path)
	} else {
		n, err = getAtomic(ctx, rf, p.path, b.iv.hello.Umask)
	}
	b.t.bytesOut.Add(n)
	if err != nil {
		return msgf("open local \"%s\": %s", p.display, sftpErrText(err))
	}
	return nil
}

// getInPlace writes the remote file rf over the existing local file dst,
// as sftp's download opens it (write, create, truncate): its mode stays.
func getInPlace(ctx context.Context, rf *sftp.File, dst string) (int64, error) {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := rf.WriteTo(ctxWriter{ctx, f})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// ctxReader and ctxWriter stop a copy once ctx ends: the shim went away
// or was signalled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

func (b *batchRun) ls(p string) error {
	st, err := b.sc.Stat(p)
	if err != nil {
		return msgf("Can't ls: \"%s\" not found", p)
	}
	var buf bytes.Buffer
	if !st.IsDir() {
		fmt.Fprintln(&buf, p)
	} else {
		ents, err := b.sc.ReadDir(p)
		if err != nil {
			return msgf("Couldn't read directory: %s", sftpErrText(err))
		}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") {
				fmt.Fprintln(&buf, e.Name())
			}
		}
	}
	_, err = b.iv.stdout().Write(buf.Bytes())
	return err
}

// serveSCP copies one file the way scp (in its default SFTP mode) does,
// and hands any other copy back to the real scp (see scpUnserved).
func (s *Server) serveSCP(ctx context.Context, iv *invocation) int {
	inv := iv.hello.SCP
	if inv == nil || len(inv.Unsupported) > 0 || len(inv.SSH.Unsupported) > 0 {
		iv.fallback("scp arguments the bridge does not serve")
		return -1
	}
	if reason := scpUnserved(inv); reason != "" {
		iv.handBack(nil, reason)
		return -1
	}
	src, upload := inv.Sources[0], inv.Target.Remote
	remote := inv.Target
	if !upload {
		remote = src
	}
	conn := inv.SSH
	conn.Host = remote.Host
	if remote.User != "" {
		conn.User = cmp.Or(conn.User, remote.User)
	}
	if remote.Port != "" {
		conn.Options = append([]fakessh.Option{{Key: "port", Value: remote.Port}}, conn.Options...)
	}
	b, release, err := s.connectSFTP(ctx, iv, &conn, routeSCP)
	if err != nil {
		return transferNotServed(iv, err)
	}
	defer release()
	b.scp = true
	var plan transferPlan
	var why string
	if upload {
		plan, why = b.putPlan(src.Path, inv.Target.Path)
	} else {
		plan, why = b.getPlan(src.Path, inv.Target.Path)
	}
	if why != "" {
		iv.handBack(nil, "scp: "+why)
		return -1
	}
	if err := iv.accept(""); err != nil {
		return fakessh.ExitSSHError
	}
	ctx, done := b.watchShim(ctx).command(ctx)
	defer done()
	go func() { _, _ = io.Copy(io.Discard, iv.stdin) }()
	if upload {
		err = b.put(ctx, src.Path, plan)
	} else {
		err = b.get(ctx, src.Path, plan)
	}
	var dest *uploadError
	switch {
	case ctx.Err() != nil:
		return 1 // signalled or gone: scp says nothing
	case errors.As(err, &dest):
		// scp says what failed, then which file.
		iv.errorf("%s: %v", scpName(iv), err)
		iv.errorf("%s: failed to upload file %s to %s", scpName(iv), src.Path, inv.Target.Path)
		return 1
	case err != nil:
		iv.errorf("%s: %v", scpName(iv), err)
		return 1
	}
	return 0
}

// scpName is what scp's own messages start with: its argv[0] as run
// (log_init(argv0)), "/usr/bin/scp" for an absolute scp_executable.
func scpName(iv *invocation) string {
	if filepath.Base(iv.hello.Argv0) == "scp" {
		return iv.hello.Argv0
	}
	return "scp"
}

// scpUnserved names why the real scp must run inv, or returns "": the
// bridge copies one plain file, its remote path taken literally as SFTP
// takes it, with no mode or times kept and no bandwidth limit.
func scpUnserved(inv *fakessh.SCPInvocation) string {
	switch {
	case inv.Recursive:
		return "scp -r"
	case inv.Preserve:
		return "scp -p"
	case inv.LegacyProtocol:
		return "scp -O"
	case len(inv.Unserved) > 0:
		return "scp " + strings.Join(inv.Unserved, " ")
	case len(inv.Sources) != 1:
		return "scp: several sources"
	}
	if !inv.Target.Remote && strings.ContainsAny(inv.Sources[0].Path, "*?[\\") {
		// The remote side expands it as sftp's glob does.
		return "scp: a remote glob"
	}
	return ""
}

// uploadError is an upload the target refused (op "dest open") or could
// not take whole ("write remote"), worded as sftp's and scp's.
type uploadError struct{ op, path, text string }

func (e *uploadError) Error() string { return fmt.Sprintf("%s \"%s\": %s", e.op, e.path, e.text) }

// holdUpload keeps an upload into a held temp dir in the bridge. When it
// cannot (dir already on the target, file too big), it writes the dir to
// the target and returns the reader to upload from. size is r's size if
// known (-1: not).
func holdUpload(t *target, sc *sftp.Client, iv *invocation, dst string, r io.Reader, size int64, mode os.FileMode) (held bool, rest io.Reader, err error) {
	st, name := t.house.lookup(dst)
	if st == nil || name == "" {
		return false, r, nil
	}
	// An upload into Ansible's temp dir: its transfers come through the
	// bridge (transfers.go).
	t.house.learnTransfers(transferKey(iv.hello.HelloMsg))
	if st.isOnTarget() {
		// Goes to the target; the bridge notes it (for the debug view),
		// and keeps a wrapper's content: the module then runs in the
		// interpreter from memory (and the journal shows it).
		keep := strings.HasPrefix(name, "AnsiballZ_")
		return false, &captureReader{r: r, keep: keep, done: func(b []byte, n int64) { st.noteUpload(name, b, n, mode) }}, nil
	}
	ok, n, err := st.hold(name, r, size, mode)
	if ok && err == nil {
		t.bytesIn.Add(n)
		return true, nil, nil
	}
	var read errNotHeld
	if ok && !errors.As(err, &read) {
		return false, nil, err
	}
	if err := st.writeWith(sftpWriter{sc}); err != nil {
		return false, nil, err
	}
	return false, io.MultiReader(bytes.NewReader(read.prefix), r), nil
}

// captureReader passes r through and, once r has been read to its end,
// hands done the byte count and, if keep, everything read (nil beyond
// maxHeldFile).
type captureReader struct {
	r    io.Reader
	keep bool
	buf  bytes.Buffer
	n    int64
	done func([]byte, int64)
}

func (c *captureReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.keep && c.n <= maxHeldFile {
		c.buf.Write(p[:n])
	}
	if err == io.EOF && c.done != nil {
		var data []byte
		if c.keep && c.n <= maxHeldFile {
			data = c.buf.Bytes()
		}
		c.done(data, c.n)
		c.done = nil
	}
	return n, err
}

// visSafe encodes s the way OpenSSH prints untrusted names
// (strnvis VIS_SAFE|VIS_OCTAL): bytes outside printable ASCII, other than
// tab, newline, backspace, bell and return, become \ooo; backslash doubles.
func visSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c >= 0x20 && c < 0x7f, c == '\t', c == '\n', c == '\b', c == '\a', c == '\r':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\%03o", c)
		}
	}
	return b.String()
}

// userMsg is an error whose text is printed to the user verbatim, in the
// words (and capitals) of the OpenSSH tool it stands in for.
type userMsg string

func (m userMsg) Error() string { return string(m) }

func msgf(format string, args ...any) error { return userMsg(fmt.Sprintf(format, args...)) }
