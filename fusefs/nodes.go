package fusefs

import (
	"context"
	"hash/fnv"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/sirupsen/logrus"
)

// The tree is dynamic: a node holds only its identity (a path and the
// closures that know what it shows) and asks the Source again on every
// call, so nothing goes stale. Inode numbers are hashes of paths, so the
// same path always gets the same inode, whichever lookup created it.

const (
	dirPerm  = 0o500
	filePerm = 0o400
	linkPerm = 0o777
)

// fsys is what all nodes of a mount share.
type fsys struct {
	src      Source
	log      logrus.FieldLogger
	uid, gid uint32
	born     time.Time // the mount time, for what has no time of its own
}

// child is one entry of a directory.
type child struct {
	name string
	mode uint32 // S_IFDIR, S_IFREG or S_IFLNK
	node func(path string) fs.InodeEmbedder
}

// inoOf gives the inode number of the node at path: a hash below the
// numbers go-fuse hands out itself (2^63 and up), never 0 or 1 (root).
func inoOf(path string, mode uint32) uint64 {
	h := fnv.New64a()
	h.Write([]byte{byte(mode >> 12)})
	h.Write([]byte(path))
	ino := h.Sum64() &^ (1 << 63)
	if ino < 2 {
		ino += 2
	}
	return ino
}

// fill sets the attributes all nodes share.
func (f *fsys) fill(a *fuse.Attr, ino uint64, mode uint32, size int64, mtime time.Time) {
	if mtime.IsZero() {
		mtime = f.born
	}
	a.Ino = ino
	a.Mode = mode
	a.Size = uint64(size)
	a.Blocks = (uint64(size) + 511) / 512
	a.Blksize = 4096
	a.Nlink = 1 // "unknown" for directories: find(1) must not count subdirs
	a.Owner = fuse.Owner{Uid: f.uid, Gid: f.gid}
	a.SetTimes(&mtime, &mtime, &mtime)
}

// nameMax is the longest file name the kernel accepts (NAME_MAX).
const nameMax = 255

// dirNode is a directory whose entries come from list.
type dirNode struct {
	fs.Inode
	fsys *fsys
	path string
	// list returns the entries and the directory's mtime; ENOENT once
	// the directory is gone.
	list func(ctx context.Context) ([]child, time.Time, syscall.Errno)
}

var (
	_ fs.NodeGetattrer = (*dirNode)(nil)
	_ fs.NodeLookuper  = (*dirNode)(nil)
	_ fs.NodeReaddirer = (*dirNode)(nil)
)

// Getattr implements fs.NodeGetattrer.
func (d *dirNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	_, mtime, errno := d.list(ctx)
	if errno != 0 {
		return errno
	}
	d.fsys.fill(&out.Attr, d.StableAttr().Ino, syscall.S_IFDIR|dirPerm, 0, mtime)
	return 0
}

// Lookup implements fs.NodeLookuper.
func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	kids, _, errno := d.list(ctx)
	if errno != 0 {
		return nil, errno
	}
	for _, k := range kids {
		if k.name != name {
			continue
		}
		p := d.path + "/" + name
		ch := d.NewInode(ctx, k.node(p), fs.StableAttr{Mode: k.mode, Ino: inoOf(p, k.mode)})
		ga, ok := ch.Operations().(fs.NodeGetattrer)
		if !ok {
			return nil, syscall.EIO
		}
		var a fuse.AttrOut
		if errno := ga.Getattr(ctx, nil, &a); errno != 0 {
			return nil, errno
		}
		out.Attr = a.Attr
		return ch, 0
	}
	return nil, syscall.ENOENT
}

// Readdir implements fs.NodeReaddirer.
func (d *dirNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	kids, _, errno := d.list(ctx)
	if errno != 0 {
		return nil, errno
	}
	ents := make([]fuse.DirEntry, 0, len(kids))
	seen := make(map[string]bool, len(kids))
	for _, k := range kids {
		// A listing shows only what Lookup finds: a name given twice by
		// the Source (Lookup takes the first) or one too long for the
		// kernel would show as an unstat-able d????????? entry.
		if seen[k.name] || len(k.name) > nameMax {
			continue
		}
		seen[k.name] = true
		ents = append(ents, fuse.DirEntry{Name: k.name, Mode: k.mode, Ino: inoOf(d.path+"/"+k.name, k.mode)})
	}
	return fs.NewListDirStream(ents), 0
}

// fileInfo is what a file node shows.
type fileInfo struct {
	// data is the content, unless load is set.
	data []byte
	// load, if set, fetches the content when the file is opened; size is
	// what stat shows until then.
	load  func(ctx context.Context) ([]byte, syscall.Errno)
	size  int64
	mtime time.Time
	exec  bool // show the owner's execute bit
}

func (i *fileInfo) perm() uint32 {
	if i.exec {
		return filePerm | 0o100
	}
	return filePerm
}

// fileNode is a read-only file whose content stat returns.
type fileNode struct {
	fs.Inode
	fsys *fsys
	stat func(ctx context.Context) (fileInfo, syscall.Errno)
}

var (
	_ fs.NodeGetattrer = (*fileNode)(nil)
	_ fs.NodeOpener    = (*fileNode)(nil)
)

// Getattr implements fs.NodeGetattrer. On an open file it describes the
// content the open took, so fstat and read agree.
func (n *fileNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*handle); ok {
		out.Attr = h.attr
		return 0
	}
	info, errno := n.stat(ctx)
	if errno != 0 {
		return errno
	}
	size := int64(len(info.data))
	if info.load != nil {
		size = info.size
	}
	n.fsys.fill(&out.Attr, n.StableAttr().Ino, syscall.S_IFREG|info.perm(), size, info.mtime)
	return 0
}

// Open implements fs.NodeOpener. The content is taken at open and read
// with direct I/O, so a file that changes, or whose size stat could only
// guess, still reads whole and consistent.
func (n *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	info, errno := n.stat(ctx)
	if errno != 0 {
		return nil, 0, errno
	}
	data := info.data
	if info.load != nil {
		if data, errno = info.load(ctx); errno != 0 {
			return nil, 0, errno
		}
	}
	h := &handle{data: data}
	n.fsys.fill(&h.attr, n.StableAttr().Ino, syscall.S_IFREG|info.perm(), int64(len(data)), info.mtime)
	return h, fuse.FOPEN_DIRECT_IO, 0
}

// handle is an open file: the content as it was at open.
type handle struct {
	data []byte
	attr fuse.Attr
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
)

// Read implements fs.FileReader.
func (h *handle) Read(_ context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off < 0 {
		return nil, syscall.EINVAL
	}
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(h.data)))
	return fuse.ReadResultData(h.data[off:end]), 0
}

// Getattr implements fs.FileGetattrer.
func (h *handle) Getattr(_ context.Context, out *fuse.AttrOut) syscall.Errno {
	out.Attr = h.attr
	return 0
}

// linkNode is a symbolic link whose target dest returns.
type linkNode struct {
	fs.Inode
	fsys *fsys
	dest func(ctx context.Context) (string, syscall.Errno)
}

var (
	_ fs.NodeGetattrer  = (*linkNode)(nil)
	_ fs.NodeReadlinker = (*linkNode)(nil)
)

// Getattr implements fs.NodeGetattrer.
func (l *linkNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	dest, errno := l.dest(ctx)
	if errno != 0 {
		return errno
	}
	l.fsys.fill(&out.Attr, l.StableAttr().Ino, syscall.S_IFLNK|linkPerm, int64(len(dest)), time.Time{})
	return 0
}

// Readlink implements fs.NodeReadlinker.
func (l *linkNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	dest, errno := l.dest(ctx)
	if errno != 0 {
		return nil, errno
	}
	return []byte(dest), 0
}
