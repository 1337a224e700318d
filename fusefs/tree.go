package fusefs

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// The layout (see the package doc). Each function returns a directory's
// entries; the nodes they make hold only names and look everything up
// again when asked.

func (f *fsys) root() *dirNode {
	return &dirNode{fsys: f, path: "", list: f.rootList}
}

func (f *fsys) dir(list func(context.Context) ([]child, time.Time, syscall.Errno)) func(string) gofs.InodeEmbedder {
	return func(p string) gofs.InodeEmbedder { return &dirNode{fsys: f, path: p, list: list} }
}

func (f *fsys) file(stat func(context.Context) (fileInfo, syscall.Errno)) func(string) gofs.InodeEmbedder {
	return func(string) gofs.InodeEmbedder { return &fileNode{fsys: f, stat: stat} }
}

func (f *fsys) rootList(context.Context) ([]child, time.Time, syscall.Errno) {
	return []child{
		{"status", syscall.S_IFREG, f.file(f.status)},
		{"journal", syscall.S_IFDIR, f.dir(f.journalList)},
		{"targets", syscall.S_IFDIR, f.dir(f.targetsList)},
	}, f.born, 0
}

func (f *fsys) status(context.Context) (fileInfo, syscall.Errno) {
	b, err := f.src.Status()
	if err != nil {
		f.log.WithError(err).Warn("debug view: status")
		return fileInfo{}, syscall.EIO
	}
	return fileInfo{data: b, mtime: time.Now()}, 0
}

// /journal: an entry directory per kept invocation, and latest.
func (f *fsys) journalList(context.Context) ([]child, time.Time, syscall.Errno) {
	sums := f.src.Journal().List()
	kids := make([]child, 0, len(sums)+1)
	mtime := f.born
	for _, s := range sums {
		kids = append(kids, child{entryDirName(s.Seq, s.Route), syscall.S_IFDIR, f.dir(f.entryList(s.Seq))})
		mtime = s.Started
	}
	if len(sums) > 0 {
		kids = append(kids, child{"latest", syscall.S_IFLNK, func(string) gofs.InodeEmbedder {
			return &linkNode{fsys: f, dest: f.latest}
		}})
	}
	return kids, mtime, 0
}

// latest is the newest entry's directory name, asked again on each
// readlink.
func (f *fsys) latest(context.Context) (string, syscall.Errno) {
	sums := f.src.Journal().List()
	if len(sums) == 0 {
		return "", syscall.ENOENT
	}
	s := sums[len(sums)-1]
	return entryDirName(s.Seq, s.Route), 0
}

func (f *fsys) entryList(seq uint64) func(context.Context) ([]child, time.Time, syscall.Errno) {
	return func(context.Context) ([]child, time.Time, syscall.Errno) {
		v, ok := f.src.Journal().Get(seq)
		if !ok {
			return nil, time.Time{}, syscall.ENOENT
		}
		files := entryFiles(v)
		kids := make([]child, len(files))
		for i, nf := range files {
			kids[i] = child{nf.name, syscall.S_IFREG, f.file(f.entryFileStat(seq, nf.name))}
		}
		return kids, v.Started, 0
	}
}

func (f *fsys) entryFileStat(seq uint64, name string) func(context.Context) (fileInfo, syscall.Errno) {
	return func(context.Context) (fileInfo, syscall.Errno) {
		v, ok := f.src.Journal().Get(seq)
		if !ok {
			return fileInfo{}, syscall.ENOENT
		}
		data, ok := entryFile(v, name)
		if !ok {
			return fileInfo{}, syscall.ENOENT
		}
		return fileInfo{data: data, mtime: entryEnd(v)}, 0
	}
}

// /targets: a directory per target.
func (f *fsys) targetsList(context.Context) ([]child, time.Time, syscall.Errno) {
	ts := f.src.Targets()
	kids := make([]child, 0, len(ts))
	for _, t := range ts {
		kids = append(kids, child{escapeName(t.Name), syscall.S_IFDIR, f.dir(f.targetList(t.Name))})
	}
	return kids, f.born, 0
}

// /targets/<target>: tmp and tmpdirs.
func (f *fsys) targetList(target string) func(context.Context) ([]child, time.Time, syscall.Errno) {
	return func(context.Context) ([]child, time.Time, syscall.Errno) {
		if !f.hasTarget(target) {
			return nil, time.Time{}, syscall.ENOENT
		}
		return []child{
			{"tmp", syscall.S_IFDIR, f.dir(f.tmpList(target))},
			{"tmpdirs", syscall.S_IFREG, f.file(func(context.Context) (fileInfo, syscall.Errno) {
				if !f.hasTarget(target) {
					return fileInfo{}, syscall.ENOENT
				}
				return fileInfo{data: tempDirsTable(f.src.TempDirs(target)), mtime: time.Now()}, 0
			})},
		}, f.born, 0
	}
}

func (f *fsys) hasTarget(target string) bool {
	for _, t := range f.src.Targets() {
		if t.Name == target {
			return true
		}
	}
	return false
}

// /targets/<target>/tmp: the shared temp dirs.
func (f *fsys) tmpList(target string) func(context.Context) ([]child, time.Time, syscall.Errno) {
	return func(context.Context) ([]child, time.Time, syscall.Errno) {
		if !f.hasTarget(target) {
			return nil, time.Time{}, syscall.ENOENT
		}
		dirs := f.src.TempDirs(target)
		kids := make([]child, 0, len(dirs))
		for _, d := range dirs {
			kids = append(kids, child{escapeName(d.Name), syscall.S_IFDIR, f.dir(f.tempDirList(target, d.Name))})
		}
		return kids, f.born, 0
	}
}

func (f *fsys) tempDir(target, name string) (TempDir, bool) {
	for _, d := range f.src.TempDirs(target) {
		if d.Name == name {
			return d, true
		}
	}
	return TempDir{}, false
}

// /targets/<target>/tmp/<dir>: the files of one temp dir.
func (f *fsys) tempDirList(target, dir string) func(context.Context) ([]child, time.Time, syscall.Errno) {
	return func(context.Context) ([]child, time.Time, syscall.Errno) {
		d, ok := f.tempDir(target, dir)
		if !ok {
			return nil, time.Time{}, syscall.ENOENT
		}
		kids := make([]child, 0, len(d.Files))
		for _, tf := range d.Files {
			kids = append(kids, child{escapeName(tf.Name), syscall.S_IFREG, f.file(f.tempFileStat(target, dir, tf.Name))})
		}
		return kids, d.Mtime, 0
	}
}

func (f *fsys) tempFileStat(target, dir, name string) func(context.Context) (fileInfo, syscall.Errno) {
	return func(context.Context) (fileInfo, syscall.Errno) {
		d, ok := f.tempDir(target, dir)
		if !ok {
			return fileInfo{}, syscall.ENOENT
		}
		for _, tf := range d.Files {
			if tf.Name != name {
				continue
			}
			info := fileInfo{mtime: tf.Mtime, exec: tf.Mode&0o100 != 0}
			j := f.src.Journal()
			if tf.Held {
				info.data = j.Redact(tf.Data)
				return info, 0
			}
			info.size = max(tf.Size, 0)
			p := path.Join(d.Path, tf.Name)
			info.load = func(ctx context.Context) ([]byte, syscall.Errno) {
				b, err := f.src.ReadRemote(ctx, target, p)
				if err != nil {
					return nil, f.errno(err, "read from target", target, p)
				}
				return j.Redact(b), 0
			}
			return info, 0
		}
		return fileInfo{}, syscall.ENOENT
	}
}

// errno turns a Source error into what the kernel is told, logging the
// unexpected ones.
func (f *fsys) errno(err error, what, target, p string) syscall.Errno {
	var e syscall.Errno
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.Is(err, context.DeadlineExceeded):
		return syscall.ETIMEDOUT
	}
	f.log.WithError(err).WithField("target", target).WithField("path", p).Warn("debug view: " + what)
	return syscall.EIO
}
