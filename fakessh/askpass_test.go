package fakessh

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAskpassProgram follows OpenSSH's read_passphrase: the terminal unless
// SSH_ASKPASS_REQUIRE says otherwise or there is none; an askpass program
// only with a DISPLAY or SSH_ASKPASS_REQUIRE=force.
func TestAskpassProgram(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		tty     bool
		use     bool
		program string
	}{
		{name: "terminal", tty: true},
		{name: "terminal despite SSH_ASKPASS", env: map[string]string{"SSH_ASKPASS": "/a", "DISPLAY": ":0"}, tty: true},
		{name: "force (ansible-core 2.19+)", env: map[string]string{"SSH_ASKPASS": "/a", "SSH_ASKPASS_REQUIRE": "force"}, tty: true, use: true, program: "/a"},
		{name: "force, case-insensitive", env: map[string]string{"SSH_ASKPASS": "/a", "SSH_ASKPASS_REQUIRE": "FORCE"}, use: true, program: "/a"},
		{name: "prefer with display", env: map[string]string{"SSH_ASKPASS": "/a", "SSH_ASKPASS_REQUIRE": "prefer", "DISPLAY": ":0"}, tty: true, use: true, program: "/a"},
		{name: "prefer without display", env: map[string]string{"SSH_ASKPASS": "/a", "SSH_ASKPASS_REQUIRE": "prefer"}, tty: true},
		{name: "no terminal, display", env: map[string]string{"SSH_ASKPASS": "/a", "DISPLAY": ":0"}, use: true, program: "/a"},
		{name: "no terminal, default program", env: map[string]string{"DISPLAY": ":0"}, use: true, program: defaultAskpass},
		{name: "no terminal, no display: empty answer", env: map[string]string{"SSH_ASKPASS": "/a"}, use: true},
		{name: "never", env: map[string]string{"SSH_ASKPASS": "/a", "SSH_ASKPASS_REQUIRE": "never", "DISPLAY": ":0"}, use: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			use, program := askpassProgram(func(k string) string { return tc.env[k] }, tc.tty)
			if use != tc.use || program != tc.program {
				t.Errorf("askpassProgram = %v, %q; want %v, %q", use, program, tc.use, tc.program)
			}
		})
	}
}

func TestRunAskpass(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("#!/bin/sh\nprintf 'pw for %s\\nignored\\n' \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := runAskpass(ok, "abpw@h's password: ")
	if err != nil || got != "pw for abpw@h's password: " {
		t.Errorf("runAskpass = %q, %v", got, err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho secret; exit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := runAskpass(bad, "p"); err == nil {
		t.Errorf("a failing askpass answered %q", got)
	}
}
