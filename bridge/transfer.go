package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

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
	b, release, err := s.connectSFTP(ctx, iv, &inv.SSH, routeSFTP)
	if err != nil {
		return notServed(iv, err)
	}
	defer release()
	var cmds []fakessh.BatchCommand
	if inv.BatchFile != "-" {
		// Read before anything is accepted: the real sftp may take it.
		data, err := os.ReadFile(localPath(iv, inv.BatchFile))
		if err != nil {
			iv.handBack(nil, "sftp: the batch file cannot be read")
			return -1
		}
		cmds, _ = fakessh.ParseSFTPBatch(bytes.NewReader(data))
		if reason := notServedInFull(inv, cmds); reason != "" {
			iv.handBack(nil, reason)
			return -1
		}
	}
	if err := iv.accept(""); err != nil {
		return fakessh.ExitSSHError
	}
	if inv.BatchFile == "-" {
		raw, err := io.ReadAll(io.LimitReader(iv.stdin, maxReplay+1))
		if err == nil {
			cmds, err = fakessh.ParseSFTPBatch(io.MultiReader(bytes.NewReader(raw), iv.stdin))
		}
		if err != nil {
			iv.errorf("%v", err)
			return 1
		}
		if reason := notServedInFull(inv, cmds); reason != "" {
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
	b.preserve, b.recursive = inv.Preserve, inv.Recursive
	if inv.InitialPath != "" {
		b.rcwd = b.remote(inv.InitialPath)
	}
	for _, c := range cmds {
		if !c.Quiet {
			_, _ = fmt.Fprintf(iv.stdout(), "sftp> %s\n", c.Text)
		}
		quit, err := b.run(c)
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
// the shim for the real sftp: a pipe holds it whole.
const maxReplay = 512 << 10

// notServedInFull names why the real sftp must run cmds, or returns "":
// the bridge serves a batch of single-file put and get (with -p/-P, the
// shape Ansible sends), and nothing else, whose output (ls, df, help),
// recursion, globbing and error texts would differ from sftp's.
func notServedInFull(inv *fakessh.SFTPInvocation, cmds []fakessh.BatchCommand) string {
	if inv.Recursive {
		return "sftp -r"
	}
	for _, c := range cmds {
		switch c.Name {
		case "", "bye", "exit", "quit":
		case "put", "get", "reput", "reget":
			if strings.Trim(c.Flags, "pP") != "" {
				return "sftp: " + c.Name + " -" + c.Flags
			}
			for _, a := range c.Args {
				if strings.ContainsAny(a, "*?[") {
					return "sftp: " + c.Name + " with a glob"
				}
			}
		default:
			return "sftp: the batch command " + strconv.Quote(c.Name)
		}
	}
	return ""
}

// errReported marks an error whose message was already printed.
var errReported = errors.New("reported")

// batchRun is an sftp batch or an scp copy being run over sc: the local
// and remote working directories, the remote home (for ~), and the
// options that shape its transfers.
type batchRun struct {
	iv                  *invocation
	t                   *target
	sc                  *sftp.Client
	lcwd, rcwd, home    string
	preserve, recursive bool
	scp                 bool // scp, not sftp: errors start with "scp: "
	fast                bool // shared temp dirs may hold uploads
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
func (b *batchRun) run(c fakessh.BatchCommand) (quit bool, err error) {
	arg := func(i int) string {
		if i < len(c.Args) {
			return c.Args[i]
		}
		return ""
	}
	need := func(n int) error {
		if len(c.Args) < n {
			return msgf("You must specify %d path(s) after a %s command.", n, c.Name)
		}
		return nil
	}
	switch c.Name {
	case "":
		return false, nil // blank line or comment: echoed only
	case "invalid":
		return false, fmt.Errorf("%s", strings.TrimRight(c.Err, "\r\n"))
	case "bye", "exit", "quit":
		return true, nil
	case "put", "reput":
		if err := need(1); err != nil {
			return false, err
		}
		return false, b.put(b.local(arg(0)), arg(1), strings.ContainsAny(c.Flags, "pP") || b.preserve)
	case "get", "reget":
		if err := need(1); err != nil {
			return false, err
		}
		return false, b.get(b.remote(arg(0)), arg(1), strings.ContainsAny(c.Flags, "pP") || b.preserve)
	case "cd", "chdir":
		dir := b.remote(cmpOr(arg(0), "~"))
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
		return false, b.ls(b.remote(cmpOr(arg(0), ".")))
	case "progress", "version", "help", "?", "lumask":
		if c.Name == "version" {
			_, _ = fmt.Fprintf(b.iv.stdout(), "SFTP protocol version 3\n")
		}
	default:
		return false, userMsg("Invalid command.")
	}
	return false, nil
}

func (b *batchRun) put(src, dst string, preserve bool) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("stat local \"%s\": %s", src, sftpErrText(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return msgf("Skipping non-regular file %s", src)
	}
	if dst == "" {
		dst = path.Base(filepath.ToSlash(src))
	}
	dst = b.remote(dst)
	var r io.Reader = f
	if b.fast {
		held, rest, err := holdUpload(b.t, b.sc, b.iv, dst, f, st.Size(), st.Mode().Perm())
		if err != nil {
			return &destOpenError{dst, sftpErrText(err)}
		}
		if held {
			return nil
		}
		r = rest
	}
	if rst, err := b.sc.Stat(dst); err == nil && rst.IsDir() {
		dst = path.Join(dst, filepath.Base(src))
	}
	n, err := putAtomic(b.sc, dst, r, st.Mode().Perm())
	b.t.bytesIn.Add(n)
	if err != nil {
		return &destOpenError{dst, sftpErrText(err)}
	}
	if preserve {
		if err := remoteChtimes(b.sc, dst, st.ModTime(), st.ModTime()); err != nil {
			// OpenSSH's fsetstat failure: reported, the upload stands.
			b.warnf("Couldn't fsetstat: %s", sftpErrText(err))
		}
	}
	return nil
}

// warnf prints an error that does not fail the transfer, as sftp's
// error() does (scp's with its name first).
func (b *batchRun) warnf(format string, args ...any) {
	if b.scp {
		format = "scp: " + format
	}
	b.iv.errorf(format, args...)
}

// timesFailed reports a timesError for dst as OpenSSH's download does.
func (b *batchRun) timesFailed(dst string, err error) bool {
	var te *timesError
	if !errors.As(err, &te) {
		return false
	}
	b.warnf("Can't set times on \"%s\": %s", dst, strerror(te.err))
	return true
}

func (b *batchRun) get(src, dst string, preserve bool) error {
	if err := b.t.materializeHeld(context.Background(), b.iv); err != nil {
		return err
	}
	if _, err := b.sc.Stat(src); err != nil {
		return msgf("File \"%s\" not found.", src)
	}
	if dst == "" {
		dst = path.Base(src)
	}
	dst = b.local(dst)
	if st, err := os.Stat(dst); err == nil && st.IsDir() {
		dst = filepath.Join(dst, path.Base(src))
	}
	n, err := getAtomic(b.sc, src, dst, b.iv.hello.Umask, preserve)
	b.t.bytesOut.Add(n)
	if err != nil && !b.timesFailed(dst, err) {
		return msgf("Couldn't write to \"%s\": %s", dst, sftpErrText(err))
	}
	return nil
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

// serveSCP copies files the way scp (in its default SFTP mode) does.
func (s *Server) serveSCP(ctx context.Context, iv *invocation) int {
	inv := iv.hello.SCP
	if inv == nil || len(inv.Unsupported) > 0 || len(inv.SSH.Unsupported) > 0 {
		iv.fallback("scp arguments the bridge does not serve")
		return -1
	}
	remote := inv.Target
	upload := inv.Target.Remote
	if !upload {
		remote = inv.Sources[0]
	}
	conn := inv.SSH
	conn.Host = remote.Host
	if remote.User != "" {
		conn.User = cmpOr(conn.User, remote.User)
	}
	if remote.Port != "" {
		conn.Options = append([]fakessh.Option{{Key: "port", Value: remote.Port}}, conn.Options...)
	}
	b, release, err := s.connectSFTP(ctx, iv, &conn, routeSCP)
	if err != nil {
		return notServed(iv, err)
	}
	defer release()
	for _, src := range inv.Sources {
		if !upload && strings.ContainsAny(src.Path, "*?[") {
			// The remote side expands it as sftp's glob does.
			iv.handBack(nil, "scp: a remote glob")
			return -1
		}
	}
	if err := iv.accept(""); err != nil {
		return fakessh.ExitSSHError
	}
	go func() { _, _ = io.Copy(io.Discard, iv.stdin) }()
	b.preserve, b.recursive, b.scp = inv.Preserve, inv.Recursive, true
	status := 0
	for _, src := range inv.Sources {
		if upload {
			err = b.scpPut(b.local(src.Path), cmpOr(remote.Path, "."))
			var dest *destOpenError
			if errors.As(err, &dest) {
				// scp says what failed, then which file.
				iv.errorf("scp: %v", err)
				err = fmt.Errorf("failed to upload file %s to %s", src.Path, remote.Path)
			}
		} else {
			err = b.scpGet(b.remote(cmpOr(src.Path, ".")), b.local(inv.Target.Path), cmpOr(src.Path, "."))
		}
		if err != nil {
			iv.errorf("scp: %v", err)
			status = 1
		}
	}
	return status
}

func (b *batchRun) scpPut(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("%s: %s", src, sftpErrText(err))
	}
	if st.IsDir() {
		if !b.recursive {
			return fmt.Errorf("%s: not a regular file", src)
		}
		rdst := b.remote(dst)
		if rst, err := b.sc.Stat(rdst); err == nil && rst.IsDir() {
			rdst = path.Join(rdst, filepath.Base(src))
		}
		if err := b.sc.MkdirAll(rdst); err != nil {
			return fmt.Errorf("%s: %s", rdst, sftpErrText(err))
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return fmt.Errorf("%s: %s", src, sftpErrText(err))
		}
		for _, e := range ents {
			if err := b.scpPut(filepath.Join(src, e.Name()), path.Join(rdst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	return b.put(src, dst, b.preserve)
}

// destOpenError is an upload the target refused, worded as sftp's and
// scp's "dest open".
type destOpenError struct{ path, text string }

func (e *destOpenError) Error() string { return fmt.Sprintf("dest open \"%s\": %s", e.path, e.text) }

// scpGet downloads src; errors about it name it as given (display), in
// OpenSSH's safe encoding, as scp does.
func (b *batchRun) scpGet(src, dst, display string) error {
	if err := b.t.materializeHeld(context.Background(), b.iv); err != nil {
		return err
	}
	st, err := b.sc.Stat(src)
	if err != nil {
		return fmt.Errorf("%s: %s", visSafe(display), sftpErrText(err))
	}
	if st.IsDir() {
		if !b.recursive {
			return fmt.Errorf("%s: not a regular file", src)
		}
		ldst := dst
		if lst, err := os.Stat(ldst); err == nil && lst.IsDir() {
			ldst = filepath.Join(ldst, path.Base(src))
		}
		if err := os.MkdirAll(ldst, 0o777&^os.FileMode(b.iv.hello.Umask)); err != nil {
			return fmt.Errorf("%s: %s", ldst, sftpErrText(err))
		}
		ents, err := b.sc.ReadDir(src)
		if err != nil {
			return fmt.Errorf("%s: %s", src, sftpErrText(err))
		}
		for _, e := range ents {
			p := path.Join(src, e.Name())
			if err := b.scpGet(p, filepath.Join(ldst, e.Name()), p); err != nil {
				return err
			}
		}
		return nil
	}
	if lst, err := os.Stat(dst); err == nil && lst.IsDir() {
		dst = filepath.Join(dst, path.Base(src))
	}
	// scp names the side that failed: the remote file it cannot open,
	// before any local file is made.
	f, err := b.sc.Open(src)
	if err != nil {
		return fmt.Errorf("remote open \"%s\": %s", visSafe(display), sftpErrText(err))
	}
	f.Close()
	n, err := getAtomic(b.sc, src, dst, b.iv.hello.Umask, b.preserve)
	b.t.bytesOut.Add(n)
	if err != nil && !b.timesFailed(dst, err) {
		return fmt.Errorf("%s: %s", dst, sftpErrText(err))
	}
	return nil
}

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
	if err := st.materialize(sc); err != nil {
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
