package bridge

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
)

// wrapperFor turns the saved ping wrapper into one of module with args
// (a JSON object), as Ansible would write it.
func wrapperFor(t *testing.T, module, args string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("journal", "testdata", "AnsiballZ_ping.py"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(b), "ansible.modules.ping", "ansible.modules."+module)
	params := regexp.MustCompile(`(?m)^    ANSIBALLZ_PARAMS = '.*'$`)
	if !params.MatchString(s) {
		t.Fatal("no ANSIBALLZ_PARAMS line in the saved wrapper")
	}
	lit := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(`{"ANSIBLE_MODULE_ARGS": ` + args + `}`)
	return []byte(params.ReplaceAllLiteralString(s, "    ANSIBALLZ_PARAMS = '"+lit+"'"))
}

func TestChangedUsers(t *testing.T) {
	for _, tc := range []struct {
		module, args, want string
	}{
		{"user", `{"name": "nctmp", "state": "absent", "remove": true}`, "nctmp"},
		{"user", `{"user": "nctmp", "state": "absent"}`, "nctmp"},
		{"user", `{"name": "nctmp", "home": "/tmp/h"}`, "nctmp"},
		{"command", `{"_raw_params": "userdel -r nctmp", "_uses_shell": false}`, "nctmp"},
		{"shell", `{"_raw_params": "/usr/sbin/deluser --remove-home nctmp && echo gone", "_uses_shell": true}`, "nctmp"},
		{"shell", `{"_raw_params": "rm -rf /tmp/x; userdel C; echo rc=$?", "_uses_shell": true}`, "C"},
		{"shell", `{"_raw_params": "usermod -aG G U; userdel V", "_uses_shell": true}`, "U,V"},
		{"command", `{"argv": ["userdel", "-f", "nctmp"]}`, "nctmp"},
		{"command", `{"_raw_params": "gpasswd -a U G"}`, "all"},
		{"group", `{"name": "G", "gid": 1234}`, "all"},
		{"command", `{"_raw_params": "echo absent"}`, ""},
		{"ping", `{"data": "absent userdel x"}`, ""},
	} {
		src := wrapperFor(t, tc.module, tc.args)
		w, err := ansiballz.Parse(src)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.module, tc.args, err)
		}
		ch := changedUsers(w)
		got := strings.Join(ch.users, ",")
		if ch.allGroups {
			got = "all"
		}
		if got != tc.want {
			t.Errorf("%s %s: changes %q, want %q", tc.module, tc.args, got, tc.want)
		}
	}
}
