package journal

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// testdata/AnsiballZ_ping.py is a real wrapper from ansible-core 2.14:
//
//	ANSIBLE_KEEP_REMOTE_FILES=1 ansible localhost -c local -m ping \
//	    -a '{"data": "it'"'"'s \"q\" \\ é hunter2"}'
//
// and testdata/AnsiballZ_ping.args.json its ANSIBLE_MODULE_ARGS as
// Python sees them (`python3 AnsiballZ_ping.py explode`, then
// json.dumps(args["ANSIBLE_MODULE_ARGS"], indent=2)).
const (
	pingFQN    = "ansible.modules.ping"
	pingData   = `it's "q" \ é hunter2` // the data argument, decoded
	pingSecret = "hunter2"
	// pingResult is a result as ping prints it (without a result the
	// entry shows the args' names only).
	pingResult = "{\"ping\": \"pong\", \"invocation\": {\"module_args\": {\"data\": \"pong\"}}}\n"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeAnsiballZ(t *testing.T) {
	src := readTestdata(t, "AnsiballZ_ping.py")
	want := strings.TrimSuffix(string(readTestdata(t, "AnsiballZ_ping.args.json")), "\n")
	module, args, ok := DecodeAnsiballZ(src)
	if !ok {
		t.Fatal("real wrapper not recognised")
	}
	if module != pingFQN {
		t.Errorf("module = %q, want %q", module, pingFQN)
	}
	if string(args) != want {
		t.Errorf("args:\n%s\nwant:\n%s", args, want)
	}
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		t.Fatal(err)
	}
	if m["data"] != pingData {
		t.Errorf("data = %q, want %q", m["data"], pingData)
	}
}

func TestDecodeAnsiballZRejects(t *testing.T) {
	real := readTestdata(t, "AnsiballZ_ping.py")
	noMarker := bytes.Replace(real, []byte("_ANSIBALLZ_WRAPPER = True"), []byte("_SOMETHING_ELSE = True"), 1)
	badParams := bytes.Replace(real, []byte("ANSIBALLZ_PARAMS = '{"), []byte("ANSIBALLZ_PARAMS = '["), 1)
	noFQN := bytes.ReplaceAll(real, []byte("_module_fqn='"), []byte("_module_name='"))
	for name, src := range map[string][]byte{
		"empty":       nil,
		"text":        []byte("hello\nworld\n"),
		"binary":      bytes.Repeat([]byte{0, 1, 2, 0xff}, 50000),
		"no marker":   noMarker,
		"bad params":  badParams,
		"no fqn":      noFQN,
		"first lines": real[:4096],
	} {
		t.Run(name, func(t *testing.T) {
			if m, a, ok := DecodeAnsiballZ(src); ok {
				t.Errorf("decoded %q %s", m, a)
			}
		})
	}
}

func TestStreamedWrapper(t *testing.T) {
	src := readTestdata(t, "AnsiballZ_ping.py")
	want := strings.TrimSuffix(string(readTestdata(t, "AnsiballZ_ping.args.json")), "\n")
	for _, chunk := range []int{1, 7, 4096, 65536, len(src)} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			j := New(0)
			e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3 && sleep 0"})
			for b := src; len(b) > 0; {
				n := min(chunk, len(b))
				e.AppendStdin(b[:n])
				b = b[n:]
			}
			e.AppendStdout([]byte(pingResult))
			e.Finish(0)
			v, ok := j.Get(e.Seq())
			if !ok {
				t.Fatal("entry not kept")
			}
			if v.ModuleName != pingFQN || string(v.ModuleArgs) != want {
				t.Errorf("module %q args:\n%s", v.ModuleName, v.ModuleArgs)
			}
			if !v.Stdin.Truncated || v.Stdin.Size != int64(len(src)) || len(v.Stdin.Data) != WrapperCaptureLimit {
				t.Errorf("stdin: %d bytes kept of %d, truncated %v", len(v.Stdin.Data), v.Stdin.Size, v.Stdin.Truncated)
			}
			if !bytes.Equal(v.Stdin.Data, src[:WrapperCaptureLimit]) {
				t.Error("stdin capture differs from the stream")
			}
		})
	}
}

// TestWrapperCaptureAllocates: a wrapper is captured to
// WrapperCaptureLimit from its first byte, not to CaptureLimit and then
// cut (64 KiB more for every task): recognised by the scanner in its
// first chunk, or awaited (AwaitModule) while it flows in chunks.
func TestWrapperCaptureAllocates(t *testing.T) {
	src := readTestdata(t, "AnsiballZ_ping.py")
	if len(src) < CaptureLimit {
		t.Fatalf("testdata wrapper of %d bytes: too short to tell", len(src))
	}
	w := parse(t, src)
	for _, awaited := range []bool{false, true} {
		j := New(0)
		var before, after runtime.MemStats
		const n = 20
		runtime.ReadMemStats(&before)
		for range n {
			e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3 && sleep 0"})
			if !awaited {
				e.AppendStdin(src)
			} else {
				e.AwaitModule()
				for b := src; len(b) > 0; b = b[min(4096, len(b)):] {
					e.AppendStdin(b[:min(4096, len(b))])
				}
				e.SetModule(w)
			}
			e.Finish(0)
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / n; per > CaptureLimit/2 {
			t.Errorf("awaited %v: %d bytes allocated an entry; want under %d", awaited, per, CaptureLimit/2)
		}
	}
}

// TestAwaitedNotWrapper: stdin awaited as a module's that proves not to
// be a wrapper is kept as any stdin is, to CaptureLimit.
func TestAwaitedNotWrapper(t *testing.T) {
	src := bytes.Repeat([]byte("print('not a wrapper')\n"), CaptureLimit/8)
	j := New(0)
	e := j.Begin("u@h:22", "module", []string{"ssh", "h", "python3"})
	e.AwaitModule()
	for b := src; len(b) > 0; b = b[min(4096, len(b)):] {
		e.AppendStdin(b[:min(4096, len(b))])
	}
	if e.SetModuleSource(src) {
		t.Fatal("taken for a wrapper")
	}
	e.Finish(0)
	v, _ := j.Get(e.Seq())
	if !bytes.Equal(v.Stdin.Data, src[:CaptureLimit]) || v.Stdin.Size != int64(len(src)) || !v.Stdin.Truncated {
		t.Errorf("stdin: %d bytes kept of %d, truncated %v", len(v.Stdin.Data), v.Stdin.Size, v.Stdin.Truncated)
	}
}

func TestWrapperWithoutFinalNewline(t *testing.T) {
	src := []byte("#!/usr/bin/python3\n_ANSIBALLZ_WRAPPER = True\n" +
		"        runpy.run_module(mod_name='ns.coll.mod', init_globals=dict(_module_fqn='ns.coll.mod'))\n" +
		`    ANSIBALLZ_PARAMS = '{"ANSIBLE_MODULE_ARGS": {"a": []}}'`)
	j := New(0)
	e := j.Begin("t", "module", nil)
	e.AppendStdin(src)
	if v, _ := j.Get(1); v.ModuleName != "" {
		t.Fatalf("module %q known before stdin ended", v.ModuleName)
	}
	e.AppendStdout([]byte(pingResult))
	e.Finish(0)
	v, _ := j.Get(1)
	if v.ModuleName != "ns.coll.mod" || string(v.ModuleArgs) != "{\n  \"a\": []\n}" {
		t.Errorf("module %q args %s", v.ModuleName, v.ModuleArgs)
	}
}

func TestSetModuleSource(t *testing.T) {
	j := New(0)
	e := j.Begin("t", "module", []string{"ssh", "h", "python3 /tmp/x/AnsiballZ_ping.py"})
	if e.SetModuleSource([]byte("echo hi")) {
		t.Error("accepted a non-wrapper")
	}
	if !e.SetModuleSource(readTestdata(t, "AnsiballZ_ping.py")) {
		t.Fatal("real wrapper refused")
	}
	if v, _ := j.Get(1); v.ModuleName != pingFQN {
		t.Errorf("module %q", v.ModuleName)
	}
}

func TestRing(t *testing.T) {
	j := New(3)
	for i := range 5 {
		e := j.Begin("t", "exec", []string{fmt.Sprint(i)})
		if e.Seq() != uint64(i+1) {
			t.Fatalf("seq %d, want %d", e.Seq(), i+1)
		}
	}
	var seqs []uint64
	for _, v := range j.Snapshot() {
		seqs = append(seqs, v.Seq)
	}
	if fmt.Sprint(seqs) != "[3 4 5]" {
		t.Errorf("kept %v", seqs)
	}
	if l := j.List(); len(l) != 3 || l[0].Seq != 3 || l[2].Seq != 5 {
		t.Errorf("List = %+v", l)
	}
	for seq, want := range map[uint64]bool{0: false, 1: false, 2: false, 3: true, 5: true, 6: false} {
		if v, ok := j.Get(seq); ok != want || (ok && v.Argv[0] != fmt.Sprint(seq-1)) {
			t.Errorf("Get(%d) = %+v, %v", seq, v, ok)
		}
	}
}

func TestCapture(t *testing.T) {
	j := New(0)
	e := j.Begin("t", "exec", nil)
	e.AppendStdout([]byte("hello "))
	fmt.Fprint(e.Stdout(), "world")
	e.AppendStderr(bytes.Repeat([]byte("e"), CaptureLimit-1))
	e.AppendStderr([]byte("xyz"))
	e.SetStdin([]byte("first"))
	e.SetStdin([]byte("second"))
	e.Finish(3)
	e.Finish(4)
	v, _ := j.Get(1)
	if string(v.Stdout.Data) != "hello world" || v.Stdout.Size != 11 || v.Stdout.Truncated {
		t.Errorf("stdout %+v", v.Stdout)
	}
	if len(v.Stderr.Data) != CaptureLimit || v.Stderr.Size != CaptureLimit+2 || !v.Stderr.Truncated ||
		!bytes.HasSuffix(v.Stderr.Data, []byte("ex")) {
		t.Errorf("stderr: %d kept of %d, truncated %v", len(v.Stderr.Data), v.Stderr.Size, v.Stderr.Truncated)
	}
	if string(v.Stdin.Data) != "second" {
		t.Errorf("stdin %q", v.Stdin.Data)
	}
	if !v.Done || v.Exit != 3 {
		t.Errorf("done %v exit %d", v.Done, v.Exit)
	}
}

func TestTiming(t *testing.T) {
	j := New(0)
	now := time.Unix(1700000000, 0)
	j.now = func() time.Time { return now }
	e := j.Begin("t", "module", nil)
	now = now.Add(2 * time.Millisecond)
	if v, _ := j.Get(1); v.Done || v.Queued != 2*time.Millisecond || v.Total != 2*time.Millisecond || v.Remote != 0 {
		t.Errorf("queued: %+v", v)
	}
	e.MarkRemoteStart()
	now = now.Add(3 * time.Millisecond)
	e.MarkRemoteStart() // only the first counts
	if v, _ := j.Get(1); v.Queued != 2*time.Millisecond || v.Remote != 3*time.Millisecond || v.Total != 5*time.Millisecond {
		t.Errorf("running: %+v", v)
	}
	e.Finish(0)
	now = now.Add(time.Hour)
	v, _ := j.Get(1)
	if v.Queued != 2*time.Millisecond || v.Remote != 3*time.Millisecond || v.Total != 5*time.Millisecond {
		t.Errorf("finished: %+v", v)
	}
	if !v.Started.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("started %v", v.Started)
	}
}

func TestRedaction(t *testing.T) {
	j := New(0)
	e := j.Begin("alice@h:22", "exec", []string{"ssh", "h", "echo hunter2"})
	e.AppendStdin([]byte("hunt"))
	e.AppendStdin([]byte("er2\n"))
	e.AppendStdout([]byte("a hunter"))
	e.AppendStdout([]byte("2 b"))
	e.SetModuleSource(readTestdata(t, "AnsiballZ_ping.py"))
	e.Finish(0)
	before, _ := j.Get(1) // cached, must be dropped by AddSecret
	if string(before.Stdin.Data) != "hunter2\n" {
		t.Fatalf("stdin %q", before.Stdin.Data)
	}
	j.AddSecret([]byte(pingSecret))
	j.AddSecret([]byte(pingSecret))
	j.AddSecret([]byte(""))
	v, _ := j.Get(1)
	if string(v.Stdin.Data) != Mask+"\n" || string(v.Stdout.Data) != "a "+Mask+" b" || v.Argv[2] != "echo "+Mask {
		t.Errorf("not masked: stdin %q stdout %q argv %q", v.Stdin.Data, v.Stdout.Data, v.Argv)
	}
	if v.Stdin.Size != 8 {
		t.Errorf("size %d changed by masking", v.Stdin.Size)
	}
	if bytes.Contains(v.ModuleArgs, []byte(pingSecret)) {
		t.Errorf("module args not masked:\n%s", v.ModuleArgs)
	}
	if s := j.Snapshot(); s[0].Stdout.Data == nil || bytes.Contains(s[0].Stdout.Data, []byte(pingSecret)) {
		t.Errorf("snapshot not masked: %q", s[0].Stdout.Data)
	}

	// The entry kept no copy of the secret: it was rewritten masked.
	j.mu.Lock()
	e.mu.Lock()
	if bytes.Contains(e.stdin.data, []byte(pingSecret)) || bytes.Contains(e.out.data, []byte(pingSecret)) || bytes.Contains(e.args, []byte(pingSecret)) {
		t.Error("the entry still holds the secret")
	}
	e.mu.Unlock()
	j.mu.Unlock()

	// The whole data string has quotes, a backslash and a non-ASCII
	// letter: it appears escaped in the args JSON and doubly escaped in
	// the wrapper's Python literal.
	j = New(0)
	e = j.Begin("t", "module", nil)
	e.SetModuleSource(readTestdata(t, "AnsiballZ_ping.py"))
	e.AppendStdout([]byte(pingResult))
	e.Finish(0)
	j.AddSecret([]byte(pingData))
	v, _ = j.Get(1)
	var m map[string]any
	if err := json.Unmarshal(v.ModuleArgs, &m); err != nil || m["data"] != Mask {
		t.Errorf("data = %q (%v)", m["data"], err)
	}
	src := readTestdata(t, "AnsiballZ_ping.py")
	red := j.Redact(src)
	if !bytes.Contains(red, []byte(`{"data": "`+Mask+`", `)) {
		t.Errorf("wrapper literal not masked: %s", red[bytes.Index(red, []byte("ANSIBALLZ_PARAMS = ")):][:120])
	}
}

func TestRedactorEdges(t *testing.T) {
	var r Redactor
	if got := r.Redact([]byte("abc")); string(got) != "abc" {
		t.Errorf("no secrets: %q", got)
	}
	r.Add([]byte("abc"))
	r.Add([]byte("bcd"))
	for _, tc := range []struct {
		in   string
		cut  bool
		want string
	}{
		{"xabcdx", false, "x" + Mask + "x"}, // overlapping: one mask
		{"abcabc", false, Mask},
		{"xab", false, "xab"},
		// Cut short: the tail that could begin a secret is left out.
		{"xab", true, "x"},
		{"xabc", true, "xa"},
		{"xy", true, ""},
		{"", true, ""},
	} {
		if got := string(r.redact([]byte(tc.in), tc.cut)); got != tc.want {
			t.Errorf("redact(%q, %v) = %q, want %q", tc.in, tc.cut, got, tc.want)
		}
	}
	if got := r.String("1abc2"); got != "1"+Mask+"2" {
		t.Errorf("String: %q", got)
	}
}

func TestTruncatedTailMasked(t *testing.T) {
	j := New(0)
	j.AddSecret([]byte(pingSecret))
	e := j.Begin("t", "exec", nil)
	e.AppendStdout(bytes.Repeat([]byte("."), CaptureLimit-3))
	e.AppendStdout([]byte(pingSecret))
	v, _ := j.Get(1)
	if len(v.Stdout.Data) != CaptureLimit-(len(pingSecret)-1) || bytes.Contains(v.Stdout.Data, []byte("hun")) {
		t.Errorf("%d bytes, tail %q", len(v.Stdout.Data), v.Stdout.Data[len(v.Stdout.Data)-16:])
	}
}

func TestNil(t *testing.T) {
	var j *Journal
	e := j.Begin("t", "exec", nil)
	e.SetRoute("x")
	e.SetTarget("x")
	e.SetStdin([]byte("x"))
	e.AppendStdin([]byte("x"))
	e.AppendStdout([]byte("x"))
	fmt.Fprint(e.Stderr(), "x")
	e.MarkRemoteStart()
	e.SetModuleSource(nil)
	e.Finish(0)
	j.AddSecret([]byte("x"))
	if e.Seq() != 0 || j.Snapshot() != nil || j.List() != nil || string(j.Redact([]byte("x"))) != "x" {
		t.Error("nil journal recorded something")
	}
	if _, ok := j.Get(1); ok {
		t.Error("nil journal has an entry")
	}
}

func TestConcurrent(t *testing.T) {
	j := New(10)
	src := readTestdata(t, "AnsiballZ_ping.py")
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				e := j.Begin("t", "module", []string{fmt.Sprint(w, i)})
				e.AppendStdin(src[:len(src)/2])
				e.MarkRemoteStart()
				e.AppendStdin(src[len(src)/2:])
				e.AppendStdout([]byte("out"))
				e.Finish(i)
				j.Get(e.Seq())
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 50 {
			j.Snapshot()
			j.List()
			if i == 25 {
				j.AddSecret([]byte("out"))
			}
		}
	}()
	wg.Wait()
	s := j.Snapshot()
	if len(s) != 10 || s[9].Seq != 160 {
		t.Fatalf("%d entries, last %d", len(s), s[len(s)-1].Seq)
	}
	for _, v := range s {
		if v.ModuleName != pingFQN || string(v.Stdout.Data) != Mask {
			t.Errorf("entry %d: module %q stdout %q", v.Seq, v.ModuleName, v.Stdout.Data)
		}
	}
}

func TestJSONEscapeMatchesPython(t *testing.T) {
	// python3 -c 'import json; print(json.dumps("a\x01\x7f\U0001F600\u00e9\n\t\"\\\b\f\r/")[1:-1])'
	in := "a\x01\x7f\U0001F600\u00e9\n\t\"\\\b\f\r/"
	want := `a\u0001\u007f\ud83d\ude00\u00e9\n\t\"\\\b\f\r/`
	if got := jsonEscape([]byte(in)); string(got) != want {
		t.Errorf("jsonEscape = %s, want %s", got, want)
	}
}

// TestDecodeEveryVersion: the journal shows the module and its arguments
// for the wrappers of every ansible-core version.
func TestDecodeEveryVersion(t *testing.T) {
	files, _ := filepath.Glob("../../interp/ansiballz/testdata/ping-*.py.gz")
	if len(files) < 5 {
		t.Fatalf("wrappers: %v", files)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		src, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		module, args, ok := DecodeAnsiballZ(src)
		if !ok || module != "ansible.modules.ping" || !bytes.Contains(args, []byte(`"_ansible_module_name": "ping"`)) {
			t.Errorf("%s: %q %s %v", filepath.Base(f), module, args, ok)
		}
	}
}
