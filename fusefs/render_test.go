package fusefs

import (
	"strings"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/journal"
)

func TestEscapeName(t *testing.T) {
	for in, want := range map[string]string{
		"alice@web1:22":             "alice@web1:22",
		"alice@web1:22/become-root": "alice@web1:22%2Fbecome-root",
		"100%":                      "100%25",
		"a\x00b":                    "a%00b",
		"":                          "%",
		".":                         "%2E",
		"..":                        "%2E%2E",
	} {
		if got := escapeName(in); got != want {
			t.Errorf("escapeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEntryDirName(t *testing.T) {
	for _, tc := range []struct {
		seq   uint64
		route string
		want  string
	}{
		{1, "module", "000001-module"},
		{123456, "exec", "123456-exec"},
		{1234567, "sftp", "1234567-sftp"},
		{7, "", "000007-unknown"},
		{8, "a/b", "000008-a%2Fb"},
	} {
		got := entryDirName(tc.seq, tc.route)
		if got != tc.want {
			t.Errorf("entryDirName(%d, %q) = %q, want %q", tc.seq, tc.route, got, tc.want)
		}
		if seq, ok := entrySeq(got); !ok || seq != tc.seq {
			t.Errorf("entrySeq(%q) = %d, %v", got, seq, ok)
		}
	}
	for _, bad := range []string{"", "-x", "abc-x", "latest"} {
		if _, ok := entrySeq(bad); ok {
			t.Errorf("entrySeq(%q) ok", bad)
		}
	}
}

func TestTiming(t *testing.T) {
	v := journal.EntryView{
		Done:    true,
		Started: time.Date(2025, 11, 21, 12, 0, 0, 5, time.UTC),
		Queued:  2500 * time.Microsecond,
		Remote:  40 * time.Millisecond,
		Total:   43 * time.Millisecond,
	}
	want := "queued_ms 2\nremote_ms 40\ntotal_ms 43\nstarted 2025-11-21T12:00:00.000000005Z\nstate done\n"
	if got := string(timing(v)); got != want {
		t.Errorf("timing:\n%s\nwant\n%s", got, want)
	}
}

func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct {
		line, point, fstype string
		ok                  bool
	}{
		{"36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue", "/mnt2", "ext3", true},
		{"1203 29 0:87 / /tmp/x\\040y rw,nosuid,nodev,relatime - fuse.ansible-bridge ansible-bridge rw,user_id=0,group_id=0", "/tmp/x y", "fuse.ansible-bridge", true},
		{"50 29 0:44 / /a\\134b rw - fuse /dev/fuse rw", `/a\b`, "fuse", true},
		{"garbage", "", "", false},
		{"1 2 3:4 / /x rw no-separator here", "", "", false},
	} {
		point, fstype, ok := parseMountinfo(tc.line)
		if point != tc.point || fstype != tc.fstype || ok != tc.ok {
			t.Errorf("parseMountinfo(%q) = %q %q %v", tc.line, point, fstype, ok)
		}
	}
}

// TestNoLogEntryFiles: a no_log entry shows its module and a no_log file
// where module_args.json would be.
func TestNoLogEntryFiles(t *testing.T) {
	v := journal.EntryView{Seq: 1, Route: "module", ModuleName: "ansible.modules.command", NoLog: true, Done: true}
	var names []string
	for _, f := range entryFiles(v) {
		names = append(names, f.name)
	}
	if got := strings.Join(names, " "); got != "argv route target stdin stdout stderr timing exit module no_log" {
		t.Errorf("files: %s", got)
	}
	if b, ok := entryFile(v, "no_log"); !ok || !strings.HasPrefix(string(b), "no_log:") {
		t.Errorf("no_log file: %q", b)
	}
	if _, ok := entryFile(v, "module_args.json"); ok {
		t.Error("module_args.json for a no_log entry")
	}
}
