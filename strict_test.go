package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// TestStrictMode: with ANSIBLE_BRIDGE_REQUIRE=1, where the bridge would
// fall back for its own reasons the shim fails with one line and exit
// 255 and runs nothing; without it, the real ssh runs and nothing extra
// reaches stderr. Fallbacks OpenSSH's contract requires run the real ssh
// either way, and a relative socket path is an error either way.
func TestStrictMode(t *testing.T) {
	bin := buildBinary(t)
	base := t.TempDir()
	realSSH := fakeRealSSH(t, base, `"$@"`)
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file") // a socket "directory" under a file cannot be made
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ansibleArgs := []string{"-o", "ControlMaster=auto", "-o", "ControlPath=/tmp/x", "127.0.0.1", "true"}
	for _, tc := range []struct {
		name, socket string
		strict       bool
		args         []string
		real         bool   // the real ssh runs
		line         string // else the one line on stderr says this
	}{
		{"open dir", filepath.Join(open, "bridge.sock"), false, ansibleArgs, true, ""},
		{"open dir, strict", filepath.Join(open, "bridge.sock"), true, ansibleArgs, false, "has mode 0755"},
		{"dir under a file", filepath.Join(file, "d", "bridge.sock"), false, ansibleArgs, true, ""},
		{"dir under a file, strict", filepath.Join(file, "d", "bridge.sock"), true, ansibleArgs, false, "create socket dir"},
		{"-L, strict", filepath.Join(open, "bridge.sock"), true, []string{"-L", "1:a:2", "127.0.0.1"}, true, ""},
		{"-V, strict", filepath.Join(open, "bridge.sock"), true, []string{"-V"}, true, ""},
		{"relative socket", "rel/bridge.sock", false, ansibleArgs, false, "ANSIBLE_BRIDGE_SOCKET must be an absolute path"},
		{"relative socket, strict", "rel/bridge.sock", true, ansibleArgs, false, "ANSIBLE_BRIDGE_SOCKET must be an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "ANSIBLE_BRIDGE_ARGV0=ssh", "ANSIBLE_BRIDGE_REAL_SSH="+realSSH,
				"ANSIBLE_BRIDGE_SOCKET="+tc.socket, fakessh.RequireEnv+"=")
			if tc.strict {
				cmd.Env = append(cmd.Env, fakessh.RequireEnv+"=1")
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if tc.real {
				if code != 0 || !strings.HasPrefix(string(out), "REAL-SSH ") || stderr.Len() != 0 {
					t.Errorf("exit %d, stdout %q, stderr %q; want the real ssh, and nothing on stderr", code, out, stderr.String())
				}
				return
			}
			lines := strings.Split(strings.TrimRight(stderr.String(), "\r\n"), "\n")
			if code != 255 || len(out) != 0 || len(lines) != 1 || !strings.Contains(lines[0], tc.line) || !strings.HasPrefix(lines[0], "ansible-bridge: ssh: ") {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 255 and one line saying %q", code, out, stderr.String(), tc.line)
			}
			if _, err := os.Stat(filepath.Join(cmd.Dir, "rel")); err == nil {
				t.Error("the shim made the relative socket directory")
			}
		})
	}
}

func TestDoctorSocketPath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		socket string
		ok     bool
		detail string
	}{
		{filepath.Join(t.TempDir(), "a", "b", "bridge.sock"), true, ""},
		{"rel/bridge.sock", false, "absolute"},
		{filepath.Join(file, "d", "bridge.sock"), false, "cannot create " + filepath.Join(file, "d") + " in " + file + ": not a directory"},
	} {
		env := doctorFixture(t, true)
		env.socket = tc.socket
		c := doctorResult(runDoctor(env), "socket path")
		if c.ok != tc.ok || !strings.Contains(c.detail, tc.detail) || !c.ok && c.fix == "" {
			t.Errorf("%s: %+v", tc.socket, c)
		}
	}
}
