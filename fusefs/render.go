package fusefs

import (
	"fmt"
	"github.com/kballard/go-shellquote"
	"strconv"
	"strings"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/journal"
)

// This file renders what the file system shows as plain functions of the
// Source's data, so they are tested without a mount.

// namedFile is one generated file.
type namedFile struct {
	name string
	data []byte
}

// entryDirName names a journal entry's directory: the zero-padded
// sequence number, so that names sort in order, and the route.
func entryDirName(seq uint64, route string) string {
	if route == "" {
		route = "unknown"
	}
	return fmt.Sprintf("%06d-%s", seq, escapeName(route))
}

// entrySeq returns the sequence number at the start of an entry
// directory's name.
func entrySeq(name string) (uint64, bool) {
	i := strings.IndexByte(name, '-')
	if i <= 0 {
		return 0, false
	}
	seq, err := strconv.ParseUint(name[:i], 10, 64)
	return seq, err == nil
}

// entryFiles renders a journal entry's files, in the order listed.
func entryFiles(v journal.EntryView) []namedFile {
	files := []namedFile{
		{"argv", []byte(shellquote.Join(v.Argv...) + "\n")},
		{"route", []byte(v.Route + "\n")},
		{"target", []byte(v.Target + "\n")},
		{"stdin", v.Stdin.Data},
		{"stdout", v.Stdout.Data},
		{"stderr", v.Stderr.Data},
		{"timing", timing(v)},
	}
	if v.Done {
		files = append(files, namedFile{"exit", []byte(strconv.Itoa(v.Exit) + "\n")})
	}
	switch {
	case v.NoLog:
		// What explode would find is not kept: say why it is missing.
		files = append(files,
			namedFile{"module", []byte(v.ModuleName + "\n")},
			namedFile{"no_log", []byte("no_log: module arguments, stdin, stdout and stderr are not kept\n")})
	case v.ModuleName != "":
		files = append(files,
			namedFile{"module", []byte(v.ModuleName + "\n")},
			namedFile{"module_args.json", append(append([]byte(nil), v.ModuleArgs...), '\n')})
	}
	var cut strings.Builder
	for _, c := range []struct {
		name string
		c    journal.Capture
	}{{"stdin", v.Stdin}, {"stdout", v.Stdout}, {"stderr", v.Stderr}} {
		if c.c.Truncated {
			fmt.Fprintf(&cut, "%s %d of %d bytes kept\n", c.name, len(c.c.Data), c.c.Size)
		}
	}
	if cut.Len() > 0 {
		files = append(files, namedFile{"truncated", []byte(cut.String())})
	}
	return files
}

// entryFile returns one of entryFiles.
func entryFile(v journal.EntryView, name string) ([]byte, bool) {
	for _, f := range entryFiles(v) {
		if f.name == name {
			return f.data, true
		}
	}
	return nil, false
}

// entryEnd is the time an entry's files last changed: its end, or now
// while it runs.
func entryEnd(v journal.EntryView) time.Time {
	return v.Started.Add(v.Total)
}

func timing(v journal.EntryView) []byte {
	state := "running"
	if v.Done {
		state = "done"
	}
	return fmt.Appendf(nil, "queued_ms %d\nremote_ms %d\ntotal_ms %d\nstarted %s\nstate %s\n",
		v.Queued.Milliseconds(), v.Remote.Milliseconds(), v.Total.Milliseconds(),
		v.Started.Format(time.RFC3339Nano), state)
}

// tempDirsTable renders a target's tmpdirs file: one line per dir with
// where it is and how many files it has.
func tempDirsTable(dirs []TempDir) []byte {
	var b strings.Builder
	for _, d := range dirs {
		where := "held"
		if d.OnTarget {
			where = "on-target"
		}
		held := 0
		for _, f := range d.Files {
			if f.Held {
				held++
			}
		}
		fmt.Fprintf(&b, "%s\t%s\t%d files\t%d held\t%s\n", d.Name, where, len(d.Files), held, d.Path)
	}
	return []byte(b.String())
}

// escapeName makes s usable as a file name: '%' becomes %25, '/' %2F
// and NUL %00; "", "." and ".." get their dots (or nothing) escaped.
func escapeName(s string) string {
	s = strings.NewReplacer("%", "%25", "/", "%2F", "\x00", "%00").Replace(s)
	switch s {
	case "":
		return "%"
	case ".", "..":
		return strings.ReplaceAll(s, ".", "%2E")
	}
	return s
}
