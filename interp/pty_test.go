package interp_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
)

// envWithout is os.Environ() with HOME=home and without the named variables.
func envWithout(home string, names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := k == "HOME"
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home)
}

// crlfOnly reports whether every LF in b is preceded by CR (ONLCR) and b
// ends with CRLF.
func crlfOnly(b []byte) bool {
	return bytes.HasSuffix(b, []byte("\r\n")) && bytes.Count(b, []byte("\n")) == bytes.Count(b, []byte("\r\n"))
}

// TestRunModulePTY: a module run on a PTY sees a terminal as ssh -tt
// gives one (controlling tty on stdin/stdout/stderr, TERM, SSH_TTY, ONLCR,
// window size), and its stderr comes back in stdout.
func TestRunModulePTY(t *testing.T) {
	cases := []struct {
		name string
		job  job
		code int
		want []string // in the raw stdout
	}{
		{"tty", job{"command", map[string]any{"_raw_params": "tty"}}, 0, []string{`"stdout": "/dev/pts/`}},
		{"term", job{"command", map[string]any{"_raw_params": `sh -c 'echo $TERM $SSH_TTY; echo err >&2'`}}, 0,
			[]string{`"stdout": "xterm-ab /dev/pts/`, `"stderr": "err"`}},
		{"env overrides", job{"command", map[string]any{"_raw_params": `sh -c 'echo $TERM'`}}, 0, []string{`"stdout": "from-env"`}},
		{"winsize", job{"command", map[string]any{"_raw_params": "stty size"}}, 0, []string{`"stdout": "40 123"`}},
		{"ctty", job{"command", map[string]any{"_raw_params": `sh -c 'ps -o tty= -o sid= -p $$; ps -o tty= -o pid= -p $PPID'`}}, 0, []string{`"stdout": "pts/`}},
		{"fails", job{"command", map[string]any{"_raw_params": "sh -c 'echo out; echo err >&2; exit 3'"}}, 1,
			[]string{`"rc": 3`, `"stdout": "out"`, `"stderr": "err"`}},
	}
	var jobs []job
	for _, c := range cases {
		jobs = append(jobs, c.job)
	}
	ws := wrappers(t, jobs...)
	if _, err := exec.LookPath("ps"); err != nil {
		t.Skip("no ps")
	}
	dir := t.TempDir()
	c := startAgent(t, agentEnv{Dir: dir, Env: envWithout(dir, "TERM", "SSH_TTY")})
	pty := &interp.PTY{Term: "xterm-ab", Rows: 40, Cols: 123}
	for i, tc := range cases {
		for _, mode := range []string{"piped", "file"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				req := interp.ModuleRequest{Wrapper: parsed(t, ws[i]), PTY: pty}
				if tc.name == "env overrides" {
					req.Env = map[string]string{"TERM": "from-env"}
				}
				if mode == "file" {
					req.ScriptPath = fmt.Sprintf("%s/.ansible/tmp/ansible-tmp-%d/AnsiballZ_command.py", dir, i)
					req.Dirs = []interp.DirSpec{{Path: req.ScriptPath[:strings.LastIndex(req.ScriptPath, "/")], Mode: 0o700}}
					req.Files = []interp.FileSpec{{Path: req.ScriptPath, Data: ws[i], Mode: 0o600}}
				}
				res, err := c.RunModule(ctxT(t, 30*time.Second), req)
				if err != nil {
					t.Fatal(err)
				}
				if res.ExitCode != tc.code || len(res.Stderr) != 0 || !crlfOnly(res.Stdout) {
					t.Fatalf("exit %d (want %d) stdout %q stderr %q", res.ExitCode, tc.code, res.Stdout, res.Stderr)
				}
				for _, w := range tc.want {
					if !strings.Contains(string(res.Stdout), w) {
						t.Errorf("stdout lacks %q: %s", w, res.Stdout)
					}
				}
				m := normJSON(t, res.Stdout)
				if tc.name == "ctty" {
					// The module's shell and the module (its parent) have
					// the pty as controlling terminal, and the module leads
					// the session.
					lines := strings.Split(fmt.Sprint(m["stdout"]), "\n")
					if len(lines) != 2 {
						t.Fatalf("ps: %q", m["stdout"])
					}
					sh, mod := strings.Fields(lines[0]), strings.Fields(lines[1])
					if len(sh) != 2 || len(mod) != 2 || !strings.HasPrefix(sh[0], "pts/") || mod[0] != sh[0] || sh[1] != mod[1] {
						t.Errorf("ps (tty sid / tty pid): %q", m["stdout"])
					}
				}
			})
		}
	}

	t.Run("no TERM", func(t *testing.T) {
		w := wrappers(t, job{"command", map[string]any{"_raw_params": `sh -c 'echo "[${TERM-unset}]"'`}})[0]
		res, err := c.RunModule(ctxT(t, 30*time.Second), interp.ModuleRequest{Wrapper: parsed(t, w), PTY: &interp.PTY{}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(res.Stdout), `"stdout": "[unset]"`) {
			t.Fatalf("stdout %q", res.Stdout)
		}
	})

	t.Run("without PTY", func(t *testing.T) {
		ws := wrappers(t, cases[0].job, cases[1].job)
		res, err := c.RunModule(ctxT(t, 30*time.Second), interp.ModuleRequest{Wrapper: parsed(t, ws[0])})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 1 || !strings.Contains(string(res.Stdout), `"stdout": "not a tty"`) || bytes.Contains(res.Stdout, []byte("\r")) {
			t.Fatalf("tty without PTY: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		res, err = c.RunModule(ctxT(t, 30*time.Second), interp.ModuleRequest{Wrapper: parsed(t, ws[1])})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 || !strings.Contains(string(res.Stdout), `"stdout": "",`) || bytes.Contains(res.Stdout, []byte("\r")) {
			t.Fatalf("TERM without PTY: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})

	// The module's own stderr (a traceback) comes back in stdout.
	t.Run("stderr merged", func(t *testing.T) {
		res, err := c.RunModule(ctxT(t, 30*time.Second), interp.ModuleRequest{
			Wrapper: parsed(t, fakeWrapper(t, map[string]any{"noise": true, "raise": true})), PTY: pty})
		if err != nil {
			t.Fatal(err)
		}
		out := string(res.Stdout)
		if res.ExitCode != 1 || len(res.Stderr) != 0 || !strings.Contains(out, "noise on stderr\r\n") ||
			!strings.Contains(out, "RuntimeError: boom\r\n") || strings.Index(out, "noise on stdout") > strings.Index(out, "noise on stderr") {
			t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})

	// Many at once: every task's EOF comes (no slave fd leaks into another
	// task, the zygote or the agent) and outputs do not mix.
	t.Run("concurrent", func(t *testing.T) {
		const n = 12
		var jobs []job
		for i := 0; i < n; i++ {
			jobs = append(jobs, job{"command", map[string]any{"_raw_params": fmt.Sprintf("echo task-%d", i)}})
		}
		ws := wrappers(t, jobs...)
		ctx := ctxT(t, 60*time.Second)
		var wg sync.WaitGroup
		errs := make([]string, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				req := interp.ModuleRequest{Wrapper: parsed(t, ws[i])}
				if i%2 == 0 {
					req.PTY = pty
				}
				res, err := c.RunModule(ctx, req)
				switch {
				case err != nil:
					errs[i] = err.Error()
				case res.ExitCode != 0 || !strings.Contains(string(res.Stdout), fmt.Sprintf(`"stdout": "task-%d"`, i)) ||
					crlfOnly(res.Stdout) != (i%2 == 0):
					errs[i] = fmt.Sprintf("task %d: exit %d stdout %q stderr %q", i, res.ExitCode, res.Stdout, res.Stderr)
				}
			}(i)
		}
		wg.Wait()
		if s := strings.TrimSpace(strings.Join(errs, "\n")); s != "" {
			t.Fatal(s)
		}
	})
}

func TestExecPTY(t *testing.T) {
	dir := t.TempDir()
	c := startAgent(t, agentEnv{Dir: dir, Env: envWithout(dir, "TERM", "SSH_TTY")})
	pty := &interp.PTY{Term: "vt100", Rows: 24, Cols: 80}
	var so, se bytes.Buffer
	code, err := c.Exec(ctxT(t, 30*time.Second), interp.ExecRequest{
		Command: `tty; echo "$TERM $SSH_TTY"; stty size; echo err >&2; exit 3`, PTY: pty, Stdout: &so, Stderr: &se})
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^(/dev/pts/\d+)\r\nvt100 (/dev/pts/\d+)\r\n24 80\r\nerr\r\n$`)
	m := re.FindStringSubmatch(so.String())
	if code != 3 || se.Len() != 0 || m == nil || m[1] != m[2] {
		t.Fatalf("exit %d stdout %q stderr %q", code, so.String(), se.String())
	}

	// Stdin goes to the terminal (echoed); a line ends read.
	so.Reset()
	code, err = c.Exec(ctxT(t, 30*time.Second), interp.ExecRequest{
		Command: `read x; echo "got $x"`, PTY: pty, Stdin: strings.NewReader("hello\n"), Stdout: &so})
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || so.String() != "hello\r\ngot hello\r\n" {
		t.Fatalf("exit %d stdout %q", code, so.String())
	}
}
