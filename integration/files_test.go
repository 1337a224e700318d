package integration

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
)

// fileEntry is what the tests compare about one file a playbook left.
// Times are left out: they differ between any two runs.
type fileEntry struct {
	Type   string // file, dir, symlink, other
	Mode   string // permission and special bits, octal
	Size   int64  // files only
	SHA256 string // files only
	Link   string // symlink target
	Owner  string
	Group  string
}

func (e fileEntry) String() string {
	s := fmt.Sprintf("%s %s %s:%s", e.Type, e.Mode, e.Owner, e.Group)
	switch e.Type {
	case "file":
		s += fmt.Sprintf(" %d bytes sha256:%.16s", e.Size, e.SHA256)
	case "symlink":
		s += " -> " + e.Link
	}
	return s
}

// outputRoots maps a label to each directory whose contents a run may
// change: one per lab user on the target, and the controller's local dir.
func outputRoots() map[string]string {
	roots := map[string]string{"local": suite.local}
	for u, dir := range suite.targetOut {
		roots["target:"+u] = dir
	}
	return roots
}

// resetOutputs empties every output directory before a run. Target
// directories are removed (the playbooks create them); the local one is
// recreated empty.
func resetOutputs(t *testing.T) {
	t.Helper()
	for label, dir := range outputRoots() {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatalf("clearing %s: %v", dir, err)
		}
		if label == "local" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// snapshotOutputs walks every output directory.
func snapshotOutputs(t *testing.T) map[string]fileEntry {
	t.Helper()
	out := map[string]fileEntry{}
	for label, root := range outputRoots() {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) && p == root {
					return filepath.SkipDir
				}
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			e, err := describe(p)
			if err != nil {
				return err
			}
			out[label+"/"+filepath.ToSlash(rel)] = e
			return nil
		})
		if err != nil {
			t.Fatalf("walking %s: %v", root, err)
		}
	}
	return out
}

func describe(p string) (fileEntry, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return fileEntry{}, err
	}
	var e fileEntry
	e.Mode = fmt.Sprintf("%04o", uint32(fi.Mode().Perm())|specialBits(fi.Mode()))
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner = userName(st.Uid)
		e.Group = groupName(st.Gid)
	}
	switch {
	case fi.Mode().IsRegular():
		e.Type = "file"
		e.Size = fi.Size()
		sum, err := sha256File(p)
		if err != nil {
			return e, err
		}
		e.SHA256 = sum
	case fi.IsDir():
		e.Type = "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = "symlink"
		e.Mode = "" // always 0777 on Linux
		if e.Link, err = os.Readlink(p); err != nil {
			return e, err
		}
	default:
		e.Type = "other"
	}
	return e, nil
}

func specialBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

func sha256File(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username
	}
	return id
}

func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return g.Name
	}
	return id
}

// diffFiles lists the differences between two snapshots, named na and nb.
func diffFiles(a, b map[string]fileEntry, na, nb string) []string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var diffs []string
	for _, k := range sorted {
		ea, oka := a[k]
		eb, okb := b[k]
		switch {
		case !oka:
			diffs = append(diffs, fmt.Sprintf("%s: only in %s run: %v", k, nb, eb))
		case !okb:
			diffs = append(diffs, fmt.Sprintf("%s: only in %s run: %v", k, na, ea))
		case ea != eb:
			diffs = append(diffs, fmt.Sprintf("%s: %s %v, %s %v", k, na, ea, nb, eb))
		}
	}
	return diffs
}
