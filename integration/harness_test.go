package integration

import (
	"reflect"
	"strings"
	"testing"
)

// The tests below check the harness itself and need no lab.

func TestNormalizeString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"remote tmp", "/home/abtest/.ansible/tmp/ansible-tmp-1795258822.8919623-11358-57738232677280/source",
			"/home/abtest/.ansible/tmp/ansible-tmp-X/source"},
		{"local tmp", "/root/.ansible/tmp/ansible-local-11353mngpm5s7/tmp851id08d",
			"/root/.ansible/tmp/ansible-local-X/tmpX"},
		{"original basename", "tmp84q7ur4x", "tmpX"},
		{"async jid", "/home/abtest/.ansible_async/j663361370292.24265", "/home/abtest/.ansible_async/jX"},
		{"date", "2026-11-21 11:45:10.117377", "DATE"},
		{"payload dir", `File "/tmp/ansible_ping_payload_8tqf_6kc/ansible_ping_payload.zip/x.py"`, `File "/tmp/ansible_ping_payload_X/ansible_ping_payload.zip/x.py"`},
		{"zip in a traceback", "    zip_data='UEsDBBQAAAAIAGNSe12j+/0='\n", "    zip_data='X'\n"},
		{"plain text untouched", "tmp is a word; temporary; j12.3", "tmp is a word; temporary; j12.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := normalizeString(tt.in); got != tt.want {
				t.Errorf("normalizeString(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	in := map[string]any{
		"rc":     float64(0),
		"delta":  "0:00:00.003588",
		"stdout": "hello",
		"ansible_facts": map[string]any{
			"ansible_date_time":  map[string]any{"epoch": "1"},
			"ansible_interfaces": []any{"lo", "eth0"},
			"ansible_env":        map[string]any{"SSH_CLIENT": "127.0.0.1 5555 2222", "HOME": "/home/abtest"},
			"ansible_user_id":    "abtest",
		},
		"results": []any{map[string]any{"start": "x", "item": "a"}},
		"stat":    map[string]any{"mtime": 1.5, "mode": "0644", "version": "77"},
		"python":  map[string]any{"version": map[string]any{"major": float64(3)}},
	}
	want := map[string]any{
		"rc":     float64(0),
		"delta":  masked,
		"stdout": "hello",
		"ansible_facts": map[string]any{
			"ansible_date_time":  masked,
			"ansible_interfaces": []any{"eth0", "lo"},
			"ansible_env":        map[string]any{"SSH_CLIENT": masked, "HOME": "/home/abtest"},
			"ansible_user_id":    "abtest",
		},
		"results": []any{map[string]any{"start": masked, "item": "a"}},
		"stat":    map[string]any{"mtime": masked, "mode": "0644", "version": masked},
		"python":  map[string]any{"version": map[string]any{"major": float64(3)}},
	}
	if got := normalize(in, ""); !reflect.DeepEqual(got, want) {
		t.Errorf("normalize:\n got %s\nwant %s", short(got), short(want))
	}
}

func TestSameUnreachable(t *testing.T) {
	stock := "Failed to connect to the host via ssh: Warning: Permanently added '[127.0.0.1]:2222' (ED25519) to the list of known hosts.\r\nabtest@127.0.0.1: Permission denied (publickey,password,keyboard-interactive)."
	tests := []struct {
		name      string
		a, b      string
		wantEqual bool
	}{
		{"without the known_hosts notice", stock,
			"Failed to connect to the host via ssh: abtest@127.0.0.1: Permission denied (publickey,password,keyboard-interactive).", true},
		{"line endings", "Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 1: Connection refused\r\n",
			"Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 1: Connection refused", true},
		{"different methods", stock,
			"Failed to connect to the host via ssh: abtest@127.0.0.1: Permission denied (publickey).", false},
		{"broken pipe race, same kind",
			"Data could not be sent to remote host \"127.0.0.1\". Make sure this host can be reached over ssh: [Errno 32] Broken pipe. [Errno 32] Broken pipe",
			"Data could not be sent to remote host \"127.0.0.1\". Make sure this host can be reached over ssh: ssh: connect to host 127.0.0.1 port 1: Connection refused\r\n", true},
		{"broken pipe, other kind",
			"Data could not be sent to remote host \"127.0.0.1\". Make sure this host can be reached over ssh: [Errno 32] Broken pipe. [Errno 32] Broken pipe",
			"Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 1: Connection refused", false},
		{"refused vs denied", "Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 1: Connection refused",
			"Failed to connect to the host via ssh: abtest@127.0.0.1: Permission denied (publickey).", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sameUnreachable(tt.a, tt.b); got != tt.wantEqual {
				t.Errorf("sameUnreachable(%q, %q) = %t, want %t\nclasses %q, %q",
					tt.a, tt.b, got, tt.wantEqual, unreachableClass(tt.a), unreachableClass(tt.b))
			}
		})
	}
}

func TestDiffValues(t *testing.T) {
	tests := []struct {
		name  string
		a, b  any
		wants []string // substrings, one per expected difference
	}{
		{"equal", map[string]any{"x": []any{"a"}}, map[string]any{"x": []any{"a"}}, nil},
		{"changed value", map[string]any{"rc": float64(1)}, map[string]any{"rc": float64(0)}, []string{"r.rc: 1, want 0"}},
		{"missing key", map[string]any{}, map[string]any{"msg": "m"}, []string{"r.msg: missing"}},
		{"extra key", map[string]any{"msg": "m"}, map[string]any{}, []string{"r.msg: \"m\", want missing"}},
		{"list length", []any{"a"}, []any{"a", "b"}, []string{"r: 1 elements, want 2"}},
		{"type change", map[string]any{"x": "1"}, map[string]any{"x": float64(1)}, []string{"r.x: \"1\", want 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var diffs []string
			diffValues("r", tt.a, tt.b, &diffs)
			if len(diffs) != len(tt.wants) {
				t.Fatalf("diffs %q, want %d", diffs, len(tt.wants))
			}
			for i, w := range tt.wants {
				if !strings.Contains(diffs[i], w) {
					t.Errorf("diff %q lacks %q", diffs[i], w)
				}
			}
		})
	}
}

func TestNormalizeEventsOrder(t *testing.T) {
	ev := func(task, host string) taskEvent {
		return taskEvent{Play: "p", Task: task, Host: host, Result: map[string]any{}}
	}
	// Hosts of one task run in parallel: their order is not meaningful, the
	// order of tasks is.
	a := normalizeEvents([]taskEvent{ev("one", "b"), ev("one", "a"), ev("two", "a")})
	b := normalizeEvents([]taskEvent{ev("one", "a"), ev("one", "b"), ev("two", "a")})
	if !reflect.DeepEqual(a, b) {
		t.Errorf("host order within a task matters:\n%v\n%v", a, b)
	}
	c := normalizeEvents([]taskEvent{ev("two", "a"), ev("one", "a")})
	if c[0].Task != "two" {
		t.Errorf("task order was not kept: %v", c)
	}
}

func TestDiffFiles(t *testing.T) {
	a := map[string]fileEntry{"x": {Type: "file", Mode: "0644", SHA256: "1"}, "y": {Type: "dir"}}
	b := map[string]fileEntry{"x": {Type: "file", Mode: "0640", SHA256: "1"}, "z": {Type: "dir"}}
	got := strings.Join(diffFiles(a, b, "bridge", "stock"), "\n")
	for _, w := range []string{"x: bridge file 0644", "y: only in bridge run", "z: only in stock run"} {
		if !strings.Contains(got, w) {
			t.Errorf("diffFiles output lacks %q:\n%s", w, got)
		}
	}
}

func TestIsProbe(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{`2026-11-21T12:23:24Z fallback prog=ssh real=/usr/bin/ssh reason="cannot parse arguments: command-line line 0: no argument after keyword \"controlpersist\"\r\n" argc=2`, true},
		{`2026-11-21T12:23:24Z fallback prog=ssh real=/usr/bin/ssh reason="unsupported: -o ForwardAgent=yes" argc=24`, false},
		{`2026-11-21T12:23:24Z fallback prog=sftp real=/usr/bin/sftp reason="unsupported: -o ControlPersist=60s" argc=2`, false},
	}
	for _, tt := range tests {
		if got := isProbe(tt.line); got != tt.want {
			t.Errorf("isProbe(%q) = %t, want %t", tt.line, got, tt.want)
		}
	}
}
