package fusefs

import (
	"context"
	"io/fs"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/journal"
)

// Source is what the file system shows; the daemon implements it. The
// file system calls it on every lookup, listing, stat and open, from
// many goroutines at once, so the methods must be safe for concurrent
// use and, except ReadRemote, answer from memory without blocking.
type Source interface {
	// Status returns the daemon's state as JSON, shown as /status.
	Status() ([]byte, error)
	// Journal returns the journal of recent invocations shown under
	// /journal; nil shows an empty directory.
	Journal() *journal.Journal
	// Targets lists the targets shown under /targets.
	Targets() []Target
	// TempDirs lists the shared temp dirs of a target (a Target.Name);
	// nil when there are none or the target is gone.
	TempDirs(target string) []TempDir
	// ReadRemote reads a file that lives only on the target. It is
	// called when such a file is opened; an error that is (or wraps) a
	// syscall.Errno is passed on as is, fs.ErrNotExist as ENOENT,
	// anything else as EIO.
	ReadRemote(ctx context.Context, target, path string) ([]byte, error)
}

// Target is a target the daemon knows.
type Target struct {
	// Name identifies the target, e.g. "user@host:port". In file names
	// a '/' shows as %2F and a '%' as %25.
	Name string
}

// TempDir is one of Ansible's ansible-tmp-* dirs, as the bridge holds
// it.
type TempDir struct {
	// Name is the base name, e.g. ansible-tmp-1700000000.1-123-456.
	Name string
	// Path is the full path on the target.
	Path string
	// OnTarget tells whether the dir exists on the target yet, or
	// only in the bridge.
	OnTarget bool
	// Mtime is when the dir was created (or last changed).
	Mtime time.Time
	// Files are the files in the dir.
	Files []TempFile
}

// TempFile is a file in a TempDir.
type TempFile struct {
	// Name is the base name, e.g. AnsiballZ_command.py.
	Name string
	// Size is the size on the target, which stat shows for a file not
	// held; it may be a guess (0 if unknown): reads return what
	// ReadRemote returns. A held file shows the size of its Data.
	Size int64
	// Mode holds the permission bits; the file system shows the
	// owner's read and execute bits only.
	Mode fs.FileMode
	// Mtime is when the file was written.
	Mtime time.Time
	// Held is set when the bridge holds the content, in Data;
	// otherwise the file is read from the target (ReadRemote with Path
	// joined to Name) when opened.
	Held bool
	Data []byte
}
