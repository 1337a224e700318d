package interp_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bootstrap"
	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
	"github.com/sirupsen/logrus"
)

// ansiblePython is the interpreter that has ansible-core, from the shebang
// of the ansible command.
func ansiblePython(t testing.TB) string {
	t.Helper()
	a, err := exec.LookPath("ansible")
	if err != nil {
		t.Skip("ansible not installed")
	}
	b, err := os.ReadFile(a)
	if err != nil {
		t.Skipf("read %s: %v", a, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if !strings.HasPrefix(line, "#!") {
		t.Skipf("%s has no shebang", a)
	}
	f := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(f) == 0 {
		t.Skipf("%s has an empty shebang", a)
	}
	return f[0]
}

// job is one wrapper to generate: module, args.
type job struct {
	Module string
	Args   map[string]any
}

var (
	wrapMu    sync.Mutex
	wrapCache = map[string][]byte{}
)

// wrappers generates real AnsiballZ wrappers with ansible-core, in one
// python process so that each module's zip is the same across them (as
// in one ansible-playbook run). Skips when ansible is not installed.
func wrappers(t testing.TB, jobs ...job) [][]byte {
	t.Helper()
	py := ansiblePython(t)
	wrapMu.Lock()
	defer wrapMu.Unlock()
	out := make([][]byte, len(jobs))
	var todo [][3]any
	dir := t.TempDir()
	keys := make([]string, len(jobs))
	for i, j := range jobs {
		k, _ := json.Marshal(j)
		keys[i] = string(k)
		if w, ok := wrapCache[keys[i]]; ok {
			out[i] = w
			continue
		}
		todo = append(todo, [3]any{j.Module, j.Args, filepath.Join(dir, fmt.Sprintf("w%d.py", i))})
	}
	if len(todo) > 0 {
		spec, _ := json.Marshal(todo)
		cmd := exec.Command(py, "testdata/gen_wrappers.py", string(spec))
		cmd.Env = append(os.Environ(), "ANSIBLE_LOCAL_TEMP="+dir, "HOME="+dir)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("cannot generate AnsiballZ wrappers with %s: %v\n%s", py, err, b)
		}
		n := 0
		for i := range jobs {
			if out[i] != nil {
				continue
			}
			b, err := os.ReadFile(todo[n][2].(string))
			if err != nil {
				t.Fatal(err)
			}
			n++
			wrapCache[keys[i]] = b
			out[i] = b
		}
	}
	return out
}

var (
	fakeMu   sync.Mutex
	fakeZips = map[string]string{}
)

// fakeZip returns the base64 zip of the test module testdata/patcher.py
// with a stub basic; each variant has its own hash.
func fakeZip(variant string) string {
	return fakeZipAt(variant, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
}

// fakeZipAt is fakeZip with its files' time stamps at mod, as Ansible
// stamps a module's zip with the time of each playbook run.
func fakeZipAt(variant string, mod time.Time) string {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	key := variant + "@" + mod.String()
	if z, ok := fakeZips[key]; ok {
		return z
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	files := []struct{ name, src string }{
		{"ansible/__init__.py", ""},
		{"ansible/module_utils/__init__.py", ""},
		{"ansible/module_utils/basic.py", "@testdata/basic_stub.py"},
		{"ansible/modules/__init__.py", ""},
		{"ansible/modules/patcher.py", "@testdata/patcher.py"},
		{"ansible/variant.txt", variant},
	}
	for _, f := range files {
		data := []byte(f.src)
		if strings.HasPrefix(f.src, "@") {
			b, err := os.ReadFile(f.src[1:])
			if err != nil {
				panic(err)
			}
			data = b
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: mod})
		if err != nil {
			panic(err)
		}
		_, _ = w.Write(data)
	}
	_ = zw.Close()
	z := base64.StdEncoding.EncodeToString(buf.Bytes())
	fakeZips[key] = z
	return z
}

// fakeWrapper turns a real ping wrapper into one that runs the test
// module testdata/patcher.py with args.
func fakeWrapper(t testing.TB, args map[string]any) []byte {
	t.Helper()
	return fakeWrapperVariant(t, args, "")
}

// parsed takes a wrapper apart, as the bridge's routes do before RunModule.
func parsed(t testing.TB, src []byte) *ansiballz.Wrapper {
	t.Helper()
	w, err := ansiballz.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// fakeWrapperVariant is fakeWrapper with a zip of its own per variant.
func fakeWrapperVariant(t testing.TB, args map[string]any, variant string) []byte {
	t.Helper()
	return fakeWrapperZip(t, args, fakeZip(variant))
}

// fakeWrapperZip is fakeWrapper with zip (base64) as its ZIPDATA.
func fakeWrapperZip(t testing.TB, args map[string]any, zip string) []byte {
	t.Helper()
	ping := wrappers(t, job{"ping", map[string]any{}})[0]
	s := string(ping)
	s = regexp.MustCompile(`ZIPDATA = """[^"]*"""`).ReplaceAllLiteralString(s, `ZIPDATA = """`+zip+`"""`)
	s = strings.ReplaceAll(s, "ansible.modules.ping", "ansible.modules.patcher")
	s = strings.ReplaceAll(s, "ansible_ping_payload", "ansible_patcher_payload")
	js, _ := json.Marshal(map[string]any{"ANSIBLE_MODULE_ARGS": args})
	s = regexp.MustCompile(`(?m)^\s*ANSIBALLZ_PARAMS = '.*$`).ReplaceAllLiteralString(s, "    ANSIBALLZ_PARAMS = '"+string(js)+"'")
	return []byte(s)
}

// testLogger sends logs to t.Log.
func testLogger(t testing.TB) logrus.FieldLogger {
	t.Helper()
	l := logrus.New()
	l.SetOutput(tWriter{t})
	l.SetLevel(logrus.DebugLevel)
	return l
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// agentEnv is a test agent's setup.
type agentEnv struct {
	Python string
	Dir    string   // cwd (login directory)
	Env    []string // environment (nil: os.Environ() with HOME=Dir)
}

// startAgent starts an agent locally through the bootstrap; it is closed
// at the end of the test.
func startAgent(t testing.TB, ae agentEnv) *interp.Client {
	t.Helper()
	if ae.Python == "" {
		ae.Python = ansiblePython(t)
	}
	if ae.Dir == "" {
		ae.Dir = t.TempDir()
	}
	if ae.Env == nil {
		ae.Env = append(os.Environ(), "HOME="+ae.Dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := bootstrap.Start(ctx, bootstrap.LocalRunner{Dir: ae.Dir, Env: ae.Env}, ae.Python, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// stockRun runs wrapper the way Ansible would without the bridge: as a
// file (script != "") or piped on stdin.
func stockRun(t testing.TB, python, dir string, env []string, wrapper []byte, script string) *interp.Result {
	t.Helper()
	var cmd *exec.Cmd
	if script != "" {
		if err := os.MkdirAll(filepath.Dir(script), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(script, wrapper, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(python, script)
	} else {
		cmd = exec.Command(python)
		cmd.Stdin = bytes.NewReader(wrapper)
	}
	cmd.Dir = dir
	cmd.Env = env
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return &interp.Result{Stdout: so.Bytes(), Stderr: se.Bytes(), ExitCode: code}
}

var volatileKeys = []string{"start", "end", "delta"}

// normJSON parses a module's JSON output (after any noise lines) and drops
// the timing fields.
func normJSON(t testing.TB, out []byte) map[string]any {
	t.Helper()
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return map[string]any{"raw": string(out)}
	}
	var m map[string]any
	if err := json.Unmarshal(out[i:], &m); err != nil {
		t.Fatalf("bad JSON %q: %v", out, err)
	}
	for _, k := range volatileKeys {
		delete(m, k)
	}
	return m
}
