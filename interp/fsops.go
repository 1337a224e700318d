package interp

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"syscall"
	"time"
)

// errnos maps the agent's errno names to local errors, so that
// errors.Is(err, fs.ErrNotExist) and friends work.
var errnos = map[string]syscall.Errno{
	"EPERM": syscall.EPERM, "ENOENT": syscall.ENOENT, "EIO": syscall.EIO,
	"EACCES": syscall.EACCES, "EBUSY": syscall.EBUSY, "EEXIST": syscall.EEXIST,
	"EXDEV": syscall.EXDEV, "ENOTDIR": syscall.ENOTDIR, "EISDIR": syscall.EISDIR,
	"EINVAL": syscall.EINVAL, "ETXTBSY": syscall.ETXTBSY, "EFBIG": syscall.EFBIG,
	"ENOSPC": syscall.ENOSPC, "EROFS": syscall.EROFS, "ENAMETOOLONG": syscall.ENAMETOOLONG,
	"ENOTEMPTY": syscall.ENOTEMPTY, "ELOOP": syscall.ELOOP, "EDQUOT": syscall.EDQUOT,
}

// remoteErr turns an error response into an error; with an errno and a
// path it is an *fs.PathError wrapping a syscall.Errno.
func remoteErr(op, p string, r *response) error {
	if e, ok := errnos[r.Errno]; ok && p != "" {
		return &fs.PathError{Op: op, Path: p, Err: e}
	}
	if p != "" {
		return &fs.PathError{Op: op, Path: p, Err: errors.New(r.Error)}
	}
	return errors.New(op + ": " + r.Error)
}

func (c *Client) pathOp(ctx context.Context, op, p string, req map[string]any, blob ...[]byte) (*response, error) {
	req["op"] = op
	req["path"] = p
	r, err := c.roundTrip(ctx, req, blob...)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: p, Err: err}
	}
	if r.Error != "" {
		return nil, remoteErr(op, p, r)
	}
	return r, nil
}

// FileInfo is what Stat returns; Sys() gives a *StatT.
type FileInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
	sys   *StatT
}

// StatT is the unix part of a FileInfo.
type StatT struct {
	Mode     uint32 // st_mode
	UID, GID int
	Target   string // symlink target, for a symlink
}

var _ fs.FileInfo = (*FileInfo)(nil)

// Name is the base name.
func (fi *FileInfo) Name() string { return fi.name }

// Size is the size in bytes.
func (fi *FileInfo) Size() int64 { return fi.size }

// Mode is the file mode, as os.Lstat would give it.
func (fi *FileInfo) Mode() fs.FileMode { return fi.mode }

// ModTime is the modification time.
func (fi *FileInfo) ModTime() time.Time { return fi.mtime }

// IsDir reports whether it is a directory.
func (fi *FileInfo) IsDir() bool { return fi.mode.IsDir() }

// Sys returns a *StatT.
func (fi *FileInfo) Sys() any { return fi.sys }

// fileMode converts st_mode to a FileMode.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	case syscall.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// Stat returns what lstat(2) says about path on the target. A missing
// path gives an error matching fs.ErrNotExist.
func (c *Client) Stat(ctx context.Context, p string) (*FileInfo, error) {
	r, err := c.pathOp(ctx, "stat", p, map[string]any{})
	if err != nil {
		return nil, err
	}
	if r.Stat == nil {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: errors.New("no stat in response")}
	}
	s := r.Stat
	return &FileInfo{
		name:  path.Base(p),
		size:  s.Size,
		mode:  fileMode(s.Mode),
		mtime: time.Unix(0, s.MtimeNs),
		sys:   &StatT{Mode: s.Mode, UID: s.UID, GID: s.GID, Target: s.Target},
	}, nil
}

// Mkdir creates path and any missing parents, like mkdir -p; directories
// it creates get exactly mode (the umask does not apply). An existing
// directory is left alone.
func (c *Client) Mkdir(ctx context.Context, p string, mode fs.FileMode) error {
	_, err := c.pathOp(ctx, "mkdir", p, map[string]any{"mode": unixMode(mode)})
	return err
}

// Chmod sets path's permission bits.
func (c *Client) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	_, err := c.pathOp(ctx, "chmod", p, map[string]any{"mode": unixMode(mode)})
	return err
}

// RemoveAll removes path and anything below it, like rm -rf; a missing
// path is not an error. A symlink is removed, not followed.
func (c *Client) RemoveAll(ctx context.Context, p string) error {
	_, err := c.pathOp(ctx, "rmtree", p, map[string]any{})
	return err
}

// RemoveAllNoWait is RemoveAll without an answer: the request is queued
// behind those sent before it and ahead of those sent after, so a later
// request sees path gone, but no reply crosses the wire (and no round
// trip is spent). A failure is logged by the agent on its stderr.
func (c *Client) RemoveAllNoWait(p string) error {
	payload, err := encodeReq(map[string]any{"op": "rmtree", "path": p, "noreply": true})
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.err != nil {
		defer c.mu.Unlock()
		return c.err
	}
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	id := c.nextID
	c.mu.Unlock()
	c.reqs.Add(1)
	return c.enqueue(frameReq, id, payload)
}

// PutFile writes data to path atomically: a hidden temp file in the same
// directory, chmod, fsync, rename.
func (c *Client) PutFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	_, err := c.pathOp(ctx, "put", p, map[string]any{"mode": unixMode(mode)}, data)
	return err
}

// GetFile returns path's content.
func (c *Client) GetFile(ctx context.Context, p string) ([]byte, error) {
	r, err := c.pathOp(ctx, "get", p, map[string]any{})
	if err != nil {
		return nil, err
	}
	return r.blob, nil
}
