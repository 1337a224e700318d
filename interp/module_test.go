package interp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
)

// TestRunModuleMatchesPython runs real modules through the agent and with
// a plain python, piped and from a file, and compares.
func TestRunModuleMatchesPython(t *testing.T) {
	py := ansiblePython(t)
	cases := []struct {
		name string
		job  job
	}{
		{"ping", job{"ping", map[string]any{}}},
		{"ping data", job{"ping", map[string]any{"data": "x"}}},
		{"ping crash", job{"ping", map[string]any{"data": "crash"}}},
		{"command", job{"command", map[string]any{"_raw_params": "echo hi"}}},
		{"command pwd", job{"command", map[string]any{"_raw_params": "pwd"}}},
		{"command env", job{"command", map[string]any{"_raw_params": "echo $AB_ENV", "_uses_shell": true}}},
		{"command fails", job{"command", map[string]any{"_raw_params": "false"}}},
		{"command missing", job{"command", map[string]any{"_raw_params": "/nonexistent/cmd"}}},
		{"bad args", job{"ping", map[string]any{"nosuchoption": 1}}},
	}
	var jobs []job
	for _, c := range cases {
		jobs = append(jobs, c.job)
	}
	ws := wrappers(t, jobs...)
	dir := t.TempDir()
	c := startAgent(t, agentEnv{Dir: dir})
	env := append(os.Environ(), "HOME="+dir)
	for i, tc := range cases {
		for _, mode := range []string{"piped", "file"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				script := ""
				if mode == "file" {
					script = filepath.Join(dir, ".ansible", "tmp", fmt.Sprintf("ansible-tmp-%d", i), "AnsiballZ_"+tc.job.Module+".py")
				}
				want := stockRun(t, py, dir, append(env, "AB_ENV=from-env"), ws[i], script)
				req := interp.ModuleRequest{Wrapper: parsed(t, ws[i]), ScriptPath: script, Env: map[string]string{"AB_ENV": "from-env"}}
				if script != "" {
					req.Dirs = []interp.DirSpec{{Path: filepath.Dir(script), Mode: 0o700}}
					req.Files = []interp.FileSpec{{Path: script, Data: ws[i], Mode: 0o600}}
				}
				got, err := c.RunModule(ctxT(t, 30*time.Second), req)
				if err != nil {
					t.Fatal(err)
				}
				if got.ExitCode != want.ExitCode {
					t.Errorf("exit %d, stock %d\nstdout %s\nstderr %s", got.ExitCode, want.ExitCode, got.Stdout, got.Stderr)
				}
				if g, w := normJSON(t, got.Stdout), normJSON(t, want.Stdout); !reflect.DeepEqual(g, w) {
					t.Errorf("stdout\n got %s\nwant %s", got.Stdout, want.Stdout)
				}
				if (len(got.Stderr) == 0) != (len(want.Stderr) == 0) {
					t.Errorf("stderr\n got %q\nwant %q", got.Stderr, want.Stderr)
				}
				// A traceback names the same files and lines as stock's
				// (the wrapper's own path among them), up to where the
				// module's zip is: stock's is in a random temp dir.
				if g, w := zipPath.ReplaceAll(got.Stderr, []byte(`"ZIP/`)), zipPath.ReplaceAll(want.Stderr, []byte(`"ZIP/`)); bytes.Contains(w, []byte("Traceback")) && !bytes.Equal(g, w) {
					t.Errorf("traceback\n got %s\nwant %s", g, w)
				}
			})
		}
	}
}

// zipPath matches the path of a module's zip in a traceback line.
var zipPath = regexp.MustCompile(`"[^"]*\.zip/`)

// TestRunModuleIsolation: a task that monkey-patches the stdlib, a
// module_utils module and the environment leaves the next task unaffected.
// TestRunModuleFromZygoteZip: the payload lines Go found are replaced,
// so every task runs its module from the zip its zygote keeps, rather
// than from a copy the wrapper writes to a fresh temp dir.
func TestRunModuleFromZygoteZip(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	var files []any
	for i := 0; i < 3; i++ {
		res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, fakeWrapper(t, map[string]any{"i": i}))})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("task %d: %v %+v", i, err, res)
		}
		files = append(files, normJSON(t, res.Stdout)["modlib_path"])
	}
	if f, _ := files[0].(string); !strings.Contains(f, "ansible_patcher_payload.zip") || files[1] != f || files[2] != f {
		t.Errorf("modules run from %q", files)
	}
}

func TestRunModuleIsolation(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	run := func(args map[string]any) map[string]any {
		t.Helper()
		res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, fakeWrapper(t, args))})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("exit %d: %s %s", res.ExitCode, res.Stdout, res.Stderr)
		}
		return normJSON(t, res.Stdout)
	}
	first := run(map[string]any{"patch": true})
	for _, k := range []string{"getcwd_patched", "basic_leak", "env_leak", "json_patched", "zipimport_patched"} {
		if v := first[k]; v != false && v != nil {
			t.Fatalf("first task already sees %s=%v", k, v)
		}
	}
	for i := 0; i < 3; i++ {
		next := run(map[string]any{"patch": true})
		if next["getcwd_patched"] != false || next["basic_leak"] != nil || next["env_leak"] != nil || next["json_patched"] != false {
			t.Fatalf("task %d sees the previous task's patches: %v", i+2, next)
		}
	}
}

// TestRunModuleNoise: a module printing (even frame-like bytes) on fds 1
// and 2 does not corrupt the protocol.
func TestRunModuleNoise(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, fakeWrapper(t, map[string]any{"noise": true}))})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(res.Stdout), "noise on stdout") || !strings.Contains(string(res.Stderr), "noise on stderr") {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRunModuleWritten: Written is called once the request's dirs and
// files are on disk, while the module still runs (the bridge lets an rm
// of them go ahead then, not at the module's end, which an abandoned
// task may never reach).
func TestRunModuleWritten(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	tmp := t.TempDir()
	fifo := filepath.Join(tmp, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "ansible-tmp-1")
	written := make(chan struct{})
	req := interp.ModuleRequest{
		Wrapper: parsed(t, fakeWrapper(t, map[string]any{"wait": fifo})),
		Dirs:    []interp.DirSpec{{Path: dir, Mode: 0o700}},
		Files:   []interp.FileSpec{{Path: filepath.Join(dir, "f"), Data: []byte("x"), Mode: 0o600}},
		Written: func() { close(written) },
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.RunModule(ctx, req)
		done <- err
	}()
	select {
	case <-written:
	case err := <-done:
		t.Fatalf("the run ended (%v) before Written", err)
	case <-ctx.Done():
		t.Fatal("no Written")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "x" {
		t.Errorf("file at Written: %q, %v", b, err)
	}
	// Opening the FIFO waits for the module to open it: it is running.
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRunModuleExitCodes(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	for _, tc := range []struct {
		args   map[string]any
		code   int
		stderr string
	}{
		{map[string]any{}, 0, ""},
		{map[string]any{"rc": 3}, 3, ""},
		{map[string]any{"rc": 256 + 7}, 7, ""},
		{map[string]any{"rc": "text exit"}, 1, "text exit"},
		{map[string]any{"raise": true}, 1, "RuntimeError: boom"},
		// No status of its own: the one its seed (or zygote) reaped.
		{map[string]any{"signal": 9}, 128 + 9, ""},
		{map[string]any{"signal": 15}, 128 + 15, ""},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, fakeWrapper(t, tc.args))})
			if err != nil {
				t.Fatal(err)
			}
			if sig, _ := tc.args["signal"].(int); res.Signal != sig {
				t.Errorf("signal %d, want %d", res.Signal, sig)
			}
			if res.ExitCode != tc.code || !strings.Contains(string(res.Stderr), tc.stderr) {
				t.Fatalf("exit %d stderr %q; want %d and %q", res.ExitCode, res.Stderr, tc.code, tc.stderr)
			}
			if tc.args["raise"] == true && strings.Contains(string(res.Stderr), "agent") {
				t.Errorf("traceback shows agent frames:\n%s", res.Stderr)
			}
		})
	}
}

func TestRunModuleConcurrent(t *testing.T) {
	const n = 10
	var jobs []job
	for i := 0; i < n; i++ {
		jobs = append(jobs, job{"command", map[string]any{"_raw_params": fmt.Sprintf("echo task-%d", i)}})
	}
	ws := wrappers(t, jobs...)
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 60*time.Second)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, ws[i])})
			switch {
			case err != nil:
				errs[i] = err
			case res.ExitCode != 0 || !strings.Contains(string(res.Stdout), fmt.Sprintf(`"stdout": "task-%d"`, i)):
				errs[i] = fmt.Errorf("task %d: exit %d stdout %s stderr %s", i, res.ExitCode, res.Stdout, res.Stderr)
			}
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if z := c.Stats().ZipsSent; z != 1 {
		t.Errorf("zip sent %d times, want 1", z)
	}
}

// TestRunModuleWarmBytes measures the wire cost and latency of a warm
// task against a cold one and a stock python run.
func TestRunModuleWarmBytes(t *testing.T) {
	py := ansiblePython(t)
	const n = 20
	var jobs []job
	for i := 0; i < n; i++ {
		jobs = append(jobs, job{"command", map[string]any{"_raw_params": fmt.Sprintf("echo %d", i)}})
	}
	ws := wrappers(t, jobs...)
	dir := t.TempDir()
	c := startAgent(t, agentEnv{Dir: dir})
	ctx := ctxT(t, 60*time.Second)
	var cold time.Duration
	var warm []time.Duration
	var warmBytes []int64
	for i, w := range ws {
		before := c.Stats().BytesSent
		start := time.Now()
		res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, w)})
		if err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		if res.ExitCode != 0 {
			t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
		}
		sent := c.Stats().BytesSent - before
		if i == 0 {
			cold = d
			t.Logf("cold: %v, %d bytes sent (wrapper %d bytes)", d, sent, len(w))
			continue
		}
		warm = append(warm, d)
		warmBytes = append(warmBytes, sent)
		if sent >= 4096 {
			t.Errorf("warm task %d sent %d bytes, want < 4096", i, sent)
		}
	}
	var sum time.Duration
	for _, d := range warm {
		sum += d
	}
	start := time.Now()
	stockRun(t, py, dir, append(os.Environ(), "HOME="+dir), ws[0], "")
	t.Logf("warm: mean %v over %d tasks, bytes %v; cold %v; stock python run %v",
		sum/time.Duration(len(warm)), len(warm), warmBytes, cold, time.Since(start))
}

// TestAgentDeath: requests in flight fail promptly with ErrAgentGone when
// the agent dies, and later ones at once.
func TestAgentDeath(t *testing.T) {
	ws := wrappers(t, job{"command", map[string]any{"_raw_params": "sleep 30"}})
	// Its own temp root: a killed agent leaves its task's payload dir.
	dir := t.TempDir()
	c := startAgent(t, agentEnv{Dir: dir, Env: append(os.Environ(), "HOME="+dir, "TMPDIR="+dir)})
	ctx := ctxT(t, 60*time.Second)
	errc := make(chan error, 2)
	go func() {
		_, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, ws[0])})
		errc <- err
	}()
	go func() {
		_, err := c.Exec(ctx, interp.ExecRequest{Command: "sleep 30"})
		errc <- err
	}()
	// Both requests are in flight once the agent has answered a later ping.
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := syscall.Kill(c.Info().PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-errc:
			if !errors.Is(err, interp.ErrAgentGone) {
				t.Fatalf("in-flight request: %v, want ErrAgentGone", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("in-flight request still pending 10s after the agent died")
		}
	}
	t.Logf("in-flight requests failed %v after the kill", time.Since(start))
	if err := c.Ping(ctx); !errors.Is(err, interp.ErrAgentGone) {
		t.Fatalf("ping after death: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed")
	}
}

// TestRestartOnEnvironmentChange: once ~/.pam_environment changes, module
// runs answer ErrRestart (other operations keep working).
func TestRestartOnEnvironmentChange(t *testing.T) {
	home := t.TempDir()
	c := startAgent(t, agentEnv{Dir: home})
	ctx := ctxT(t, 30*time.Second)
	w := fakeWrapper(t, map[string]any{})
	if _, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, w)}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".pam_environment"), []byte("AB_ENV=new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, w)}); !errors.Is(err, interp.ErrRestart) {
		t.Fatalf("after .pam_environment changed: %v, want ErrRestart", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNothingInTempBetweenTasks: after a module task the agent's temp
// root holds nothing of the task's or the agent's, as after stock's.
func TestNothingInTempBetweenTasks(t *testing.T) {
	home, tmp := t.TempDir(), t.TempDir()
	c := startAgent(t, agentEnv{Dir: home, Env: append(os.Environ(), "HOME="+home, "TMPDIR="+tmp)})
	ctx := ctxT(t, 30*time.Second)
	if c.Info().TmpDir != tmp {
		t.Fatalf("temp root %s, want %s", c.Info().TmpDir, tmp)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, fakeWrapper(t, map[string]any{}))}); err != nil {
			t.Fatal(err)
		}
		if ents, err := os.ReadDir(tmp); err != nil || len(ents) != 0 {
			t.Fatalf("after task %d: %v %v", i, ents, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(tmp); err != nil || len(ents) != 0 {
		t.Fatalf("after Close: %v %v", ents, err)
	}
}

// pythons lists the Python 3 interpreters on this machine.
func pythons(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"/usr/bin/python3", "/usr/bin/python3.[0-9]*", "/root/.pyenv/versions/*/bin/python3"} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && !strings.HasSuffix(p, "-config") && fi.Mode()&0o111 != 0 {
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 {
		t.Skip("no python3 on this machine")
	}
	return out
}

// TestRunModuleEveryPython runs a real module and the isolation check with
// every Python here (the agent and the zygote must work on 3.6+).
func TestRunModuleEveryPython(t *testing.T) {
	ws := wrappers(t, job{"ping", map[string]any{"data": "every"}})
	for _, py := range pythons(t) {
		t.Run(py, func(t *testing.T) {
			t.Parallel()
			c := startAgent(t, agentEnv{Python: py})
			ctx := ctxT(t, 60*time.Second)
			res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, ws[0]), Env: map[string]string{"LC_ALL": "C"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 || normJSON(t, res.Stdout)["ping"] != "every" {
				t.Fatalf("exit %d stdout %s stderr %s", res.ExitCode, res.Stdout, res.Stderr)
			}
			for i := 0; i < 2; i++ {
				res, err = c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, fakeWrapper(t, map[string]any{"patch": true}))})
				if err != nil {
					t.Fatal(err)
				}
				m := normJSON(t, res.Stdout)
				if res.ExitCode != 0 || m["getcwd_patched"] != false || m["json_patched"] != false {
					t.Fatalf("run %d: exit %d stdout %s stderr %s", i, res.ExitCode, res.Stdout, res.Stderr)
				}
			}
		})
	}
}

// TestResInitOnResolvConf: a changed /etc/resolv.conf keeps the zygote
// (the task and the zygote call res_init instead of a costly rebuild),
// and the task runs.
func TestResInitOnResolvConf(t *testing.T) {
	touch := resolvConfToucher(t)
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	ppid := func() int { t.Helper(); return mustForkedFrom(t, ctx, c, fakeWrapper(t, map[string]any{})) }
	a, b := ppid(), ppid()
	if a != b {
		t.Fatalf("zygote changed without cause: %v then %v", a, b)
	}
	touch()
	if c3 := ppid(); c3 != b {
		t.Fatalf("zygote rebuilt (%v, was %v) after /etc/resolv.conf changed", c3, b)
	}
}

// resolvConfToucher skips t where there is no /etc/resolv.conf, and
// returns a function that moves its mtime on (back when t ends).
func resolvConfToucher(t *testing.T) func() {
	t.Helper()
	const resolv = "/etc/resolv.conf"
	fi, err := os.Stat(resolv)
	if err != nil {
		t.Skipf("no %s: %v", resolv, err)
	}
	return func() {
		t.Helper()
		mt := fi.ModTime()
		if err := os.Chtimes(resolv, time.Now(), mt.Add(time.Second)); err != nil {
			t.Skipf("cannot touch %s: %v", resolv, err)
		}
		t.Cleanup(func() { _ = os.Chtimes(resolv, time.Now(), mt) })
	}
}

// TestDroppedSeedReportsItsForks: a zygote that learns something (here a
// changed resolv.conf) drops its seed for one forked after; the old seed
// still reaps the task it forked and reports how it ended (a signal: no
// status of the task's own).
func TestDroppedSeedReportsItsForks(t *testing.T) {
	touch := resolvConfToucher(t)
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	z := 0
	for i := 0; i < 4; i++ {
		z = mustForkedFrom(t, ctx, c, fakeWrapper(t, map[string]any{}))
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	type ran struct {
		res *interp.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, fakeWrapper(t, map[string]any{"wait": fifo, "signal": 15}))})
		done <- ran{res, err}
	}()
	wr, err := os.OpenFile(fifo, os.O_WRONLY, 0) // returns once the task has it open
	if err != nil {
		t.Fatal(err)
	}
	seeds := children(t, z)
	touch()
	if z2 := mustForkedFrom(t, ctx, c, fakeWrapper(t, map[string]any{})); z2 != z {
		t.Fatalf("forked from %d, not the zygote %d", z2, z)
	}
	// The next spare, once the task running has run on a while, comes
	// from a new seed; the old one stays for its task.
	newSeed := func() bool {
		return slices.ContainsFunc(children(t, z), func(p int) bool { return !slices.Contains(seeds, p) })
	}
	if !pollAgent(t, ctx, c, newSeed) {
		t.Fatalf("no new seed after res_init: %v (was %v)", children(t, z), seeds)
	}
	if !slices.ContainsFunc(children(t, z), func(p int) bool { return slices.Contains(seeds, p) }) {
		t.Fatalf("the old seed left before its task: %v (was %v)", children(t, z), seeds)
	}
	wr.Close()
	r := <-done
	if r.err != nil || r.res.Signal != 15 || r.res.ExitCode != 128+15 {
		t.Fatalf("the old seed's task: %+v %v; want killed by signal 15", r.res, r.err)
	}
}

// forkedFrom runs wrapper w (fakeWrapper's module) and returns the pid of
// the zygote its task was forked from (by the zygote or its seed).
func forkedFrom(ctx context.Context, c *interp.Client, w []byte) (int, error) {
	pw, err := ansiballz.Parse(w)
	if err != nil {
		return 0, err
	}
	res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: pw})
	if err != nil {
		return 0, err
	}
	if res.ExitCode != 0 {
		return 0, fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	var out struct{ PPID, PPPID int }
	if err := json.Unmarshal(res.Stdout, &out); err != nil || out.PPID == 0 {
		return 0, fmt.Errorf("no ppid in %q: %v", res.Stdout, err)
	}
	if out.PPPID != c.Info().PID {
		return out.PPPID, nil // forked by the zygote's seed
	}
	return out.PPID, nil
}

// TestZipCodeCache: module_utils compiled by one zip's zygote is loaded by
// the next zip's (same source) under the next zip's file name, as a
// compile of its own would name it.
func TestZipCodeCache(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	for _, variant := range []string{"first", "second"} {
		res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, fakeWrapperVariant(t, map[string]any{}, variant))})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v", variant, err, res)
		}
		out := normJSON(t, res.Stdout)
		if out["basic_code_file"] != out["basic_file"] {
			t.Errorf("%s zip: basic's code names %v, the module is %v", variant, out["basic_code_file"], out["basic_file"])
		}
	}
	if n := codeCacheSize(t, c); n == 0 && !strings.HasPrefix(c.Info().Python, "3.6") && !strings.HasPrefix(c.Info().Python, "3.7") {
		t.Errorf("no compiled code cached by agent %d", c.Info().PID)
	}
}

// codeCacheSize is the size of the agent's compiled-code cache: an
// unlinked file under its temp root that it holds open.
func codeCacheSize(t *testing.T, c *interp.Client) int64 {
	t.Helper()
	fds := fmt.Sprintf("/proc/%d/fd", c.Info().PID)
	ents, err := os.ReadDir(fds)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := filepath.Join(fds, e.Name())
		target, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(target, c.Info().TmpDir+"/") || !strings.HasSuffix(target, " (deleted)") {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			return fi.Size()
		}
	}
	return 0
}

// mustForkedFrom is forkedFrom, failing t on an error.
func mustForkedFrom(t *testing.T, ctx context.Context, c *interp.Client, w []byte) int {
	t.Helper()
	z, err := forkedFrom(ctx, c, w)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// killAndWait sends SIGKILL to pid and waits until it is dead (a zombie
// or gone): a kill takes effect when the process is next scheduled.
func killAndWait(t *testing.T, ctx context.Context, c *interp.Client, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
		return // gone already
	} else if err != nil {
		t.Fatal(err)
	}
	dead := func() bool {
		f := procStat(fmt.Sprint(pid))
		return f == nil || f[0] == "Z"
	}
	if !pollAgent(t, ctx, c, dead) {
		t.Fatalf("pid %d still alive after SIGKILL", pid)
	}
}

// pollAgent calls cond until it reports true, pinging the agent between
// tries (its answer is the pause, not a sleep), for at most 10 s; it
// reports whether cond came true.
func pollAgent(t *testing.T, ctx context.Context, c *interp.Client, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return true
}

// procStat returns the fields of /proc/PID/stat after the command name
// (state, ppid, ...), or nil if there is no such process.
func procStat(pid string) []string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) == 0 {
		return nil
	}
	return f
}

// TestZygoteKilled: a zygote that dies is replaced on the next run.
func TestZygoteKilled(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	w := fakeWrapper(t, map[string]any{})
	ppid := func() int { t.Helper(); return mustForkedFrom(t, ctx, c, w) }
	z := ppid()
	// The agent notices the death before the next run or after (its run
	// may then go to a spare of the dead zygote, orphaned); either way the
	// next run must work.
	killAndWait(t, ctx, c, z)
	if z2 := ppid(); z2 == z {
		t.Fatalf("still forked from the killed zygote %d", z)
	}
}

// TestSpareKilled: the agent holds a zygote's fork made ahead of time and
// sends it the next task; if that fork is gone, the task still runs.
func TestSpareKilled(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 30*time.Second)
	w := fakeWrapper(t, map[string]any{})
	run := func() int { t.Helper(); return mustForkedFrom(t, ctx, c, w) }
	z := run()
	// The zygote forks the next spare once it hears the last one was used,
	// through its seed: kill both.
	var spares []int
	if !pollAgent(t, ctx, c, func() bool {
		spares = children(t, z)
		for _, pid := range spares {
			spares = append(spares, children(t, pid)...)
		}
		return len(spares) > 1
	}) {
		t.Fatalf("the zygote forked no spare (its forks: %v)", spares)
	}
	// Stopped, the zygote cannot offer a replacement: the agent finds the
	// spare it holds gone and must send the task through the zygote.
	if err := syscall.Kill(z, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(z, syscall.SIGCONT) })
	// Its forks (the seed) stopped first, so that none forks a spare the
	// listing above missed (asked for just before the zygote stopped): one
	// left would take the task, orphaned.
	forks := children(t, z)
	for _, pid := range forks {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		if !pollAgent(t, ctx, c, func() bool { f := procStat(fmt.Sprint(pid)); return f == nil || strings.ContainsAny(f[0], "TtZX") }) {
			t.Fatalf("fork %d of the zygote does not stop", pid)
		}
	}
	spares = slices.Clone(forks)
	for _, pid := range forks {
		spares = append(spares, children(t, pid)...)
	}
	for _, pid := range spares {
		killAndWait(t, ctx, c, pid)
	}
	fds := func() int {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c.Info().PID))
		return len(ents)
	}
	before := fds()
	type ran struct {
		z   int
		err error
	}
	done := make(chan ran, 1)
	go func() {
		z, err := forkedFrom(ctx, c, w)
		done <- ran{z, err}
	}()
	// The agent keeps three pipe ends (stdout, stderr, status) per task
	// it has dispatched, and has closed the dead spare's socket.
	if !pollAgent(t, ctx, c, func() bool { return fds() >= before+2 }) {
		t.Fatal("the agent took no task")
	}
	if err := syscall.Kill(z, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.z != z {
		t.Fatalf("forked from %d (%v), not the zygote %d", r.z, r.err, z)
	}
	for i := 0; i < 3; i++ {
		if z2 := run(); z2 != z {
			t.Fatalf("run %d forked from %d, not the zygote %d", i, z2, z)
		}
	}
}

// children lists the pids whose parent is pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		// state ppid ...
		f := procStat(e.Name())
		if len(f) > 1 && f[1] == fmt.Sprint(pid) && f[0] != "Z" {
			var p int
			fmt.Sscan(e.Name(), &p)
			out = append(out, p)
		}
	}
	return out
}

// TestZygoteLimit: beyond 8 zips the least recently used zygote goes.
func TestZygoteLimit(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 60*time.Second)
	for i := 0; i < 12; i++ {
		res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, fakeWrapperVariant(t, map[string]any{}, fmt.Sprint(i)))})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("variant %d: %v %+v", i, err, res)
		}
	}
	n := 0
	if !pollAgent(t, ctx, c, func() bool { n = len(children(t, c.Info().PID)); return n <= 8 }) {
		t.Fatalf("%d zygotes, want at most 8", n)
	}
}

// TestTwinZipsShareZygote: a module's zip built again (Ansible does so
// every playbook run) differs in its time stamps only; its tasks run in
// the zygote the first one started. A zip with other files gets its own.
func TestTwinZipsShareZygote(t *testing.T) {
	c := startAgent(t, agentEnv{})
	ctx := ctxT(t, 60*time.Second)
	run := func(zip string) {
		t.Helper()
		res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(t, fakeWrapperZip(t, map[string]any{}, zip))})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v %+v", err, res)
		}
	}
	zygotes := func(want int) {
		t.Helper()
		n := 0
		if !pollAgent(t, ctx, c, func() bool { n = len(children(t, c.Info().PID)); return n == want }) {
			t.Fatalf("%d zygotes, want %d", n, want)
		}
	}
	first, again := fakeZipAt("twin", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)), fakeZipAt("twin", time.Date(2026, 11, 25, 19, 0, 0, 0, time.UTC))
	if first == again {
		t.Fatal("the two zips are the same bytes")
	}
	before := c.Stats().BytesSent
	run(first)
	zygotes(1)
	sent := c.Stats().BytesSent
	firstSent := sent - before
	run(again)
	// The twin went as a reference to the zip held, not whole.
	if z := c.Stats().ZipsSent; z != 1 {
		t.Errorf("%d zips sent for two twins, want 1", z)
	}
	zipLen := int64(base64.StdEncoding.DecodedLen(len(again)))
	if n := c.Stats().BytesSent - sent; n > firstSent-zipLen/2 {
		t.Errorf("the twin's task sent %d bytes, the first %d; the zip is %d", n, firstSent, zipLen)
	}
	run(first)
	zygotes(1)
	run(fakeZipAt("other", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)))
	zygotes(2)
	if z := c.Stats().ZipsSent; z != 2 {
		t.Errorf("%d zips sent for two twins and another, want 2", z)
	}
}

// TestWarmZygoteForksNothing: once warm, a zygote's spares are forked by
// its seed, so the zygote's loop writes pages no fork has write-protected:
// it takes next to no page faults per task (~270 when it forked each spare
// itself).
func TestWarmZygoteForksNothing(t *testing.T) {
	for _, py := range pythons(t) {
		t.Run(py, func(t *testing.T) {
			t.Parallel()
			c := startAgent(t, agentEnv{Python: py})
			ctx := ctxT(t, 60*time.Second)
			w := fakeWrapper(t, map[string]any{})
			z := 0
			for i := 0; i < 6; i++ { // warm: pages and the shape learned
				z = mustForkedFrom(t, ctx, c, w)
			}
			faults := func() int {
				n, _ := strconv.Atoi(procStat(fmt.Sprint(z))[7]) // minflt: field 10 of stat
				return n
			}
			before, seeds := faults(), children(t, z)
			const tasks = 10
			for i := 0; i < tasks; i++ {
				if got := mustForkedFrom(t, ctx, c, w); got != z {
					t.Fatalf("task %d forked from %d, not the zygote %d", i, got, z)
				}
			}
			if perTask := float64(faults()-before) / tasks; perTask > 40 {
				t.Fatalf("%.0f page faults a task in the warm zygote (its loop after a fork of its own?)", perTask)
			}
			if !slices.ContainsFunc(seeds, func(p int) bool { return slices.Contains(children(t, z), p) }) {
				t.Fatalf("no child of the zygote outlived %d tasks: no seed (before %v, after %v)", tasks, seeds, children(t, z))
			}
		})
	}
}
