package journal

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
)

func parse(t *testing.T, src []byte) *ansiballz.Wrapper {
	t.Helper()
	w, err := ansiballz.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestAwaitModule: after AwaitModule stdin is neither scanned nor shown
// until the daemon hands over the wrapper it took apart; then the entry
// holds what the stream scanner would have found.
func TestAwaitModule(t *testing.T) {
	src := readTestdata(t, "AnsiballZ_ping.py")
	want := strings.TrimSuffix(string(readTestdata(t, "AnsiballZ_ping.args.json")), "\n")
	j := New(0)
	e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3 && sleep 0"})
	e.AwaitModule()
	e.AppendStdin(src)
	if e.scan != nil {
		t.Error("stdin scanned after AwaitModule")
	}
	if v, _ := j.Get(e.Seq()); v.Stdin.Data != nil || v.Stdin.Size != int64(len(src)) || v.ModuleName != "" {
		t.Errorf("before SetModule: stdin %d bytes shown of %d, module %q", len(v.Stdin.Data), v.Stdin.Size, v.ModuleName)
	}
	e.SetModule(parse(t, src))
	e.AppendStdout([]byte(pingResult))
	e.Finish(0)
	v, _ := j.Get(e.Seq())
	if v.ModuleName != pingFQN || string(v.ModuleArgs) != want {
		t.Errorf("module %q args:\n%s", v.ModuleName, v.ModuleArgs)
	}
	if !bytes.Equal(v.Stdin.Data, src[:WrapperCaptureLimit]) || !v.Stdin.Truncated {
		t.Error("stdin capture differs from the stream")
	}
}

// noLogWrapper is the ping wrapper of testdata as Ansible writes it for
// a task with no_log: true.
func noLogWrapper(t *testing.T) []byte {
	t.Helper()
	src := readTestdata(t, "AnsiballZ_ping.py")
	out := bytes.Replace(src, []byte(`"_ansible_no_log": false`), []byte(`"_ansible_no_log": true`), 1)
	if bytes.Equal(out, src) {
		t.Fatal("no _ansible_no_log in the wrapper")
	}
	return out
}

// TestNoLog: a no_log module keeps its name, route, timing and exit
// status; its args and streams leave the journal, whichever way the
// wrapper came.
func TestNoLog(t *testing.T) {
	src := noLogWrapper(t)
	for _, tc := range []struct {
		name string
		feed func(e *Entry)
	}{
		{"piped", func(e *Entry) {
			for b := src; len(b) > 0; b = b[min(len(b), 1000):] {
				e.AppendStdin(b[:min(len(b), 1000)])
			}
		}},
		{"set stdin", func(e *Entry) { e.SetStdin(src) }},
		{"run file", func(e *Entry) {
			e.AppendStdin([]byte("typed ahead " + pingSecret + "\n"))
			if !e.SetModuleSource(src) {
				t.Fatal("wrapper refused")
			}
		}},
		{"become, password first", func(e *Entry) {
			e.AppendStdin([]byte("pw\n"))
			e.AppendStdin(src)
		}},
		{"taken apart", func(e *Entry) {
			e.AwaitModule()
			e.AppendStdin(src)
			e.SetModule(parse(t, src))
		}},
		{"awaited, then not taken apart", func(e *Entry) {
			e.AwaitModule()
			e.AppendStdin(src)
			e.SetModuleSource(src)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := New(0)
			e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3"})
			tc.feed(e)
			e.MarkRemoteStart()
			e.AppendStdout([]byte(`{"data": "` + pingSecret + `"}`))
			e.AppendStderr([]byte(pingSecret))
			e.Finish(2)
			v, _ := j.Get(e.Seq())
			if !v.NoLog || v.ModuleName != pingFQN || v.Route != "module" || v.Exit != 2 || !v.Done {
				t.Errorf("no_log %v module %q route %q exit %d", v.NoLog, v.ModuleName, v.Route, v.Exit)
			}
			if v.ModuleArgs != nil || v.Stdin.Data != nil || v.Stdout.Data != nil || v.Stderr.Data != nil {
				t.Errorf("kept args %q stdin %d stdout %q stderr %q", v.ModuleArgs, len(v.Stdin.Data), v.Stdout.Data, v.Stderr.Data)
			}
			if v.Stdout.Size == 0 || v.Stdin.Size == 0 {
				t.Errorf("sizes not counted: %+v %+v", v.Stdin, v.Stdout)
			}
			if e.stdin.data != nil || e.out.data != nil || e.err.data != nil || e.args != nil {
				t.Error("the entry still holds the data")
			}
		})
	}
}

// TestAsyncStatusIsNoLog: an async_status poll returns the result of the
// task it polls, which may be a no_log one, without that task's no_log:
// its argv (the task's environment: values), args and streams go.
func TestAsyncStatusIsNoLog(t *testing.T) {
	src := bytes.ReplaceAll(readTestdata(t, "AnsiballZ_ping.py"), []byte("ansible.modules.ping"), []byte("ansible.modules.async_status"))
	for _, taken := range []bool{false, true} {
		j := New(0)
		e := j.Begin("u@h:22", "module", []string{"ssh", "h", "/bin/sh -c 'API_TOKEN=" + pingSecret + " python3'"})
		if taken {
			e.AwaitModule()
			e.AppendStdin(src)
			e.SetModule(parse(t, src))
		} else {
			e.AppendStdin(src)
		}
		e.AppendStdout([]byte(`{"stdout": "` + pingSecret + `"}`))
		e.Finish(0)
		v, _ := j.Get(e.Seq())
		if !v.NoLog || v.ModuleName != "ansible.modules.async_status" {
			t.Errorf("taken apart %v: no_log %v module %q", taken, v.NoLog, v.ModuleName)
		}
		if v.ModuleArgs != nil || v.Stdout.Data != nil || strings.Contains(strings.Join(v.Argv, " "), pingSecret) {
			t.Errorf("taken apart %v: kept args %q stdout %q argv %q", taken, v.ModuleArgs, v.Stdout.Data, v.Argv)
		}
	}
}

// TestAwaitedUnsaid: a wrapper awaited and never handed over is judged
// by what was kept of it at Finish: the first WrapperCaptureLimit bytes,
// which do not hold the arguments here, so nothing is shown.
func TestAwaitedUnsaid(t *testing.T) {
	src := readTestdata(t, "AnsiballZ_ping.py")
	j := New(0)
	e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3"})
	e.AwaitModule()
	e.AppendStdin(src)
	e.Finish(0)
	v, _ := j.Get(e.Seq())
	if !v.NoLog || v.ModuleArgs != nil || v.Stdin.Data != nil || v.Stdin.Size != int64(len(src)) {
		t.Errorf("no_log %v args %q stdin %d bytes of %d", v.NoLog, v.ModuleArgs, len(v.Stdin.Data), v.Stdin.Size)
	}
}

// TestOrdinaryKeepsArgs: without no_log the args stay.
func TestOrdinaryKeepsArgs(t *testing.T) {
	j := New(0)
	e := j.Begin("u@h:22", "module", nil)
	e.SetModuleSource(readTestdata(t, "AnsiballZ_ping.py"))
	e.AppendStdout([]byte(pingResult))
	e.Finish(0)
	v, _ := j.Get(1)
	if v.NoLog || !bytes.Contains(v.ModuleArgs, []byte(pingSecret)) || string(v.Stdout.Data) != pingResult {
		t.Errorf("no_log %v args %s stdout %q", v.NoLog, v.ModuleArgs, v.Stdout.Data)
	}
}

// TestUnreadableWrapperIsNoLog: a wrapper whose args cannot be read may
// be a no_log one, and is kept as such.
func TestUnreadableWrapperIsNoLog(t *testing.T) {
	src := readTestdata(t, "AnsiballZ_ping.py")
	src = bytes.Replace(src, []byte("ANSIBALLZ_PARAMS = '{"), []byte("ANSIBALLZ_PARAMS = '{{"), 1)
	j := New(0)
	e := j.Begin("u@h:22", "module", nil)
	e.AppendStdin(src)
	e.Finish(0)
	if v, _ := j.Get(1); !v.NoLog || v.Stdin.Data != nil {
		t.Errorf("no_log %v, stdin %d bytes", v.NoLog, len(v.Stdin.Data))
	}
}

// TestHideStdin: an upload's content is never kept, but a wrapper in it
// is still recognised.
func TestHideStdin(t *testing.T) {
	j := New(0)
	e := j.Begin("u@h:22", "dd", nil)
	e.HideStdin()
	e.AppendStdin([]byte("copy content " + pingSecret))
	e.Finish(0)
	v, _ := j.Get(1)
	if v.Stdin.Data != nil || v.Stdin.Size != int64(len("copy content "+pingSecret)) || !v.StdinHidden || v.Stdin.Truncated {
		t.Errorf("stdin %+v hidden %v", v.Stdin, v.StdinHidden)
	}
	e = j.Begin("u@h:22", "dd", nil)
	e.HideStdin()
	e.AppendStdin(readTestdata(t, "AnsiballZ_ping.py"))
	e.Finish(0)
	if v, _ := j.Get(2); v.ModuleName != pingFQN || v.Stdin.Data != nil {
		t.Errorf("module %q, stdin %d bytes", v.ModuleName, len(v.Stdin.Data))
	}
}

func TestOff(t *testing.T) {
	j := NewWith(Config{Off: true})
	if e := j.Begin("t", "exec", []string{"ssh"}); e != nil {
		t.Error("an entry while off")
	}
	if len(j.Snapshot()) != 0 {
		t.Error("entries while off")
	}
	j.AddSecret([]byte(pingSecret))
	if got := string(j.Redact([]byte("a " + pingSecret))); got != "a "+Mask {
		t.Errorf("no redaction while off: %q", got)
	}
}

func TestExpire(t *testing.T) {
	j := NewWith(Config{Keep: time.Minute})
	now := time.Unix(1700000000, 0)
	j.now = func() time.Time { return now }
	a := j.Begin("a@h:22", "exec", nil) // finishes first
	a.AppendStdout([]byte("secret output"))
	a.Finish(0)
	now = now.Add(30 * time.Second)
	b := j.Begin("b@h:22", "exec", nil) // finishes later
	b.Finish(0)
	j.Begin("a@h:22", "exec", nil) // running: never dropped
	j.Expire(now.Add(29 * time.Second))
	if got := seqs(j); got != "[1 2 3]" {
		t.Fatalf("before a minute: %s", got)
	}
	j.Expire(now.Add(30 * time.Second))
	if got := seqs(j); got != "[2 3]" {
		t.Fatalf("a minute after the first ended: %s", got)
	}
	if a.out.data != nil {
		t.Error("an expired entry's capture was not wiped")
	}
	if _, ok := j.Get(1); ok {
		t.Error("Get found an expired entry")
	}
	if _, ok := j.Get(3); !ok {
		t.Error("Get lost an entry after a gap")
	}
	j.DropTarget("a@h:22")
	if got := seqs(j); got != "[2 3]" {
		t.Fatalf("a running entry was dropped with its target: %s", got)
	}
	j.DropTarget("b@h:22")
	if got := seqs(j); got != "[3]" {
		t.Fatalf("after b's connections closed: %s", got)
	}
	if e := j.Begin("c", "exec", nil); e.Seq() != 4 {
		t.Errorf("seq %d after expiry", e.Seq())
	}
}

func seqs(j *Journal) string {
	var s []uint64
	for _, v := range j.List() {
		s = append(s, v.Seq)
	}
	return fmt.Sprint(s)
}

// TestRedactorKeepsNoSecret: nothing the Redactor holds contains a
// registered secret or its escaped forms, and it still masks them.
func TestRedactorKeepsNoSecret(t *testing.T) {
	var r Redactor
	secret := []byte(`pa"ss\wörd-7f3a`)
	r.Add(secret)
	forms := [][]byte{bytes.Clone(secret), jsonEscape(secret), pyEscape(jsonEscape(secret))}
	clear(secret) // the caller's copy goes: masking must not need it
	held := fmt.Sprintf("%v %v %v", r.key, r.byLen, r.lens)
	for _, f := range forms {
		if bytes.Contains([]byte(held), f) {
			t.Errorf("the redactor holds %q", f)
		}
		in := append(append([]byte("x "), f...), " y"...)
		if got := string(r.Redact(in)); got != "x "+Mask+" y" {
			t.Errorf("Redact(%q) = %q", in, got)
		}
	}
	if got := string(r.Redact([]byte(`pa"ss\wörd-7f3b`))); got != `pa"ss\wörd-7f3b` {
		t.Errorf("masked a near miss: %q", got)
	}
}

// TestMaskedArgs: the values a module's result masks as its own no_log
// parameters, nested ones too, after lines of noise; none without a
// result.
func TestMaskedArgs(t *testing.T) {
	args := json.RawMessage(`{"url": "x", "url_password": "pw1234", "sub": {"token": "t0ken", "n": 1}, "l": [{"k": "v"}]}`)
	out := []byte("noise\n{\"changed\": false, \"invocation\": {\"module_args\": {\"url\": \"x\", \"url_password\": \"" + noLogMask +
		"\", \"sub\": {\"token\": \"" + noLogMask + "\", \"n\": 1}, \"l\": [{\"k\": \"v\"}]}}}\n")
	var got []string
	for _, v := range maskedArgs(args, out) {
		got = append(got, string(v))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"pw1234", "t0ken"}) {
		t.Errorf("maskedArgs = %q, want pw1234 and t0ken", got)
	}
	if v := maskedArgs(args, []byte("Traceback (most recent call last):\n")); v != nil {
		t.Errorf("without a result: %q", v)
	}
}

// TestNoResultShowsArgNames: a module that left no result (a crash, a
// task cut off by its timeout) has no masking to say which of its
// arguments are its own no_log parameters: the entry shows their names
// only; one with a result shows them all.
func TestNoResultShowsArgNames(t *testing.T) {
	src := readTestdata(t, "AnsiballZ_ping.py")
	for _, tc := range []struct {
		name string
		out  string
		want bool // values shown
	}{
		{"traceback", "Traceback (most recent call last):\n  File \"x\", line 1\nValueError: embedded null byte\n", false},
		{"nothing", "", false},
		{"cut result", `{"changed": false, "invocation": {"module_args": {"data": "`, false},
		{"result", "noise\n" + `{"ping": "pong", "invocation": {"module_args": {}}}` + "\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := New(0)
			e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3 && sleep 0"})
			e.SetModule(parse(t, src))
			e.AppendStdout([]byte(tc.out))
			e.Finish(1)
			v, _ := j.Get(e.Seq())
			if got := bytes.Contains(v.ModuleArgs, []byte(pingSecret)); got != tc.want {
				t.Errorf("value shown %v, want %v:\n%s", got, tc.want, v.ModuleArgs)
			}
			if !bytes.Contains(v.ModuleArgs, []byte(`"data"`)) || v.NoLog {
				t.Errorf("args' names not shown (no_log %v):\n%s", v.NoLog, v.ModuleArgs)
			}
		})
	}
}

func TestHasResult(t *testing.T) {
	for out, want := range map[string]bool{
		`{"a": 1}`:                    true,
		"warning\n{\"a\": 1}\nmore\n": true,
		"{\"a\":\n 1}\n":              true,
		"{\"a\": 1\n":                 false,
		"Traceback\n":                 false,
		"":                            false,
		"x {\"a\": 1}":                false,
	} {
		if got := hasResult([]byte(out)); got != want {
			t.Errorf("hasResult(%q) = %v", out, got)
		}
	}
}

// TestForgetSecrets: once nothing is being recorded, the journal lets go
// of its secrets' verifiers and key (they would let a reader of the
// daemon's memory test password guesses); an entry still being recorded
// keeps them, for its end masks what it captured.
func TestForgetSecrets(t *testing.T) {
	j := New(0)
	secret := []byte("become-pw-4c1e")
	e := j.Begin("u@h:22", "become", nil)
	j.AddSecret(secret)
	j.ForgetSecrets()
	if got := string(j.Redact(secret)); got != Mask {
		t.Fatalf("forgot with an entry in flight: %q", got)
	}
	e.AppendStdout(append([]byte("out "), secret...))
	e.Finish(0)
	j.ForgetSecrets()
	if j.red.key != nil || j.red.byLen != nil {
		t.Errorf("redactor kept key %x, sets %v", j.red.key, j.red.byLen)
	}
	if got := string(j.Redact(secret)); got != string(secret) {
		t.Errorf("still masked after forgetting: %q", got)
	}
	v, _ := j.Get(1)
	if bytes.Contains(v.Stdout.Data, secret) {
		t.Errorf("the kept entry shows the secret: %q", v.Stdout.Data)
	}
}

// TestConcealLetsGoOfCommand: a concealed entry's command line is not
// reachable through its argv's backing array.
func TestConcealLetsGoOfCommand(t *testing.T) {
	j := New(0)
	e := j.Begin("u@h:22", "exec", []string{"ssh", "host", "APITOKEN=tok-9d2 /usr/bin/python3"})
	full := e.argv[:cap(e.argv)]
	e.HideCommand()
	e.Finish(0)
	for _, a := range full[1:] {
		if a != "" {
			t.Errorf("argv's backing array still holds %q", a)
		}
	}
}

// TestRunningShowsArgNames: a module still running (a task's timeout may
// have ended the task long before) shows its arguments' names only, as
// one without a result: which values are no_log only its result says.
func TestRunningShowsArgNames(t *testing.T) {
	j := New(0)
	e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3 && sleep 0"})
	e.SetModule(parse(t, readTestdata(t, "AnsiballZ_ping.py")))
	v, _ := j.Get(e.Seq())
	if bytes.Contains(v.ModuleArgs, []byte(pingSecret)) || !bytes.Contains(v.ModuleArgs, []byte(`"data"`)) {
		t.Errorf("running: args shown as\n%s", v.ModuleArgs)
	}
	e.AppendStdout([]byte(`{"ping": "pong", "invocation": {"module_args": {}}}` + "\n"))
	e.Finish(0)
	if v, _ := j.Get(e.Seq()); !bytes.Contains(v.ModuleArgs, []byte(pingSecret)) {
		t.Errorf("finished with a result: values not shown:\n%s", v.ModuleArgs)
	}
}

// wrapperFor returns a minimal AnsiballZ wrapper whose arguments are
// args (JSON, as Python's json.dumps writes it).
func wrapperFor(args string) []byte {
	return []byte("#!/usr/bin/python3\n_ANSIBALLZ_WRAPPER = True\n" +
		"        runpy.run_module(mod_name='ansible.modules.uri', init_globals=dict(_module_fqn='ansible.modules.uri'))\n" +
		`    ANSIBALLZ_PARAMS = '{"ANSIBLE_MODULE_ARGS": ` + args + `}'` + "\n")
}

// TestMaskedArgsNotStrings: a no_log parameter sent as a number or a
// float (a string option the module converted, then masked), a nested
// suboption's, and a string option given a dict, are secrets as their
// JSON text, a boolean not (as list_no_log_values has it); so are
// 2.22's _ansible_new_secrets.
func TestMaskedArgsNotStrings(t *testing.T) {
	args := json.RawMessage(`{"url_password": 5550123987, "pin": 31.25, "flag": true, "n": 7,` +
		` "auth": {"user": "u", "secret": 4815162342}, "keys": [{"key": 90210}], "blob": {"x": 8675309}}`)
	out := []byte(`{"failed": true, "invocation": {"module_args": {"url_password": "` + noLogMask + `", "pin": "` + noLogMask +
		`", "flag": "` + noLogMask + `", "n": 7, "auth": {"user": "u", "secret": "` + noLogMask + `"}, "keys": [{"key": "` +
		noLogMask + `"}], "blob": "` + noLogMask + `"}}}` + "\n")
	var got []string
	for _, v := range maskedArgs(args, out) {
		got = append(got, string(v))
	}
	slices.Sort(got)
	want := []string{"31.25", "4815162342", "5550123987", "8675309", "90210"}
	if !slices.Equal(got, want) {
		t.Errorf("maskedArgs = %q, want %q", got, want)
	}
	got = nil
	out = []byte(`{"failed": true, "msg": "x", "_ansible_new_secrets": ["StrPw222-Kq8", "5550123987"]}` + "\n")
	for _, v := range maskedArgs(json.RawMessage(`{"url_password": "StrPw222-Kq8"}`), out) {
		got = append(got, string(v))
	}
	slices.Sort(got)
	if want := []string{"5550123987", "StrPw222-Kq8"}; !slices.Equal(got, want) {
		t.Errorf("2.22: maskedArgs = %q, want %q", got, want)
	}
}

// TestOwnNoLogNumberMasked: a module's own no_log parameter sent as a
// number, top-level or a suboption, is masked in the entry's arguments
// and stdin once its result masks it (ansible-core 2.14 to 2.21).
func TestOwnNoLogNumberMasked(t *testing.T) {
	src := wrapperFor(`{"url": "http://127.0.0.1:1/x", "url_password": 5550123987, "auth": {"token": 4815162342},` +
		` "_ansible_no_log": false}`)
	out := `{"failed": true, "msg": "refused", "invocation": {"module_args": {"url": "http://127.0.0.1:1/x", "url_password": "` +
		noLogMask + `", "auth": {"token": "` + noLogMask + `"}}}}` + "\n"
	for _, how := range []string{"stream", "source"} {
		t.Run(how, func(t *testing.T) {
			j := New(0)
			e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3 && sleep 0"})
			if how == "stream" {
				e.AppendStdin(src)
			} else {
				e.AwaitModule()
				e.AppendStdin(src)
				e.SetModuleSource(src)
			}
			e.AppendStdout([]byte(out))
			e.Finish(1)
			v, _ := j.Get(e.Seq())
			for name, b := range map[string][]byte{"args": v.ModuleArgs, "stdin": v.Stdin.Data, "stdout": v.Stdout.Data} {
				for _, n := range []string{"5550123987", "4815162342"} {
					if bytes.Contains(b, []byte(n)) {
						t.Errorf("%s shows %s:\n%s", name, n, b)
					}
				}
			}
			if !bytes.Contains(v.ModuleArgs, []byte(`"url_password": `+Mask)) || !bytes.Contains(v.Stdin.Data, []byte(`"url_password": `+Mask)) {
				t.Errorf("not masked in place:\n%s\n%s", v.ModuleArgs, v.Stdin.Data)
			}
			for _, c := range []*capture{&e.stdin, &e.out} {
				if bytes.Contains(c.data, []byte("5550123987")) {
					t.Errorf("the kept bytes hold the value: %q", c.data)
				}
			}
		})
	}
}

// TestNewSecrets222: ansible-core 2.22 modules return no masked
// invocation but list their no_log values in _ansible_new_secrets: they
// are masked in that entry (args, stdin, stdout, stderr) and in later
// ones, as stock 2.22 masks them in later tasks' results, until the
// journal forgets its secrets.
func TestNewSecrets222(t *testing.T) {
	const pw = "StrPw222-Kq8"
	j := New(0)
	e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3 && sleep 0"})
	e.AppendStdin(wrapperFor(`{"url": "http://127.0.0.1:1/x", "url_username": "u", "url_password": "` + pw +
		`", "_ansible_no_log": false}`))
	e.AppendStderr([]byte("warning: " + pw + "\n"))
	e.AppendStdout([]byte(`{"failed": true, "msg": "refused", "_ansible_new_secrets": ["` + pw + `"]}` + "\n"))
	e.Finish(1)
	later := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3 && sleep 0"})
	later.AppendStdin(wrapperFor(`{"_raw_params": "echo ` + pw + `", "_ansible_no_log": false}`))
	later.AppendStdout([]byte(`{"changed": true, "stdout": "` + pw + `", "cmd": ["echo", "` + pw + `"]}` + "\n"))
	later.Finish(0)
	for _, v := range j.Snapshot() {
		for name, b := range map[string][]byte{"args": v.ModuleArgs, "stdin": v.Stdin.Data, "stdout": v.Stdout.Data, "stderr": v.Stderr.Data} {
			if bytes.Contains(b, []byte(pw)) {
				t.Errorf("entry %d: %s shows the value:\n%s", v.Seq, name, b)
			}
		}
		if !bytes.Contains(v.ModuleArgs, []byte(Mask)) {
			t.Errorf("entry %d: args not masked:\n%s", v.Seq, v.ModuleArgs)
		}
	}
	j.ForgetSecrets()
	if j.red.key != nil || j.red.byLen != nil {
		t.Errorf("redactor kept key %x, sets %v", j.red.key, j.red.byLen)
	}
}

// TestRunningWrapperStdinHidden: a pipelined wrapper's stdin holds its
// arguments' values: while the module runs, and after it ends without a
// result (crashed, cut off), the entry shows stdin's size only, as it
// shows the arguments' names only.
func TestRunningWrapperStdinHidden(t *testing.T) {
	const secret = "RunPw-7731"
	src := wrapperFor(`{"url": "http://127.0.0.1:1/x", "url_password": "` + secret + `", "_ansible_no_log": false}`)
	for _, end := range []string{"running", "no result"} {
		t.Run(end, func(t *testing.T) {
			j := New(0)
			e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3 && sleep 0"})
			e.AppendStdin(src)
			e.AppendStdout([]byte("Traceback (most recent call last):\n"))
			if end == "no result" {
				e.Finish(1)
			}
			v, _ := j.Get(e.Seq())
			for name, b := range map[string][]byte{"args": v.ModuleArgs, "stdin": v.Stdin.Data} {
				if bytes.Contains(b, []byte(secret)) {
					t.Errorf("%s shows the value:\n%s", name, b)
				}
			}
			if v.Stdin.Size != int64(len(src)) {
				t.Errorf("stdin size %d, want %d", v.Stdin.Size, len(src))
			}
		})
	}
}

// TestRedactorLeavesNoGarbage: the HMAC the Redactor computes of a
// secret (on Add, and of each candidate it confirms while masking) leaves
// no copy in the memory it drops: the hash's last block is overwritten
// before the hash becomes garbage, not at the next collection.
func TestRedactorLeavesNoGarbage(t *testing.T) {
	secret := make([]byte, 24)
	if _, err := rand.Read(secret[:12]); err != nil {
		t.Fatal(err)
	}
	hex.Encode(secret, secret[:12])
	var r Redactor
	r.Add(secret)
	in := make([]byte, 0, len(secret)+4)
	in = append(append(append(in, "x "...), secret...), " y"...)
	clear(secret)
	masked := r.Redact(in)
	if string(masked) != "x "+Mask+" y" {
		t.Fatalf("Redact = %q", masked)
	}
	// The secret's one other copy here: kept in a form scanning cannot
	// match, to look for the secret with.
	want := bytes.Clone(in[2 : 2+len(secret)])
	clear(in)
	for i := range want {
		want[i] ^= 0xff
	}
	if n := copiesInOwnMemory(t, want); n != 0 {
		t.Errorf("%d copies of the secret left in memory", n)
	}
}

// copiesInOwnMemory counts copies of the bytes ^0xff of notB in this
// process's readable memory. The scan's own buffers are mappings of
// their own, which it skips.
func copiesInOwnMemory(t *testing.T, notB []byte) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Skip(err)
	}
	defer mem.Close()
	const bufSize = 64 << 20
	buf, err := syscall.Mmap(-1, 0, bufSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(buf)
	b := buf[:len(notB)]
	for i := range b {
		b[i] = notB[i] ^ 0xff
	}
	own := uint64(uintptr(unsafe.Pointer(&buf[0])))
	n := 0
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1][0] != 'r' || (len(f) >= 6 && strings.HasPrefix(f[5], "[v")) {
			continue
		}
		from, to, _ := strings.Cut(f[0], "-")
		lo, err1 := strconv.ParseUint(from, 16, 64)
		hi, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil || lo == own {
			continue
		}
		for at := lo; at < hi; at += bufSize / 2 {
			// Overlapping windows, so that no copy straddles two.
			win := buf[len(b):][:min(bufSize/2+uint64(len(b)), hi-at, bufSize-uint64(len(b)))]
			k, _ := mem.ReadAt(win, int64(at))
			for s := win[:k]; ; s = s[1:] {
				i := bytes.Index(s, b)
				if i < 0 {
					break
				}
				if s = s[i:]; len(win[:k])-len(s) < bufSize/2 {
					n++
				}
			}
		}
	}
	return n
}

// TestAwaitedScriptKeepsCapture: stdin awaited as a wrapper that turns
// out to be a plain script keeps CaptureLimit bytes, not a wrapper's.
func TestAwaitedScriptKeepsCapture(t *testing.T) {
	src := bytes.Repeat([]byte("print('not a wrapper')\n"), 2*CaptureLimit/23)
	j := New(0)
	e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3"})
	e.AwaitModule()
	e.AppendStdin(src)
	if e.SetModuleSource(src) {
		t.Fatal("a plain script taken for a module")
	}
	e.Finish(0)
	v, _ := j.Get(e.Seq())
	if !bytes.Equal(v.Stdin.Data, src[:CaptureLimit]) || v.Stdin.Size != int64(len(src)) {
		t.Errorf("stdin: %d bytes kept of %d, want the first %d", len(v.Stdin.Data), v.Stdin.Size, CaptureLimit)
	}
}
