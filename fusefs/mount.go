package fusefs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/sirupsen/logrus"
)

// fsName is the mount's source and type (fuse.ansible-bridge) as
// mount(8) and /proc/self/mountinfo show them.
const fsName = "ansible-bridge"

// timeout is how long the kernel may cache names and attributes: new
// journal entries show at once in listings, and a stat is at most this
// old (reads are always current).
const timeout = time.Second

// devFuse is the FUSE device; a variable for tests.
var devFuse = "/dev/fuse"

// Available returns nil when this process can mount a FUSE file system,
// or a one-line explanation of what is missing: the /dev/fuse device,
// the right to open it (containers often lack it; fusermount3 opens it
// with the caller's rights too), or, when not root, the fusermount3
// helper.
func Available() error {
	st, err := os.Stat(devFuse)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("fuse unavailable: no %s (load the fuse module; in a container pass --device /dev/fuse)", devFuse)
		}
		return fmt.Errorf("fuse unavailable: %w", err)
	}
	if st.Mode()&fs.ModeCharDevice == 0 {
		return fmt.Errorf("fuse unavailable: %s is not a character device", devFuse)
	}
	// fusermount3 opens the device with the caller's rights too.
	f, err := os.OpenFile(devFuse, os.O_RDWR, 0)
	switch {
	case errors.Is(err, syscall.EPERM):
		return fmt.Errorf("fuse unavailable: %w (a container without the device? run it with --device /dev/fuse)", err)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("fuse unavailable: %w (/dev/fuse is usually mode 0666)", err)
	case err != nil:
		return fmt.Errorf("fuse unavailable: %w", err)
	}
	f.Close()
	if _, err := fusermount(); err != nil && os.Geteuid() != 0 {
		return errors.New("fuse unavailable: no fusermount3 (or fusermount) on PATH (install fuse3)")
	}
	return nil
}

// fusermount finds the helper as go-fuse does.
func fusermount() (string, error) {
	for _, name := range []string{"fusermount3", "fusermount"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no fusermount3 on PATH")
}

// Mounted is a mounted debug view.
type Mounted struct {
	dir    string
	server *fuse.Server
	log    logrus.FieldLogger

	once sync.Once
	err  error
}

// Mount shows src at dir, read-only and to the daemon's user only,
// until Unmount. ctx bounds the mounting, not the mount; log (nil
// discards) gets the mount's events and go-fuse's messages. dir is created
// (0700) if missing. A stale mount left at dir by a daemon that died
// ("transport endpoint is not connected") is detached first; a live
// FUSE mount there is an error, as is FUSE being unavailable (see
// Available).
func Mount(ctx context.Context, dir string, src Source, log logrus.FieldLogger) (*Mounted, error) {
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	if err := Available(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fusefs: %w", err)
	}
	log = log.WithField("mount", dir)
	if err := clearStale(ctx, dir, log); err != nil {
		return nil, fmt.Errorf("fusefs: mount %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fusefs: mount %s: %w", dir, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fusefs: mount %s: %w", dir, err)
	}
	server, err := gofs.Mount(dir, newFS(src, log).root(), options(log))
	if err != nil {
		return nil, fmt.Errorf("fusefs: mount %s: %w", dir, err)
	}
	log.Info("debug view mounted")
	return &Mounted{dir: dir, server: server, log: log}, nil
}

func newFS(src Source, log logrus.FieldLogger) *fsys {
	return &fsys{
		src:  src,
		log:  log,
		uid:  uint32(os.Geteuid()),
		gid:  uint32(os.Getegid()),
		born: time.Now(),
	}
}

func options(l logrus.FieldLogger) *gofs.Options {
	t := timeout
	logger := log.New(logWriter{l}, "", 0)
	return &gofs.Options{
		EntryTimeout:   &t,
		AttrTimeout:    &t,
		RootStableAttr: &gofs.StableAttr{Ino: 1},
		UID:            uint32(os.Geteuid()),
		GID:            uint32(os.Getegid()),
		Logger:         logger,
		MountOptions: fuse.MountOptions{
			FsName: fsName,
			Name:   fsName,
			// default_permissions: the kernel checks the 0400/0500
			// modes; without allow_other no other user gets in at all.
			Options:          []string{"default_permissions", "ro", "nosuid", "nodev", "noexec"},
			DirectMount:      os.Geteuid() == 0, // falls back to fusermount3
			DirectMountFlags: syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC,
			DisableXAttrs:    true,
			Logger:           logger,
		},
	}
}

// logWriter passes go-fuse's log lines to the injected logger.
type logWriter struct{ log logrus.FieldLogger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Warn("go-fuse: " + strings.TrimSpace(string(p)))
	return len(p), nil
}

// Dir returns the absolute path of the mount point.
func (m *Mounted) Dir() string { return m.dir }

// unmountWait bounds how long Unmount waits for the kernel to end the
// mount's requests once it is unmounted; it takes milliseconds unless
// another mount namespace holds a copy.
const unmountWait = 3 * time.Second

// Unmount ends the mount. When the mount is busy (a shell sits in it, a
// file is open) it is detached lazily instead: it disappears from the
// tree at once and the kernel lets go once the last user leaves. Only
// the first call does anything; later ones return its result.
func (m *Mounted) Unmount() error {
	m.once.Do(func() {
		done := make(chan error, 1)
		go func() { done <- m.server.Unmount() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(unmountWait):
			// Gone from this mount namespace, but a copy in another
			// (`unshare -m`, a container started meanwhile) keeps the
			// kernel's connection, whose requests go-fuse waits on for
			// ever. The process's exit closes the device, which ends
			// it: the copy then says "not connected".
			m.log.Warn("debug view unmounted here but still mounted in another mount namespace; left to end with the daemon")
			return
		}
		if err == nil {
			m.log.Info("debug view unmounted")
			return
		}
		m.log.WithError(err).Warn("debug view busy; detaching it")
		if derr := detach(context.Background(), m.dir); derr != nil {
			m.err = fmt.Errorf("fusefs: unmount %s: %w", m.dir, errors.Join(err, derr))
		}
	})
	return m.err
}

// clearStale detaches a dead FUSE mount at dir and refuses a live one.
func clearStale(ctx context.Context, dir string, log logrus.FieldLogger) error {
	err := statfsCtx(ctx, dir)
	switch {
	case errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED):
		log.WithError(err).Info("detaching a stale mount")
		return detach(ctx, dir)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	if fstype, ok := fuseMountAt(dir); ok {
		return fmt.Errorf("already mounted (%s) and answering; unmount it first", fstype)
	}
	return nil
}

// statfsCtx asks the file system at dir for its statistics, giving up
// when ctx ends (a hung FUSE server can block forever). Unlike stat,
// which the kernel may answer from its cache, statfs always reaches a
// FUSE server, so a dead one shows as ENOTCONN.
func statfsCtx(ctx context.Context, dir string) error {
	done := make(chan error, 1)
	go func() {
		var st syscall.Statfs_t
		err := syscall.Statfs(dir, &st)
		if err != nil {
			err = &fs.PathError{Op: "statfs", Path: dir, Err: err}
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("statfs %s: %w", dir, ctx.Err())
	}
}

// detach unmounts dir lazily: with umount2(MNT_DETACH) as root, else (or
// if that fails) with fusermount3 -u -z.
func detach(ctx context.Context, dir string) error {
	var errs []error
	if os.Geteuid() == 0 {
		err := syscall.Unmount(dir, syscall.MNT_DETACH)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("umount2 %s: %w", dir, err))
	}
	bin, err := fusermount()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-u", "-z", dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		errs = append(errs, fmt.Errorf("%s -u -z: %w: %s", bin, err, strings.TrimSpace(out.String())))
		return errors.Join(errs...)
	}
	return nil
}

// fuseMountAt reports whether the top mount at dir (absolute, clean) is
// a FUSE file system, and its type.
func fuseMountAt(dir string) (string, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	fstype, found := "", false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		point, typ, ok := parseMountinfo(sc.Text())
		if ok && point == dir {
			// Later lines are mounted on top of earlier ones.
			fstype, found = typ, strings.HasPrefix(typ, "fuse")
		}
	}
	return fstype, found
}

// parseMountinfo returns the mount point and file system type of a
// /proc/self/mountinfo line:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
func parseMountinfo(line string) (point, fstype string, ok bool) {
	fields := strings.Fields(line)
	if len(fields) < 5 {
		return "", "", false
	}
	for i := 6; i < len(fields)-1; i++ {
		if fields[i] == "-" {
			return unescapeOctal(fields[4]), fields[i+1], true
		}
	}
	return "", "", false
}

// unescapeOctal undoes the kernel's \NNN escapes of space, tab, newline
// and backslash in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
