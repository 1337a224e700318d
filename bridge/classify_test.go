package bridge

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	const tmp = "/home/deploy/.ansible/tmp/ansible-tmp-1795258799.4656882-10032-110163520341080"
	tests := []struct {
		name string
		cmd  string
		want ansibleCmd
	}{
		{"echo home", `/bin/sh -c 'echo ~deploy && sleep 0'`, ansibleCmd{kind: cmdEchoHome}},
		{"echo bare home", `/bin/sh -c 'echo ~ && sleep 0'`, ansibleCmd{kind: cmdEchoHome}},
		{"echo home expansion", `/bin/sh -c 'echo ~$(id) && sleep 0'`, ansibleCmd{}},
		{"mkdir", `/bin/sh -c '( umask 77 && mkdir -p "` + "` echo /home/deploy/.ansible/tmp `" + `"&& mkdir "` + "` echo " + tmp + " `" + `" && echo ansible-tmp-1795258799.4656882-10032-110163520341080="` + "` echo " + tmp + " `" + `" ) && sleep 0'`,
			ansibleCmd{kind: cmdMkTemp, base: "/home/deploy/.ansible/tmp", dir: tmp, name: "ansible-tmp-1795258799.4656882-10032-110163520341080"}},
		{"mkdir with expansion", `/bin/sh -c '( umask 77 && mkdir -p "` + "` echo $HOME/t `" + `"&& mkdir "` + "` echo $HOME/t/a `" + `" && echo a="` + "` echo $HOME/t/a `" + `" ) && sleep 0'`, ansibleCmd{}},
		{"chmod", `/bin/sh -c 'chmod u+x ` + tmp + `/ ` + tmp + `/AnsiballZ_setup.py && sleep 0'`, ansibleCmd{kind: cmdChmodUX, paths: []string{tmp + "/", tmp + "/AnsiballZ_setup.py"}}},
		{"chmod other mode", `/bin/sh -c 'chmod 0755 ` + tmp + ` && sleep 0'`, ansibleCmd{kind: cmdOther}},
		{"rm", `/bin/sh -c 'rm -f -r ` + tmp + `/ > /dev/null 2>&1 && sleep 0'`, ansibleCmd{kind: cmdRmTemp, paths: []string{tmp}}},
		{"run script", `/bin/sh -c '/usr/bin/python3 ` + tmp + `/AnsiballZ_setup.py && sleep 0'`, ansibleCmd{kind: cmdRunPython, python: []string{"/usr/bin/python3"}, script: tmp + "/AnsiballZ_setup.py"}},
		{"pipelined", `/bin/sh -c '/usr/bin/python3 && sleep 0'`, ansibleCmd{kind: cmdRunPython, python: []string{"/usr/bin/python3"}}},
		{"env prefix", `/bin/sh -c 'FOO='"'"'bar baz'"'"' /usr/bin/python3 && sleep 0'`, ansibleCmd{kind: cmdRunPython, python: []string{"/usr/bin/python3"}, env: [][2]string{{"FOO", "bar baz"}}}},
		{"env python", `/bin/sh -c '/usr/bin/env python3 && sleep 0'`, ansibleCmd{kind: cmdRunPython, python: []string{"/usr/bin/env", "python3"}}},
		// ansible_shell_type=csh: env before the prefixes, if any.
		{"csh script", `/bin/sh -c 'env /usr/bin/python3 ` + tmp + `/AnsiballZ_ping.py && sleep 0'`, ansibleCmd{kind: cmdRunPython, python: []string{"/usr/bin/python3"}, script: tmp + "/AnsiballZ_ping.py"}},
		{"csh pipelined with env", `/bin/sh -c 'env LANG=C /usr/bin/python3 && sleep 0'`, ansibleCmd{kind: cmdRunPython, python: []string{"/usr/bin/python3"}, env: [][2]string{{"LANG", "C"}}}},
		{"env alone", `/bin/sh -c 'env && sleep 0'`, ansibleCmd{}},
		{"env with an option", `/bin/sh -c 'env -i /usr/bin/python3 && sleep 0'`, ansibleCmd{}},
		{"async wrapper", `/bin/sh -c '/usr/bin/python3 ` + tmp + `/AnsiballZ_async_wrapper.py 1 10 ` + tmp + `/AnsiballZ_command.py _ && sleep 0'`, ansibleCmd{kind: cmdOther}},
		{"become", `/bin/sh -c 'sudo -H -S -n  -u root /bin/sh -c '"'"'echo BECOME-SUCCESS-x ; /usr/bin/python3'"'"' && sleep 0'`, ansibleCmd{kind: cmdOther}},
		{"not sh", `echo ~deploy && sleep 0`, ansibleCmd{}},
		{"script module", `/bin/sh -c ' ` + tmp + `/s.sh && sleep 0'`, ansibleCmd{kind: cmdOther}},
		// ansible-core 2.22: no " && sleep 0", and shlex.quote leaves a
		// plain command unquoted; 2.19+: chmod u+rwx.
		{"2.22 pipelined", `/bin/sh -c /usr/bin/python3`, ansibleCmd{kind: cmdRunPython, python: []string{"/usr/bin/python3"}}},
		{"2.22 echo home", `/bin/sh -c 'echo ~deploy'`, ansibleCmd{kind: cmdEchoHome}},
		{"2.22 mkdir", `/bin/sh -c '( umask 77 && mkdir -p "` + "` echo /home/deploy/.ansible/tmp `" + `"&& mkdir "` + "` echo " + tmp + " `" + `" && echo ansible-tmp-1795258799.4656882-10032-110163520341080="` + "` echo " + tmp + " `" + `" )'`,
			ansibleCmd{kind: cmdMkTemp, base: "/home/deploy/.ansible/tmp", dir: tmp, name: "ansible-tmp-1795258799.4656882-10032-110163520341080"}},
		{"2.19 chmod", `/bin/sh -c 'chmod u+rwx ` + tmp + `/ ` + tmp + `/AnsiballZ_setup.py && sleep 0'`, ansibleCmd{kind: cmdChmodUX, paths: []string{tmp + "/", tmp + "/AnsiballZ_setup.py"}}},
		{"2.22 rm", `/bin/sh -c 'rm -f -r ` + tmp + `/ > /dev/null 2>&1'`, ansibleCmd{kind: cmdRmTemp, paths: []string{tmp}}},
		{"other suffix", `/bin/sh -c '/usr/bin/python3 && sleep 1'`, ansibleCmd{}},
		{"chmod more", `/bin/sh -c 'chmod u+rwxs ` + tmp + `/'`, ansibleCmd{kind: cmdOther}},
		{"two suffixes", `/bin/sh -c 'echo ~ && sleep 0 && sleep 0'`, ansibleCmd{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.cmd)
			if got.kind != tt.want.kind || (tt.want.kind != cmdOther && !reflect.DeepEqual(got, tt.want)) {
				t.Fatalf("classify(%q)\n got %+v\nwant %+v", tt.cmd, got, tt.want)
			}
		})
	}
}

// TestClassifyTraces checks that every command in the reference traces
// is either recognised as expected or left alone.
// TestClassifyTraces classifies every call of the traces each
// ansible-core version sent for the same playbook
// (scripts/record-traces.sh): every version's housekeeping and module
// runs are recognised as often as 2.14's (which also sends a
// ControlPersist probe; become steps are bridge/become's).
func TestClassifyTraces(t *testing.T) {
	count := func(path string) map[cmdKind]int {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		counts := map[cmdKind]int{}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			i := strings.LastIndex(line, "] [")
			if !strings.HasPrefix(line, "ssh ") || i < 0 {
				continue
			}
			if k := classify(strings.TrimSuffix(line[i+3:], "]")).kind; k != cmdOther {
				counts[k]++
			}
		}
		return counts
	}
	for _, mode := range []string{"default", "pipelining"} {
		want := count("testdata/traces/2.14-" + mode + ".log")
		if want[cmdRunPython] < 3 || (mode == "default" && (want[cmdEchoHome] < 3 || want[cmdMkTemp] < 3 || want[cmdChmodUX] < 3 || want[cmdRmTemp] < 3)) {
			t.Fatalf("2.14 %s: %v: the trace lacks the calls this test expects", mode, want)
		}
		files, _ := filepath.Glob("testdata/traces/*-" + mode + ".log")
		for _, f := range files {
			if got := count(f); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: kinds %v, want those of 2.14: %v", filepath.Base(f), got, want)
			}
		}
	}
}
