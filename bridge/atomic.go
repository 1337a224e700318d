package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/pkg/sftp"
)

// tempName is a hidden sibling of base, unique enough for concurrent forks.
func tempName(base string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "." + base + ".ab-" + hex.EncodeToString(b[:]) + "~"
}

// putAtomic writes r to the remote file dst so that dst is either absent
// or complete: hidden temp file in the same directory, fsync, rename.
// The file gets the mode OpenSSH's `put` would give it: an existing
// file keeps its mode, a new one gets mode minus the server's umask.
//
// No byte is written while the file is wider than its final mode. SFTP
// as pkg/sftp speaks it creates files with the server's default mode
// (0666 minus umask); a narrower one is set before writing. Where other
// users can enter the directory, one of them could have opened the file
// in between and read on through that handle: then the file is made in
// a private (0700) directory of its own beside dst, and renamed into
// place.
func putAtomic(sc *sftp.Client, dst string, r io.Reader, mode fs.FileMode) (int64, error) {
	var keepMode *fs.FileMode
	if st, err := sc.Stat(dst); err == nil {
		if st.IsDir() {
			return 0, fmt.Errorf("%w: is a directory", fs.ErrExist)
		}
		m := st.Mode().Perm()
		keepMode = &m
	}
	dir := path.Dir(dst)
	finalMode := func(created fs.FileMode) fs.FileMode {
		if keepMode != nil {
			return *keepMode
		}
		return mode.Perm() &^ umaskFromCreated(created)
	}
	tmp := path.Join(dir, tempName(path.Base(dst)))
	f, final, err := createNarrow(sc, tmp, finalMode, func() bool { return privateDir(sc, dir) })
	if errors.Is(err, errWide) {
		return putStaged(sc, dst, r, finalMode)
	}
	if err != nil {
		return 0, err
	}
	return writeAndRename(sc, f, tmp, dst, r, final)
}

// writeFailed is a failure to write a file's content, once it was
// created: sftp and scp word it unlike a failure to create it.
type writeFailed struct{ err error }

func (e *writeFailed) Error() string { return e.err.Error() }
func (e *writeFailed) Unwrap() error { return e.err }

// errWide: the file was created wider than its final mode, where others
// could have opened it.
var errWide = errors.New("created wider than its final mode")

// createNarrow creates tmp and gives it its final mode before anything
// is written. A file created wider is removed with errWide unless
// private says no one else can reach it.
func createNarrow(sc *sftp.Client, tmp string, finalMode func(created fs.FileMode) fs.FileMode, private func() bool) (*sftp.File, fs.FileMode, error) {
	f, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*sftp.File, fs.FileMode, error) {
		f.Close()
		_ = sc.Remove(tmp)
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return fail(fmt.Errorf("stat: %w", err))
	}
	created := st.Mode().Perm()
	final := finalMode(created)
	if created&^final == 0 {
		return f, final, nil
	}
	if !private() {
		return fail(errWide)
	}
	if err := f.Chmod(final); err != nil {
		return fail(fmt.Errorf("chmod: %w", err))
	}
	return f, final, nil
}

// privateDir reports whether only its owner can enter dir.
func privateDir(sc *sftp.Client, dir string) bool {
	st, err := sc.Stat(dir)
	return err == nil && st.IsDir() && st.Mode().Perm()&0o077 == 0
}

// putStaged is putAtomic through a private directory beside dst.
func putStaged(sc *sftp.Client, dst string, r io.Reader, finalMode func(created fs.FileMode) fs.FileMode) (int64, error) {
	stage := path.Join(path.Dir(dst), tempName(path.Base(dst)))
	if err := sc.Mkdir(stage); err != nil {
		return 0, err
	}
	defer func() { _ = sc.RemoveDirectory(stage) }()
	// Empty until this: whoever entered it before cannot look up what
	// is made in it after (lookups check the directory's mode each time).
	if err := sc.Chmod(stage, 0o700); err != nil {
		return 0, fmt.Errorf("chmod: %w", err)
	}
	tmp := path.Join(stage, path.Base(dst))
	f, final, err := createNarrow(sc, tmp, finalMode, func() bool { return true })
	if err != nil {
		return 0, err
	}
	return writeAndRename(sc, f, tmp, dst, r, final)
}

// writeAndRename fills the new file f (at tmp), gives it mode final if
// it has not got it yet, and renames it over dst; on failure tmp goes.
func writeAndRename(sc *sftp.Client, f *sftp.File, tmp, dst string, r io.Reader, final fs.FileMode) (int64, error) {
	committed := false
	defer func() {
		if !committed {
			f.Close()
			_ = sc.Remove(tmp)
		}
	}()
	n, err := f.ReadFrom(r)
	if err != nil {
		return n, &writeFailed{err}
	}
	if err := f.Sync(); err != nil && !isUnsupported(err) {
		return n, fmt.Errorf("fsync: %w", err)
	}
	// Wider than created (an existing file's mode, a put's 0755): now.
	if err := f.Chmod(final); err != nil {
		return n, fmt.Errorf("chmod: %w", err)
	}
	if err := f.Close(); err != nil {
		return n, err
	}
	if err := renameOver(sc, tmp, dst); err != nil {
		return n, err
	}
	committed = true
	return n, nil
}

// umaskFromCreated infers the server's umask from the mode of a file it
// created with the default 0666; execute bits follow the read bits, as
// in every umask in common use.
func umaskFromCreated(created fs.FileMode) fs.FileMode {
	u := ^created & 0o666
	return u | (u&0o444)>>2
}

func renameOver(sc *sftp.Client, from, to string) error {
	err := sc.PosixRename(from, to)
	if isUnsupported(err) {
		err = sc.Rename(from, to)
	}
	return err
}

// getAtomic copies the open remote file rf to the new local file dst the
// same way round: hidden temp, fsync, rename. It gets the remote mode
// plus owner-write minus the shim's umask, as sftp's get gives it.
func getAtomic(ctx context.Context, rf *sftp.File, dst string, umask int) (int64, error) {
	st, err := rf.Stat()
	if err != nil {
		return 0, err
	}
	mode := (st.Mode().Perm() | 0o200) &^ fs.FileMode(umask)
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".ab-*~")
	if err != nil {
		return 0, err
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := rf.WriteTo(ctxWriter{ctx, tmp})
	if err != nil {
		return n, err
	}
	if err := tmp.Chmod(mode); err != nil {
		return n, err
	}
	if err := tmp.Sync(); err != nil {
		return n, err
	}
	if err := tmp.Close(); err != nil {
		return n, err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return n, err
	}
	committed = true
	return n, nil
}

func isUnsupported(err error) bool {
	var se *sftp.StatusError
	return errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxOpUnsupported
}

// sftpErrText renders an error the way OpenSSH's fx2txt does.
func sftpErrText(err error) string {
	var se *sftp.StatusError
	if errors.As(err, &se) {
		switch se.FxCode() {
		case sftp.ErrSSHFxNoSuchFile:
			return "No such file or directory"
		case sftp.ErrSSHFxPermissionDenied:
			return "Permission denied"
		case sftp.ErrSSHFxFailure:
			return "Failure"
		case sftp.ErrSSHFxOpUnsupported:
			return "Operation unsupported"
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, fs.ErrPermission):
		return "Permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
