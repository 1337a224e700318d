package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// common is the option block Ansible 2.14 puts before the destination
// (calls-default.log, with the lab's values).
var common = []string{
	"-C", "-o", "ControlMaster=auto", "-o", "ControlPersist=60s", "-o", "StrictHostKeyChecking=no",
	"-o", "Port=2222", "-o", `IdentityFile="/tmp/ab-lab/id_ed25519"`, "-o", "KbdInteractiveAuthentication=no",
	"-o", "PreferredAuthentications=gssapi-with-mic,gssapi-keyex,hostbased,publickey",
	"-o", "PasswordAuthentication=no", "-o", `User="abtest"`, "-o", "ConnectTimeout=10",
	"-o", "UserKnownHostsFile=/dev/null", "-o", `ControlPath="/tmp/cp/f07df08a00"`,
}

func sshCall(extra ...string) []string {
	return append(append([]string{"ssh"}, common...), extra...)
}

const (
	tmp       = "/home/abtest/.ansible/tmp/ansible-tmp-1795264742.694866-12155-9573275210703"
	result    = `{"changed": true, "stdout": "vm", "stderr": "", "rc": 0, "cmd": ["hostname"], "start": "2026-11-21 12:39:03.119519", "end": "2026-11-21 12:39:03.121519", "delta": "0:00:00.002000", "msg": "", "invocation": {"module_args": {"_raw_params": "hostname", "_uses_shell": false, "stdin_add_newline": true, "strip_empty_ends": true, "argv": null, "chdir": null, "executable": null, "creates": null, "removes": null, "stdin": null}}}`
	wrapper   = "#!/usr/bin/python3\n# AnsiballZ wrapper\n    runpy.run_module(mod_name='ansible.modules.command', init_globals=dict(_module_fqn='ansible.modules.command'), run_name='__main__', alter_sys=True)\nZIPDATA = \"\"\"UEsDBBQ...\"\"\"\n"
	pingWrap  = "runpy.run_module(mod_name='ansible.modules.ping', init_globals=None)\n"
	sftpBatch = "put /root/.ansible/tmp/ansible-local-1/tmpwxmvn0_n " + tmp + "/AnsiballZ_command.py\n"
)

// fixed is the env runCases' expectations are written for.
var fixed = env{
	hostname:  "vm",
	localUser: "ci",
	pid:       4242,
	now:       func() time.Time { return time.Date(2026, 11, 21, 12, 39, 3, 119519000, time.UTC) },
}

// runCase is one call and the answer both floors must give it under fixed.
type runCase struct {
	name       string
	argv       []string
	stdin      string
	stdout     string
	stderr     string // "" means empty; a leading "~" means "contains"
	exit       int
	stdinDrain bool // stdin must be read to EOF
}

var runCases = []runCase{
	{
		name:   "ControlPersist probe",
		argv:   []string{"ssh", "-o", "ControlPersist"},
		stderr: "command-line line 0: no argument after keyword \"controlpersist\"\r\n",
		exit:   255,
	},
	{
		name:   "home",
		argv:   sshCall("127.0.0.1", "/bin/sh -c 'echo ~abtest && sleep 0'"),
		stdout: "/home/abtest\n",
	},
	{
		name:   "home, ansible-core 2.22 (no sleep 0)",
		argv:   sshCall("127.0.0.1", "/bin/sh -c 'echo ~abtest'"),
		stdout: "/home/abtest\n",
	},
	{
		name: "chmod u+rwx (2.19+)",
		argv: sshCall("127.0.0.1", "/bin/sh -c 'chmod u+rwx "+tmp+" "+tmp+"/AnsiballZ_command.py'"),
	},
	{
		name:   "home of the login user",
		argv:   []string{"ssh", "deploy@127.0.0.1", "/bin/sh -c 'echo ~ && sleep 0'"},
		stdout: "/home/deploy\n",
	},
	{
		name:   "home of root",
		argv:   sshCall("127.0.0.1", "/bin/sh -c 'echo ~root && sleep 0'"),
		stdout: "/root\n",
	},
	{
		name: "mkdir",
		argv: sshCall("127.0.0.1", "/bin/sh -c '( umask 77 && mkdir -p \"` echo /home/abtest/.ansible/tmp `\"&& mkdir \"` echo "+tmp+
			" `\" && echo ansible-tmp-1795264742.694866-12155-9573275210703=\"` echo "+tmp+" `\" ) && sleep 0'"),
		stdout: "ansible-tmp-1795264742.694866-12155-9573275210703=" + tmp + "\n",
	},
	{
		name: "chmod",
		argv: sshCall("127.0.0.1", "/bin/sh -c 'chmod u+x "+tmp+"/ "+tmp+"/AnsiballZ_command.py && sleep 0'"),
	},
	{
		name: "rm",
		argv: sshCall("127.0.0.1", "/bin/sh -c 'rm -f -r "+tmp+"/ > /dev/null 2>&1 && sleep 0'"),
	},
	{
		name:   "module from file with -tt",
		argv:   sshCall("-tt", "127.0.0.1", "/bin/sh -c '/usr/bin/python3 "+tmp+"/AnsiballZ_command.py && sleep 0'"),
		stdout: "\r\n" + result + "\r\n",
		stderr: "Shared connection to 127.0.0.1 closed.\r\n",
	},
	{
		name:       "pipelined module",
		argv:       sshCall("127.0.0.1", "/bin/sh -c '/usr/bin/python3 && sleep 0'"),
		stdin:      wrapper,
		stdout:     "\n" + result + "\n",
		stdinDrain: true,
	},
	{
		name:       "pipelined ping",
		argv:       sshCall("127.0.0.1", "/bin/sh -c '/usr/bin/python3.11 && sleep 0'"),
		stdin:      pingWrap,
		stdout:     "\n" + `{"ping": "pong", "invocation": {"module_args": {"data": "pong"}}}` + "\n",
		stdinDrain: true,
	},
	{
		name:   "unknown module fails",
		argv:   sshCall("127.0.0.1", "/bin/sh -c '/usr/bin/python3 "+tmp+"/AnsiballZ_setup.py && sleep 0'"),
		stdout: "\n" + `{"failed": true, "msg": "floor: no canned result for module \"setup\""}` + "\n",
		exit:   1,
	},
	{
		name:   "unknown command refused",
		argv:   sshCall("127.0.0.1", "/bin/sh -c 'id -un && sleep 0'"),
		stderr: "~no canned answer for remote command",
		exit:   127,
	},
	{
		name:   "quoted inner command",
		argv:   sshCall("127.0.0.1", `/bin/sh -c 'echo ~abtest && sleep 0'"'"'x'`),
		stderr: "~no canned answer",
		exit:   127,
	},
	{
		name:   "no destination",
		argv:   []string{"ssh", "-C"},
		stderr: "~usage: ssh",
		exit:   255,
	},
	{name: "-O check", argv: sshCall("-O", "check", "127.0.0.1"), stderr: "Master running (pid=4242)\r\n"},
	{name: "-O stop", argv: sshCall("-O", "stop", "127.0.0.1"), stderr: "Stop listening request sent.\r\n"},
	{name: "-O exit", argv: []string{"ssh", "-o", "ControlPath=/x", "-Oexit", "h"}, stderr: "Exit request sent.\r\n"},
	{
		name:       "sftp batch",
		argv:       append(append([]string{"sftp", "-b", "-"}, common...), "[127.0.0.1]"),
		stdin:      sftpBatch,
		stdout:     "sftp> " + strings.TrimSuffix(sftpBatch, "\n") + "\n",
		stdinDrain: true,
	},
	{
		name:   "sftp get refused",
		argv:   append(append([]string{"sftp", "-b", "-"}, common...), "[127.0.0.1]"),
		stdin:  "get /etc/hostname /tmp/x\n",
		stdout: "sftp> get /etc/hostname /tmp/x\n",
		stderr: "~no canned answer for sftp command",
		exit:   1,
	},
	{
		name: "scp upload",
		argv: append(append([]string{"scp"}, common...), "/root/.ansible/tmp/x/tmpm4rbi10u", "[127.0.0.1]:"+tmp+"/AnsiballZ_ping.py"),
	},
	{
		name:   "scp download refused",
		argv:   append(append([]string{"scp"}, common...), "[127.0.0.1]:/etc/hostname", "/tmp/x"),
		stderr: "~only answers an upload",
		exit:   1,
	},
	{
		name:   "other argv[0]",
		argv:   []string{"/usr/local/bin/floor"},
		stderr: "~run me as ssh, sftp or scp",
		exit:   2,
	},
}

// TestRun holds both floors to runCases: the Go reference in-process
// under fixed, and the C floor that scripts/bench runs (c/floor.c), as a
// process, with the values it takes from the machine (hostname, pid,
// module times) checked and then replaced by fixed's (see cRun.normalized).
func TestRun(t *testing.T) {
	for _, tc := range runCases {
		t.Run(tc.name+"/go", func(t *testing.T) {
			in := strings.NewReader(tc.stdin)
			var stdout, stderr bytes.Buffer
			exit := run(tc.argv, in, &stdout, &stderr, fixed)
			tc.check(t, outcome{stdout.String(), stderr.String(), exit}, len(tc.stdin)-in.Len())
		})
		t.Run(tc.name+"/c", func(t *testing.T) {
			c := runC(t, tc.argv, tc.stdin, nil)
			tc.check(t, c.normalized(t), c.consumed)
		})
	}
}

// check compares an answer, and how much of stdin was read, to tc's.
func (tc runCase) check(t *testing.T, got outcome, consumed int) {
	t.Helper()
	if got.exit != tc.exit {
		t.Errorf("exit %d, want %d (stderr %q)", got.exit, tc.exit, got.stderr)
	}
	if got.stdout != tc.stdout {
		t.Errorf("stdout:\n got %q\nwant %q", got.stdout, tc.stdout)
	}
	if want, ok := strings.CutPrefix(tc.stderr, "~"); ok {
		if !strings.Contains(got.stderr, want) {
			t.Errorf("stderr %q lacks %q", got.stderr, want)
		}
	} else if got.stderr != tc.stderr {
		t.Errorf("stderr:\n got %q\nwant %q", got.stderr, tc.stderr)
	}
	if tc.stdinDrain && consumed != len(tc.stdin) {
		t.Errorf("%d bytes of stdin left unread", len(tc.stdin)-consumed)
	}
}

func TestShUnquote(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{in: `'echo hi'`, want: "echo hi", ok: true},
		{in: `'it'"'"'s'`, want: "it's", ok: true},
		{in: `"a \"b\" \$c"`, want: `a "b" $c`, ok: true},
		{in: `a\ b`, want: "a b", ok: true},
		{in: `'open`},
		{in: `'a' 'b'`},
	} {
		got, ok := shUnquote(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("shUnquote(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
