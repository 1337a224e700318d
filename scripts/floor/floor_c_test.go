package main

// The C floor, c/floor.c, is what scripts/bench runs (a Go binary's start
// costs more than the floor should); main.go is its reference. These tests
// compile it once per test run and require of it, over every case and a
// table of the calls stock Ansible makes (testdata/), byte for byte what
// the Go floor answers: same stdout, stderr and exit status, and the same
// stdin read. Its machine-dependent values (this host's name, its pid, the
// command module's start time) are given to the Go floor, after a check
// that they are plausible, so that the comparison is exact.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/internal/cbuild"
)

// testUser is $USER for the C floor, and localUser for the Go one.
const testUser = "ci"

var (
	cOnce sync.Once
	cDir  string // holds the compiled floor; removed by TestMain
	cBin  string
	cErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cDir != "" {
		os.RemoveAll(cDir)
	}
	os.Exit(code)
}

// floorC returns the C floor, compiled on first use as scripts/bench
// compiles it.
func floorC(t testing.TB) string {
	t.Helper()
	cOnce.Do(func() {
		if cDir, cErr = os.MkdirTemp("", "floor-c-"); cErr != nil {
			return
		}
		cBin = filepath.Join(cDir, "ansible-floor")
		cErr = cbuild.Build(context.Background(), "../..", cbuild.Floor, cBin)
	})
	if cErr != nil {
		t.Fatal(cErr)
	}
	return cBin
}

// outcome is a floor's answer to one call.
type outcome struct {
	stdout, stderr string
	exit           int
}

// cRun is one run of the C floor.
type cRun struct {
	outcome
	consumed      int // bytes of stdin it read
	pid           int
	before, after time.Time
}

// runC runs the C floor with argv (argv[0] as given: the floor dispatches
// on it), stdin from a file, USER=testUser and this process's TZ, or the
// environment env.
func runC(t testing.TB, argv []string, stdin string, env []string) cRun {
	t.Helper()
	bin := floorC(t)
	f, err := os.CreateTemp(filepath.Dir(bin), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.WriteString(stdin); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Args = argv
	if cmd.Env = env; env == nil {
		cmd.Env = []string{"USER=" + testUser}
		if tz, ok := os.LookupEnv("TZ"); ok {
			cmd.Env = append(cmd.Env, "TZ="+tz)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f, &stdout, &stderr
	r := cRun{before: time.Now()}
	err = cmd.Run()
	r.after = time.Now()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.Exited():
		r.exit = exit.ExitCode()
	case err != nil:
		t.Fatalf("%q: %v", argv, err)
	}
	r.pid = cmd.Process.Pid
	off, err := f.Seek(0, io.SeekCurrent) // the floor shared f's offset
	if err != nil {
		t.Fatal(err)
	}
	r.consumed = int(off)
	r.outcome.stdout, r.outcome.stderr = stdout.String(), stderr.String()
	return r
}

const timeLayout = "2006-01-02 15:04:05.000000"

var startEnd = regexp.MustCompile(`"start": "(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})", "end": "(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})"`)

// start returns the command module's start time the C floor printed, if
// it printed one, once checked: in local time, between the floor's start
// and end, and 2 ms before the end it printed.
func (c cRun) start(t testing.TB, loc *time.Location) (time.Time, bool) {
	t.Helper()
	m := startEnd.FindStringSubmatch(c.stdout)
	if m == nil {
		return time.Time{}, false
	}
	start, err1 := time.ParseInLocation(timeLayout, m[1], loc)
	end, err2 := time.ParseInLocation(timeLayout, m[2], loc)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("module times: %v", err)
	}
	if start.Before(c.before.Truncate(time.Microsecond)) || start.After(c.after) {
		t.Errorf("module start %s is not within the run, %s to %s", m[1], c.before.In(loc).Format(timeLayout), c.after.In(loc).Format(timeLayout))
	}
	if end.Sub(start) != 2*time.Millisecond && start.Add(2*time.Millisecond).In(loc).Format(timeLayout) != m[2] {
		t.Errorf("module end %s is not 2 ms after its start %s", m[2], m[1])
	}
	return start, true
}

// normalized is the C floor's answer with this machine's hostname, the
// floor's pid and its module times replaced by fixed's, once checked.
func (c cRun) normalized(t testing.TB) outcome {
	t.Helper()
	o := c.outcome
	if _, ok := c.start(t, time.Local); ok {
		at := fixed.now()
		o.stdout = startEnd.ReplaceAllLiteralString(o.stdout, fmt.Sprintf(`"start": "%s", "end": "%s"`,
			at.Format(timeLayout), at.Add(2*time.Millisecond).Format(timeLayout)))
	}
	host, _ := json.Marshal(hostname())
	o.stdout = strings.Replace(o.stdout, `"stdout": `+string(host)+",", `"stdout": "vm",`, 1)
	o.stderr = strings.Replace(o.stderr, fmt.Sprintf("(pid=%d)", c.pid), fmt.Sprintf("(pid=%d)", fixed.pid), 1)
	return o
}

// hostname is what main gives the Go floor.
func hostname() string {
	host, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return host
}

// same runs argv with stdin through both floors and requires the same
// answer, and for ssh the same stdin read. The Go floor gets the C one's
// pid and module start time, and this machine's hostname, as the C floor
// does; loc is the time zone both run in.
func same(t testing.TB, argv []string, stdin string) {
	t.Helper()
	sameIn(t, argv, stdin, nil, time.Local)
}

func sameIn(t testing.TB, argv []string, stdin string, cEnv []string, loc *time.Location) {
	t.Helper()
	c := runC(t, argv, stdin, cEnv)
	e := env{hostname: hostname(), localUser: testUser, pid: c.pid, now: time.Now}
	if start, ok := c.start(t, loc); ok {
		e.now = func() time.Time { return start }
	}
	in := strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	goOut := outcome{exit: run(argv, in, &stdout, &stderr, e)}
	goOut.stdout, goOut.stderr = stdout.String(), stderr.String()
	if c.outcome != goOut {
		t.Errorf("argv %q, stdin %q:\n   go: exit %d, stdout %q, stderr %q\n    c: exit %d, stdout %q, stderr %q",
			argv, abbrev(stdin), goOut.exit, abbrev(goOut.stdout), goOut.stderr, c.exit, abbrev(c.stdout), c.stderr)
	}
	if filepath.Base(argv[0]) == "ssh" && c.consumed != len(stdin)-in.Len() {
		t.Errorf("argv %q: the C floor read %d bytes of stdin, the Go one %d", argv, c.consumed, len(stdin)-in.Len())
	}
}

func abbrev(s string) string {
	if len(s) > 400 {
		return s[:200] + fmt.Sprintf("…(%d bytes)…", len(s)-400) + s[len(s)-200:]
	}
	return s
}

// TestSameCases runs TestRun's cases through both floors, with the C
// floor's own hostname, pid and times.
func TestSameCases(t *testing.T) {
	for _, tc := range runCases {
		t.Run(tc.name, func(t *testing.T) { same(t, tc.argv, tc.stdin) })
	}
}

// TestSameTimeZones checks the module times in other time zones.
func TestSameTimeZones(t *testing.T) {
	argv := sshCall("127.0.0.1", "/bin/sh -c '/usr/bin/python3 && sleep 0'")
	for _, tz := range []string{"UTC", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "Pacific/Chatham"} {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			t.Logf("skipping %s: %v", tz, err)
			continue
		}
		t.Run(tz, func(t *testing.T) {
			saved := time.Local
			time.Local = loc
			defer func() { time.Local = saved }()
			sameIn(t, argv, wrapper, []string{"USER=" + testUser, "TZ=" + tz}, loc)
		})
	}
}

// wrappers are the AnsiballZ wrappers of interp/ansiballz's tests: every
// format from ansible-core 2.14 to 2.22.
var wrappers = sync.OnceValues(func() ([]string, error) {
	paths, err := filepath.Glob("../../interp/ansiballz/testdata/*.py.gz")
	if err != nil {
		return nil, err
	}
	more, err := filepath.Glob("../../interp/ansiballz/testdata/recorded/*/piped-*.py.gz")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range append(paths, more...) {
		b, err := gunzip(p)
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	if len(out) == 0 {
		return nil, errors.New("no wrappers in ../../interp/ansiballz/testdata")
	}
	return out, nil
})

func gunzip(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func mustWrappers(t testing.TB) []string {
	t.Helper()
	w, err := wrappers()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// referenceCalls reads the calls of testdata/*/calls-*.log: one call a
// line, the program and then each argv element in [...], as captured from
// stock Ansible (testdata/README.md).
func referenceCalls(t testing.TB) map[string][][]string {
	t.Helper()
	logs, err := filepath.Glob("testdata/*/calls-*.log")
	if err != nil || len(logs) == 0 {
		t.Fatalf("no testdata/*/calls-*.log: %v", err)
	}
	calls := map[string][][]string{}
	for _, log := range logs {
		fh, err := os.Open(log)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			prog, rest, ok := strings.Cut(sc.Text(), " [")
			if !ok || !strings.HasSuffix(rest, "]") {
				t.Fatalf("%s: bad line %q", log, sc.Text())
			}
			argv := append([]string{prog}, strings.Split(strings.TrimSuffix(rest, "]"), "] [")...)
			calls[log] = append(calls[log], argv)
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return calls
}

// TestSameReference runs every call stock Ansible made in testdata
// through both floors: sftp with what Ansible writes to sftp -b -, ssh
// with no stdin, and with a password line and each wrapper.
func TestSameReference(t *testing.T) {
	t.Parallel()
	ws := mustWrappers(t)
	n := 0
	for log, calls := range referenceCalls(t) {
		batch, err := os.ReadFile(filepath.Join(filepath.Dir(log), "sftp-batch-stdin.txt"))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(filepath.Dir(log))+"/"+filepath.Base(log), func(t *testing.T) {
			for _, argv := range calls {
				switch argv[0] {
				case "sftp":
					same(t, argv, string(batch))
				case "ssh":
					same(t, argv, "")
					same(t, argv, "secret\n"+ws[n%len(ws)])
					n++
				default:
					same(t, argv, "")
				}
			}
		})
	}
}

// becomeCommands are the become wrappers of bridge/become's tests,
// generated by stock Ansible for each become method and option
// (bridge/become/testdata/gen), refused ones included.
func becomeCommands(t testing.TB) []string {
	t.Helper()
	fh, err := os.Open("../../bridge/become/testdata/generated.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var cmds []string
	dec := json.NewDecoder(fh)
	for {
		var rec struct{ Cmd string }
		if err := dec.Decode(&rec); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, rec.Cmd)
	}
	return cmds
}

// TestSameBecome runs every become wrapper through both floors, with and
// without -tt.
func TestSameBecome(t *testing.T) {
	t.Parallel()
	ws := mustWrappers(t)
	for i, cmd := range becomeCommands(t) {
		stdin := "secret\n" + ws[i%len(ws)]
		same(t, sshCall("127.0.0.1", cmd), stdin)
		same(t, sshCall("-tt", "127.0.0.1", cmd), stdin)
	}
}

// TestSameMutated runs calls changed at random through both floors: the
// refusals, the odd quoting and the non-ASCII text must come out the same.
func TestSameMutated(t *testing.T) {
	t.Parallel()
	n := 2000
	if testing.Short() {
		n = 300
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seeds := mutationSeeds(t)
	ws := mustWrappers(t)
	for i := 0; i < n; i++ {
		s := seeds[rng.IntN(len(seeds))]
		argv := append([]string(nil), s.argv...)
		stdin := s.stdin
		for k := 1 + rng.IntN(3); k > 0; k-- {
			switch rng.IntN(10) {
			case 0, 1, 2, 3: // the last word: the remote command, or the destination
				argv[len(argv)-1] = mutate(rng, argv[len(argv)-1])
			case 4: // any word
				j := rng.IntN(len(argv))
				argv[j] = mutate(rng, argv[j])
			case 5: // an option
				j := 1 + rng.IntN(len(argv))
				opt := options[rng.IntN(len(options))]
				argv = append(argv[:j], append(strings.Fields(opt), argv[j:]...)...)
			case 6: // another program
				argv[0] = programs[rng.IntN(len(programs))]
			case 7: // the stdin: a wrapper, changed line by line, or batch lines
				if rng.IntN(2) == 0 {
					stdin = mutateLines(rng, "secret\n"+ws[rng.IntN(len(ws))])
				} else {
					stdin = mutateLines(rng, s.stdin+"put a b\n"+tokens[rng.IntN(len(tokens))]+"\n")
				}
			default:
				argv[len(argv)-1] = mutate(rng, mutate(rng, argv[len(argv)-1]))
			}
		}
		for j := range argv {
			argv[j] = strings.ReplaceAll(argv[j], "\x00", "") // not in an argv
		}
		same(t, argv, stdin)
		if t.Failed() {
			break
		}
	}
}

type seed struct {
	argv  []string
	stdin string
}

func mutationSeeds(t testing.TB) []seed {
	var seeds []seed
	for _, tc := range runCases {
		seeds = append(seeds, seed{tc.argv, tc.stdin})
	}
	for _, calls := range referenceCalls(t) {
		for _, argv := range calls {
			seeds = append(seeds, seed{argv, ""})
		}
	}
	for _, cmd := range becomeCommands(t) {
		seeds = append(seeds, seed{sshCall("127.0.0.1", cmd), "pw\n" + pingWrap})
	}
	return seeds
}

// tokens are what mutate inserts: the text the floors look for, quoting,
// white space (Unicode's too), what JSON and %q escape, invalid UTF-8.
var tokens = []string{
	"'", `"`, `\`, " ", "\t", "\n", "\r", "\v", "\f", "$", "`", "%", "=", "-", "--", "-c", ":", "@", "#", ";",
	"&& sleep 0", " && sleep 0", " ; ", "'\"'\"'", "/bin/sh -c ", "/bin/bash -c ", "BECOME-SUCCESS-",
	"echo BECOME-SUCCESS-abcdefghijklmnopqrstuvwxyzabcdef ; ", "sudo -H -S -n -u root ", "sudo -S -p ", "su root -c ",
	"doas -u root ", "doas ", "-p \"[sudo via ansible, key=abcdefghijklmnopqrstuvwxyzabcdef] password:\" ",
	"--preserve-env=", "--user=x ", "-uroot ", "-- ", "- ", "-i -s ", "%u", "echo ~", "~root", "/usr/bin/python3",
	"/usr/bin/python3.11 ", "/x/AnsiballZ_ping.py", "AnsiballZ_", ".py", "chmod u+x ", "chmod u+rwx ", "rm -f -r ",
	"( umask 77 && mkdir ", " && echo ", "=\"` echo ", " `\" )", "put ", "get ", "-put ", "@put ",
	"<", ">", "&", "\x01", "\x7f", "é", "ſ", "K", "Ä", "İ", "\u00a0", "\u0085", "\u2028", "\u3000", "\u00ad",
	"\U0001F600", "\U000E0001", "\uFFFD", "\xff", "\xe2\x80", "\xed\xa0\x80", "\xc0\xaf", "\x00",
}

// options are what mutate adds to a command line.
var options = []string{
	"-tt", "-t", "-C", "-v", "-l root", "-lroot", "-o User=root", "-o User=\"ſ\"", "-oUSER=x", "-o uſer=ſ",
	"-o ControlPersist", "-o ControlPersist=", "-o Foo Bar", "-o Àb", "-o İ", "-o \xffA", "-o \u00a0", "-o ſ=",
	"-O check", "-O stop", "-O exit", "-O forward", "-Ocheck", "-p", "-b -", "-b /nonexistent", "-b", "--",
	"-", "-x -x",
}

var programs = []string{"ssh", "sftp", "scp", "/usr/bin/ssh", "ssh/", "", "/", "ansible-floor", "SSH", "ſsh"}

func mutate(rng *rand.Rand, s string) string {
	i := rng.IntN(len(s) + 1)
	switch rng.IntN(4) {
	case 0: // insert a token
		return s[:i] + tokens[rng.IntN(len(tokens))] + s[i:]
	case 1: // delete a span
		j := min(len(s), i+1+rng.IntN(8))
		return s[:i] + s[j:]
	case 2: // replace a byte
		if i == len(s) {
			return s
		}
		return s[:i] + string(rune(rng.IntN(256))) + s[i+1:]
	default: // duplicate a span
		j := min(len(s), i+rng.IntN(16))
		return s[:j] + s[i:j] + s[j:]
	}
}

// mutateLines drops, doubles, indents or dedents a line, or changes one.
func mutateLines(rng *rand.Rand, s string) string {
	lines := strings.SplitAfter(s, "\n")
	for k := 1 + rng.IntN(3); k > 0; k-- {
		i := rng.IntN(len(lines))
		switch rng.IntN(5) {
		case 0:
			lines = append(lines[:i], lines[i+1:]...)
		case 1:
			lines = append(lines[:i+1], lines[i:]...)
		case 2:
			lines[i] = "    " + lines[i]
		case 3:
			lines[i] = strings.TrimLeft(lines[i], " ")
		default:
			lines[i] = mutate(rng, lines[i])
		}
		if len(lines) == 0 {
			break
		}
	}
	return strings.Join(lines, "")
}
