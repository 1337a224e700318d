package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// doctorFixture is a machine as doctor sees it: a PATH dir with the real
// ssh, scp and sftp, a shim dir linking to a binary named ansible-bridge,
// and a socket path.
func doctorFixture(t *testing.T, shimsFirst bool) doctorEnv {
	t.Helper()
	base := t.TempDir()
	real, shims := filepath.Join(base, "real"), filepath.Join(base, "shims")
	bin := filepath.Join(base, "ansible-bridge")
	for _, d := range []string{real, shims} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"ssh", "scp", "sftp"} {
		if err := os.WriteFile(filepath.Join(real, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(bin, filepath.Join(shims, p)); err != nil {
			t.Fatal(err)
		}
	}
	// FUSE as doctor sees it: a device node stand-in and fusermount3.
	fuseDev := filepath.Join(base, "fuse")
	for _, f := range []string{fuseDev, filepath.Join(real, "fusermount3")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := real + ":" + shims
	if shimsFirst {
		path = shims + ":" + real
	}
	return doctorEnv{
		path:   path,
		socket: filepath.Join(base, "sock", "bridge.sock"),
		uid:    os.Getuid(),
		ansibleVersion: func() (string, error) {
			return "ansible-playbook [core 2.19.11]\n  python version = 3.11.2 (main)\n", nil
		},
		ansibleConfig: func() map[string]string { return map[string]string{} },
		fuseDev:       fuseDev,
	}
}

func doctorResult(cs []check, name string) check {
	for _, c := range cs {
		if c.name == name {
			return c
		}
	}
	return check{name: name, detail: "missing"}
}

func TestDoctor(t *testing.T) {
	t.Run("good setup", func(t *testing.T) {
		env := doctorFixture(t, true)
		for _, c := range runDoctor(env) {
			if !c.ok {
				t.Errorf("%s: %s", c.name, c.detail)
			}
		}
		if c := doctorResult(runDoctor(env), "ansible-core"); !strings.Contains(c.detail, "2.19") || !strings.Contains(c.detail, "python 3.11.2") {
			t.Errorf("ansible-core: %s", c.detail)
		}
	})
	t.Run("shims not first", func(t *testing.T) {
		env := doctorFixture(t, false)
		real := strings.Split(env.path, ":")[0]
		for _, prog := range []string{"ssh", "scp", "sftp"} {
			c := doctorResult(runDoctor(env), prog+" shim")
			if c.ok || !strings.Contains(c.detail, filepath.Join(real, prog)) || !strings.Contains(c.fix, "ansible-bridge env") {
				t.Errorf("%s shim: %+v", prog, c)
			}
		}
		// ssh_executable in ansible.cfg pointing at the shim is fine.
		shim := filepath.Join(strings.Split(env.path, ":")[1], "ssh")
		env.ansibleConfig = func() map[string]string { return map[string]string{"ssh_executable": shim} }
		if c := doctorResult(runDoctor(env), "ssh shim"); !c.ok {
			t.Errorf("ssh_executable set: %+v", c)
		}
	})
	t.Run("open socket dir", func(t *testing.T) {
		env := doctorFixture(t, true)
		dir := filepath.Dir(env.socket)
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		if c := doctorResult(runDoctor(env), "socket directory"); c.ok || !strings.Contains(c.detail, "0777") || c.fix == "" {
			t.Errorf("socket directory: %+v", c)
		}
	})
	t.Run("fallbacks", func(t *testing.T) {
		env := doctorFixture(t, true)
		if err := os.Mkdir(filepath.Dir(env.socket), 0o700); err != nil {
			t.Fatal(err)
		}
		log := "2026-11-24T00:00:00Z fallback prog=ssh real=/usr/bin/ssh reason=\"cannot parse arguments: command-line line 0: no argument after keyword \\\"controlpersist\\\"\\r\\n\" argc=2\n" +
			"2026-11-24T00:00:01Z fallback prog=ssh real=/usr/bin/ssh reason=\"unsupported: -L\" argc=5\n"
		if err := os.WriteFile(filepath.Join(filepath.Dir(env.socket), "bridge.shim.log"), []byte(log), 0o600); err != nil {
			t.Fatal(err)
		}
		c := doctorResult(runDoctor(env), "fallbacks")
		if c.ok || !strings.Contains(c.detail, "1× ssh: unsupported: -L") || strings.Contains(c.detail, "controlpersist") {
			t.Errorf("fallbacks: %+v", c)
		}
		// What OpenSSH's contract sends to the real binary is no failure,
		// and a usage text is one line.
		log = "2026-11-24T00:00:00Z fallback prog=ssh real=/usr/bin/ssh reason=\"unsupported: -V\" argc=1\n" +
			"2026-11-24T00:00:00Z fallback prog=ssh real=/usr/bin/ssh reason=\"unsupported: -G\" argc=2\n" +
			"2026-11-24T00:00:00Z fallback prog=scp real=/usr/bin/scp reason=\"daemon: no ControlPath: ssh connects on its own\" argc=3\n" +
			"2026-11-24T00:00:00Z fallback prog=ssh real=/usr/bin/ssh reason=\"daemon: ControlMaster=yes beside a master: ssh would connect on its own\" argc=3\n" +
			"2026-11-24T00:00:00Z fallback prog=ssh real=/usr/bin/ssh reason=\"daemon: -v, LogLevel VERBOSE or DEBUG: ssh's log lines (Authenticated to, Transferred, debug) are the real ssh's\" argc=3\n"
		if err := os.WriteFile(filepath.Join(filepath.Dir(env.socket), "bridge.shim.log"), []byte(log), 0o600); err != nil {
			t.Fatal(err)
		}
		if c := doctorResult(runDoctor(env), "fallbacks"); !c.ok || !strings.Contains(c.detail, "1× scp: daemon: no ControlPath") {
			t.Errorf("expected fallbacks: %+v", c)
		}
		log = "2026-11-24T00:00:00Z fallback prog=ssh real=/usr/bin/ssh reason=\"cannot parse arguments: unknown option -- %\\r\\nusage: ssh [-46AaCfGgKkMNnqsTtVvXxYy] [-B bind_interface]\\n           [-b bind_address]\\n\" argc=1\n"
		if err := os.WriteFile(filepath.Join(filepath.Dir(env.socket), "bridge.shim.log"), []byte(log), 0o600); err != nil {
			t.Fatal(err)
		}
		if c := doctorResult(runDoctor(env), "fallbacks"); c.ok || !strings.HasSuffix(c.detail, "1× ssh: cannot parse arguments: unknown option -- %") {
			t.Errorf("a usage error: %+v", c)
		}
	})
	t.Run("old ansible", func(t *testing.T) {
		env := doctorFixture(t, true)
		env.ansibleVersion = func() (string, error) { return "ansible-playbook [core 2.12.1]\n", nil }
		if c := doctorResult(runDoctor(env), "ansible-core"); c.ok {
			t.Errorf("2.12 recognised: %+v", c)
		}
		env.ansibleVersion = func() (string, error) { return "", errors.New("not found") }
		if c := doctorResult(runDoctor(env), "ansible-core"); c.ok {
			t.Errorf("missing ansible: %+v", c)
		}
	})
	t.Run("newer ansible", func(t *testing.T) {
		env := doctorFixture(t, true)
		env.ansibleVersion = func() (string, error) { return "ansible-playbook [core 2.23.0]\n  python version = 3.13.1\n", nil }
		if c := doctorResult(runDoctor(env), "ansible-core"); c.ok || !strings.Contains(c.detail, "2.14 to 2.22") || c.fix == "" {
			t.Errorf("2.23: %+v", c)
		}
	})
	t.Run("unreadable ansible version", func(t *testing.T) {
		env := doctorFixture(t, true)
		env.ansibleVersion = func() (string, error) { return "ansible-playbook 2.9.6\n", nil }
		if c := doctorResult(runDoctor(env), "ansible-core"); c.ok || !strings.Contains(c.detail, "ansible-playbook 2.9.6") || c.fix == "" {
			t.Errorf("old-style version line: %+v", c)
		}
	})
	t.Run("no real ssh", func(t *testing.T) {
		env := doctorFixture(t, true)
		for _, prog := range []string{"ssh", "scp", "sftp"} {
			t.Setenv("ANSIBLE_BRIDGE_REAL_"+strings.ToUpper(prog), "")
		}
		real := strings.Split(env.path, ":")[1]
		if err := os.Remove(filepath.Join(real, "scp")); err != nil {
			t.Fatal(err)
		}
		cs := runDoctor(env)
		if c := doctorResult(cs, "real scp"); c.ok || !strings.Contains(c.detail, "no scp on PATH") || !strings.Contains(c.fix, "openssh-client") {
			t.Errorf("real scp: %+v", c)
		}
		// The shim itself does not count as the real one.
		if c := doctorResult(cs, "real ssh"); !c.ok || c.detail != filepath.Join(real, "ssh") {
			t.Errorf("real ssh: %+v", c)
		}
		// ANSIBLE_BRIDGE_REAL_SCP names one.
		t.Setenv("ANSIBLE_BRIDGE_REAL_SCP", "/opt/scp")
		if c := doctorResult(runDoctor(env), "real scp"); !c.ok || !strings.Contains(c.detail, "ANSIBLE_BRIDGE_REAL_SCP") {
			t.Errorf("real scp from ANSIBLE_BRIDGE_REAL_SCP: %+v", c)
		}
	})
	t.Run("a wrapper before the shims", func(t *testing.T) {
		// The fallback runs the ssh after the shims' directory, not a
		// wrapper before it that execs the shim (a loop).
		env := doctorFixture(t, true)
		t.Setenv("ANSIBLE_BRIDGE_REAL_SSH", "")
		wrap := t.TempDir()
		if err := os.WriteFile(filepath.Join(wrap, "ssh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		real := strings.Split(env.path, ":")[1]
		env.path = wrap + ":" + env.path
		if c := doctorResult(runDoctor(env), "real ssh"); !c.ok || c.detail != filepath.Join(real, "ssh") {
			t.Errorf("real ssh: %+v", c)
		}
	})
	t.Run("no FUSE", func(t *testing.T) {
		env := doctorFixture(t, true)
		real := strings.Split(env.path, ":")[1]
		if err := os.Remove(filepath.Join(real, "fusermount3")); err != nil {
			t.Fatal(err)
		}
		if c := doctorResult(runDoctor(env), "FUSE (debug mount)"); c.ok || !strings.Contains(c.detail, "fusermount3 not on PATH") || !strings.Contains(c.fix, "fuse3") {
			t.Errorf("no fusermount3: %+v", c)
		}
		if err := os.Remove(env.fuseDev); err != nil {
			t.Fatal(err)
		}
		if c := doctorResult(runDoctor(env), "FUSE (debug mount)"); c.ok || !strings.Contains(c.detail, env.fuseDev+" missing") || c.fix == "" {
			t.Errorf("no %s: %+v", env.fuseDev, c)
		}
	})
	t.Run("socket dir 0755", func(t *testing.T) {
		env := doctorFixture(t, true)
		dir := filepath.Dir(env.socket)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cs := runDoctor(env)
		if c := doctorResult(cs, "socket directory"); c.ok || !strings.Contains(c.detail, dir) || !strings.Contains(c.detail, "0755") ||
			!strings.Contains(c.detail, "every shim runs the real ssh") || !strings.Contains(c.fix, "0700") {
			t.Errorf("socket directory: %+v", c)
		}
		// The daemon check refuses to talk to whatever listens there.
		if c := doctorResult(cs, "daemon"); c.ok || !strings.Contains(c.detail, "0755") || c.fix == "" {
			t.Errorf("daemon: %+v", c)
		}
	})
	t.Run("socket dir a symlink", func(t *testing.T) {
		env := doctorFixture(t, true)
		private := t.TempDir() // 0700, ours
		if err := os.Symlink(private, filepath.Dir(env.socket)); err != nil {
			t.Fatal(err)
		}
		if c := doctorResult(runDoctor(env), "socket directory"); c.ok || !strings.Contains(c.detail, "symlink") {
			t.Errorf("socket directory: %+v", c)
		}
	})
}

// TestFallbackSummarySince: status shows the shim log's fallbacks since
// the daemon started, not those of earlier runs; entries are timed to the
// nanosecond (older ones to the second).
func TestFallbackSummarySince(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "bridge.sock")
	log := "2026-11-24T10:00:00Z fallback prog=ssh real=/usr/bin/ssh reason=\"daemon: no ControlPath: ssh connects on its own\" argc=3\n" +
		"2026-11-24T10:59:59.999999999Z fallback prog=ssh real=/usr/bin/ssh reason=\"unsupported: -L\" argc=5\n" +
		"2026-11-24T11:00:00.5Z fallback prog=ssh real=/usr/bin/ssh reason=\"unsupported: -V\" argc=1\n" +
		"2026-11-24T11:59:59+01:00 fallback prog=scp real=/usr/bin/scp reason=\"unsupported: -r\" argc=3\n"
	if err := os.WriteFile(filepath.Join(dir, "bridge.shim.log"), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	lines := func(since time.Time) string {
		var out []string
		for _, f := range fallbackSummary(sock, since) {
			out = append(out, f.line)
		}
		return strings.Join(out, "; ")
	}
	if got, want := lines(time.Time{}), "1× scp: unsupported: -r; 1× ssh: daemon: no ControlPath: ssh connects on its own; 1× ssh: unsupported: -L; 1× ssh: unsupported: -V"; got != want {
		t.Errorf("whole log: %q, want %q", got, want)
	}
	if got, want := lines(time.Date(2026, 11, 24, 11, 0, 0, 0, time.UTC)), "1× ssh: unsupported: -V"; got != want {
		t.Errorf("since 11:00: %q, want %q", got, want)
	}
}
