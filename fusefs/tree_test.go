package fusefs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/bridge/journal"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// These tests call the nodes' methods as go-fuse would, without the
// kernel.

// newTree returns the root of a tree over src, attached to a go-fuse
// bridge but not mounted.
func newTree(t *testing.T, src Source) *dirNode {
	t.Helper()
	root := newFS(src, testLogger(t)).root()
	gofs.NewNodeFS(root, options(testLogger(t)))
	return root
}

// walk looks up a slash-separated path below root.
func walk(ctx context.Context, root *dirNode, p string) (gofs.InodeEmbedder, fuse.Attr, syscall.Errno) {
	var node gofs.InodeEmbedder = root
	var attr fuse.Attr
	for _, name := range strings.Split(p, "/") {
		d, ok := node.(*dirNode)
		if !ok {
			return nil, attr, syscall.ENOTDIR
		}
		var out fuse.EntryOut
		ch, errno := d.Lookup(ctx, name, &out)
		if errno != 0 {
			return nil, attr, errno
		}
		node, attr = ch.Operations(), out.Attr
	}
	return node, attr, 0
}

func mustWalk(t *testing.T, root *dirNode, p string) (gofs.InodeEmbedder, fuse.Attr) {
	t.Helper()
	n, a, errno := walk(context.Background(), root, p)
	if errno != 0 {
		t.Fatalf("lookup %s: %v", p, errno)
	}
	return n, a
}

func names(t *testing.T, d gofs.InodeEmbedder) []string {
	t.Helper()
	ds, errno := d.(gofs.NodeReaddirer).Readdir(context.Background())
	if errno != 0 {
		t.Fatalf("readdir: %v", errno)
	}
	defer ds.Close()
	var out []string
	for ds.HasNext() {
		e, errno := ds.Next()
		if errno != 0 {
			t.Fatal(errno)
		}
		out = append(out, e.Name)
	}
	return out
}

// readNode opens and reads a file node whole.
func readNode(ctx context.Context, n gofs.InodeEmbedder) ([]byte, fuse.Attr, syscall.Errno) {
	fh, flags, errno := n.(gofs.NodeOpener).Open(ctx, syscall.O_RDONLY)
	if errno != 0 {
		return nil, fuse.Attr{}, errno
	}
	if flags&fuse.FOPEN_DIRECT_IO == 0 {
		return nil, fuse.Attr{}, syscall.EBADE // the content is only right with direct I/O
	}
	var data []byte
	buf := make([]byte, 7) // small reads to exercise offsets
	for {
		res, errno := fh.(gofs.FileReader).Read(ctx, buf, int64(len(data)))
		if errno != 0 {
			return nil, fuse.Attr{}, errno
		}
		b, _ := res.Bytes(buf)
		if len(b) == 0 {
			break
		}
		data = append(data, b...)
	}
	var out fuse.AttrOut
	n.(gofs.NodeGetattrer).Getattr(ctx, fh, &out)
	return data, out.Attr, 0
}

func mustRead(t *testing.T, root *dirNode, p string) []byte {
	t.Helper()
	n, _ := mustWalk(t, root, p)
	b, _, errno := readNode(context.Background(), n)
	if errno != 0 {
		t.Fatalf("read %s: %v", p, errno)
	}
	return b
}

func TestTreeLayout(t *testing.T) {
	src := newSource(t)
	root := newTree(t, src)

	for _, tc := range []struct {
		dir  string
		want string
	}{
		{"", "status journal targets"},
		{"journal", "000001-module 000002-exec 000003-passthrough latest"},
		{"journal/000001-module", "argv route target stdin stdout stderr timing exit module module_args.json truncated"},
		{"journal/000002-exec", "argv route target stdin stdout stderr timing exit"},
		{"journal/000003-passthrough", "argv route target stdin stdout stderr timing"},
		{"targets", "alice@web1:22 alice@web1:22%2Fbecome-root"},
		{"targets/alice@web1:22", "tmp tmpdirs"},
		{"targets/alice@web1:22/tmp", tmpName + " " + tmp2Name},
		{"targets/alice@web1:22/tmp/" + tmpName, "AnsiballZ_ping.py empty"},
		{"targets/alice@web1:22%2Fbecome-root/tmp", ""},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			var d gofs.InodeEmbedder = root
			if tc.dir != "" {
				d, _ = mustWalk(t, root, tc.dir)
			}
			if got := strings.Join(names(t, d), " "); got != tc.want {
				t.Errorf("ls %s = %q, want %q", tc.dir, got, tc.want)
			}
		})
	}
}

func TestTreeContent(t *testing.T) {
	src := newSource(t)
	root := newTree(t, src)
	wantArgs, err := os.ReadFile("../bridge/journal/testdata/AnsiballZ_ping.args.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want string
	}{
		{"status", string(src.status)},
		{"journal/000001-module/argv", "ssh -C web1 '/bin/sh -c '\\''/usr/bin/python3 && sleep 0'\\'\n"},
		{"journal/000001-module/route", "module\n"},
		{"journal/000001-module/target", tgt + "\n"},
		{"journal/000001-module/module", "ansible.modules.ping\n"},
		{"journal/000001-module/module_args.json", strings.ReplaceAll(string(wantArgs), secret, journal.Mask)},
		{"journal/000001-module/exit", "0\n"},
		{"journal/000001-module/truncated", fmt.Sprintf("stdin %d of %d bytes kept\n", journal.WrapperCaptureLimit-(len(secret)-1), len(wrapper(t)))},
		{"journal/000002-exec/argv", "ssh web1 'echo hello " + journal.Mask + "'\n"},
		{"journal/000002-exec/stdout", "hello " + journal.Mask + "\n"},
		{"journal/000002-exec/stderr", "Shared connection to web1 closed.\r\n"},
		{"journal/000002-exec/stdin", ""},
		{"journal/000002-exec/exit", "2\n"},
		{"journal/000003-passthrough/stdout", "partial"},
		{"targets/alice@web1:22/tmp/" + tmpName + "/AnsiballZ_ping.py", strings.ReplaceAll(string(wrapper(t)), secret, journal.Mask)},
		{"targets/alice@web1:22/tmp/" + tmpName + "/empty", ""},
		{"targets/alice@web1:22/tmp/" + tmp2Name + "/args", "hello=remote args\n"},
		{"targets/alice@web1:22/tmpdirs", tmpName + "\theld\t2 files\t2 held\t" + tmpPath + "\n" +
			tmp2Name + "\ton-target\t2 files\t0 held\t" + tmp2Path + "\n"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			if got := string(mustRead(t, root, tc.path)); got != tc.want {
				t.Errorf("cat %s:\n%s", tc.path, diff(got, tc.want))
			}
		})
	}
	// A cut capture leaves out a tail that could begin a secret.
	if in := mustRead(t, root, "journal/000001-module/stdin"); !bytes.HasPrefix(wrapper(t), in) || len(in) < journal.WrapperCaptureLimit-len(secret) {
		t.Errorf("stdin (%d bytes) is not the wrapper's beginning", len(in))
	}
	timing := string(mustRead(t, root, "journal/000003-passthrough/timing"))
	if !strings.HasPrefix(timing, "queued_ms ") || !strings.Contains(timing, "\nremote_ms 0\ntotal_ms ") ||
		!strings.HasSuffix(timing, "\nstate running\n") {
		t.Errorf("timing:\n%s", timing)
	}
	if n := src.remoteReads.Load(); n != 1 {
		t.Errorf("%d remote reads, want 1", n)
	}
}

// TestTreeAttrs checks that every file's size is that of its content,
// and the modes and owners.
// diff shows where got and want part, briefly.
func diff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-40)
	return fmt.Sprintf("%d bytes, want %d; from byte %d:\n%q\nwant\n%q",
		len(got), len(want), from, got[from:min(len(got), i+40)], want[from:min(len(want), i+40)])
}

func TestTreeAttrs(t *testing.T) {
	src := newSource(t)
	root := newTree(t, src)
	ctx := context.Background()
	var files int
	var visit func(p string, d gofs.InodeEmbedder)
	visit = func(p string, d gofs.InodeEmbedder) {
		for _, name := range names(t, d) {
			cp := strings.TrimPrefix(p+"/"+name, "/")
			n, attr := mustWalk(t, root, cp)
			var ga fuse.AttrOut
			if errno := n.(gofs.NodeGetattrer).Getattr(ctx, nil, &ga); errno != 0 {
				t.Fatalf("stat %s: %v", cp, errno)
			}
			if ga.Attr.Mode != attr.Mode || ga.Attr.Size != attr.Size || ga.Attr.Ino != attr.Ino {
				t.Errorf("%s: lookup says %o/%d/%d, getattr %o/%d/%d", cp, attr.Mode, attr.Size, attr.Ino, ga.Mode, ga.Size, ga.Ino)
			}
			if attr.Uid != uint32(os.Geteuid()) || attr.Gid != uint32(os.Getegid()) {
				t.Errorf("%s: owner %d:%d", cp, attr.Uid, attr.Gid)
			}
			if attr.Ino != n.EmbeddedInode().StableAttr().Ino || attr.Ino < 2 {
				t.Errorf("%s: ino %d, inode has %d", cp, attr.Ino, n.EmbeddedInode().StableAttr().Ino)
			}
			switch attr.Mode & syscall.S_IFMT {
			case syscall.S_IFDIR:
				if attr.Mode&0o7777 != 0o500 {
					t.Errorf("%s: mode %o", cp, attr.Mode)
				}
				visit(cp, n)
			case syscall.S_IFLNK:
			case syscall.S_IFREG:
				files++
				want := uint32(0o400)
				if strings.HasSuffix(cp, "AnsiballZ_ping.py") {
					want = 0o500
				}
				if attr.Mode&0o7777 != want {
					t.Errorf("%s: mode %o, want %o", cp, attr.Mode&0o7777, want)
				}
				data, open, errno := readNode(ctx, n)
				if strings.HasSuffix(cp, "/gone") {
					if errno != syscall.ENOENT {
						t.Errorf("%s: %v, want ENOENT", cp, errno)
					}
					continue
				}
				if errno != 0 {
					t.Fatalf("%s: %v", cp, errno)
				}
				if open.Size != uint64(len(data)) {
					t.Errorf("%s: open file says %d bytes, read %d", cp, open.Size, len(data))
				}
				if strings.HasSuffix(cp, "/args") { // only on the target: size a guess
					continue
				}
				if attr.Size != uint64(len(data)) {
					t.Errorf("%s: stat says %d bytes, read %d", cp, attr.Size, len(data))
				}
			default:
				t.Errorf("%s: mode %o", cp, attr.Mode)
			}
		}
	}
	visit("", root)
	if files < 25 {
		t.Errorf("only %d files", files)
	}
	link, _ := mustWalk(t, root, "journal/latest")
	if dest, errno := link.(gofs.NodeReadlinker).Readlink(ctx); errno != 0 || string(dest) != "000003-passthrough" {
		t.Errorf("latest -> %q, %v", dest, errno)
	}
}

func TestTreeDynamic(t *testing.T) {
	src := newSource(t)
	root := newTree(t, src)
	ctx := context.Background()

	// A running entry's stdout grows; stat follows, and an open file
	// keeps what it opened.
	out, _ := mustWalk(t, root, "journal/000003-passthrough/stdout")
	fh, _, errno := out.(gofs.NodeOpener).Open(ctx, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatal(errno)
	}
	running := src.running
	running.AppendStdout([]byte(" and more"))
	var a fuse.AttrOut
	out.(gofs.NodeGetattrer).Getattr(ctx, nil, &a)
	if a.Size != uint64(len("partial and more")) {
		t.Errorf("stat size %d", a.Size)
	}
	out.(gofs.NodeGetattrer).Getattr(ctx, fh, &a)
	if a.Size != uint64(len("partial")) {
		t.Errorf("fstat size %d", a.Size)
	}

	// The exit file appears when the entry finishes.
	if _, _, errno := walk(ctx, root, "journal/000003-passthrough/exit"); errno != syscall.ENOENT {
		t.Errorf("exit of a running entry: %v", errno)
	}
	running.Finish(130)
	if got := string(mustRead(t, root, "journal/000003-passthrough/exit")); got != "130\n" {
		t.Errorf("exit %q", got)
	}

	// New entries appear, old ones leave the ring (size 5).
	jdir, _ := mustWalk(t, root, "journal")
	old, _ := mustWalk(t, root, "journal/000001-module/stdout")
	for range 3 {
		src.j.Begin(tgt, "exec", nil)
	}
	if got := strings.Join(names(t, jdir), " "); got != "000002-exec 000003-passthrough 000004-exec 000005-exec 000006-exec latest" {
		t.Errorf("journal: %s", got)
	}
	if _, _, errno := walk(ctx, root, "journal/000001-module"); errno != syscall.ENOENT {
		t.Errorf("evicted entry: %v", errno)
	}
	if errno := old.(gofs.NodeGetattrer).Getattr(ctx, nil, &a); errno != syscall.ENOENT {
		t.Errorf("stat of an evicted entry's file: %v", errno)
	}
	if _, _, errno := walk(ctx, root, "journal/000006-module"); errno != syscall.ENOENT {
		t.Errorf("wrong route: %v", errno)
	}

	// Temp dirs and targets come and go.
	tdir, _ := mustWalk(t, root, "targets/alice@web1:22/tmp/"+tmpName)
	src.set(func(s *memSource) { s.tmp[tgt] = s.tmp[tgt][1:] })
	if errno := tdir.(gofs.NodeGetattrer).Getattr(ctx, nil, &a); errno != syscall.ENOENT {
		t.Errorf("stat of a removed temp dir: %v", errno)
	}
	src.set(func(s *memSource) { s.targets = s.targets[1:] })
	if _, _, errno := walk(ctx, root, "targets/alice@web1:22/tmp"); errno != syscall.ENOENT {
		t.Errorf("removed target: %v", errno)
	}

	// The same path has the same inode number, whichever node looked
	// it up (go-fuse then keeps one inode).
	a1, _ := mustWalk(t, root, "journal/000002-exec")
	a2, _ := mustWalk(t, root, "journal/000002-exec")
	if a1.EmbeddedInode().StableAttr() != a2.EmbeddedInode().StableAttr() {
		t.Error("two inode numbers for one path")
	}
}

func TestTreeErrors(t *testing.T) {
	src := newSource(t)
	root := newTree(t, src)
	ctx := context.Background()

	st, _ := mustWalk(t, root, "status")
	for _, flags := range []uint32{syscall.O_WRONLY, syscall.O_RDWR, syscall.O_RDONLY | syscall.O_TRUNC} {
		if _, _, errno := st.(gofs.NodeOpener).Open(ctx, flags); errno != syscall.EROFS {
			t.Errorf("open(%#x): %v, want EROFS", flags, errno)
		}
	}
	src.set(func(s *memSource) { s.statusErr = errors.New("boom") })
	if _, _, errno := readNode(ctx, st); errno != syscall.EIO {
		t.Errorf("status error: %v", errno)
	}

	args, _ := mustWalk(t, root, "targets/alice@web1:22/tmp/"+tmp2Name+"/args")
	for _, tc := range []struct {
		err  error
		want syscall.Errno
	}{
		{fmt.Errorf("x: %w", syscall.EACCES), syscall.EACCES},
		{fmt.Errorf("x: %w", fs.ErrNotExist), syscall.ENOENT},
		{context.Canceled, syscall.EINTR},
		{errors.New("connection lost"), syscall.EIO},
	} {
		src.set(func(s *memSource) { s.remoteErr = tc.err })
		if _, _, errno := readNode(ctx, args); errno != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, errno, tc.want)
		}
	}
	for _, p := range []string{"nope", "journal/nope", "journal/1-x", "targets/nobody", "journal/000002-exec/nope", "status/x"} {
		if _, _, errno := walk(ctx, root, p); errno == 0 {
			t.Errorf("lookup %s succeeded", p)
		}
	}
}

func TestNilJournal(t *testing.T) {
	root := newTree(t, &memSource{})
	jdir, _ := mustWalk(t, root, "journal")
	if n := names(t, jdir); len(n) != 0 {
		t.Errorf("journal: %v", n)
	}
	if n := strings.Join(names(t, root), " "); n != "status journal targets" {
		t.Errorf("root: %v", n)
	}
}

// A listing must hold only names Lookup resolves, once each: a Source
// that names two targets alike, or one too long for the kernel, must not
// give ls two entries or a d????????? one.
func TestTreeListsResolvableNamesOnce(t *testing.T) {
	src := newSource(t)
	long := strings.Repeat("h", 300)
	src.set(func(s *memSource) {
		s.targets = []Target{{Name: tgt}, {Name: tgt}, {Name: "u@" + long + ":22"}}
	})
	root := newTree(t, src)
	targets, _ := mustWalk(t, root, "targets")
	got := names(t, targets)
	if strings.Join(got, ",") != tgt {
		t.Fatalf("/targets lists %q, want %q once", got, tgt)
	}
	for _, n := range got {
		mustWalk(t, root, "targets/"+n)
	}
}
