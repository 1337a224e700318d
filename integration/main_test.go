package integration

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/internal/cbuild"
)

// labConfig is the loopback lab, as printed by `scripts/lab.sh env`.
type labConfig struct {
	Dir      string // AB_LAB
	Port     string // AB_PORT
	Key      string // AB_KEY: authorized for both users
	WrongKey string // AB_WRONG_KEY: authorized for no one
	User     string // AB_USER: NOPASSWD sudo
	PWUser   string // AB_PWUSER: sudo needs AB_PASSWORD
	Password string // AB_PASSWORD
	NoPyUser string // AB_NOPYUSER: chrooted by sshd into a tree without python
}

// suiteState is set up once by TestMain and shared by every test.
type suiteState struct {
	skip string // non-empty: why every integration test skips
	lab  labConfig

	// compareStock makes the "bridge" side of each comparison another stock
	// run (AB_COMPARE=stock): it calibrates normalization and needs no binary.
	compareStock bool

	work      string            // private work directory
	home      string            // HOME for ansible-playbook
	data      string            // generated input files (big.bin, ...)
	local     string            // controller-side output directory, emptied per run
	corpus    string            // absolute path of corpus/
	targetOut map[string]string // lab user -> output directory on the target

	bin       string // the built ansible-bridge
	shims     string // directory holding ssh, scp, sftp shims
	socket    string // ANSIBLE_BRIDGE_SOCKET
	daemonLog string // ANSIBLE_BRIDGE_LOG
	buildErr  error  // why the binary or the shims are unusable

	realSSH  string // /usr/bin/ssh
	basePATH string // PATH without the shims
	bigSHA   string // sha256 of data/big.bin
}

var suite suiteState

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	suite.skip = prerequisites()
	if suite.skip != "" {
		return m.Run()
	}
	// The target's output directories are fixed paths: two suites at once
	// would clear each other's files.
	unlock, err := lockLab()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer unlock()
	work, err := os.MkdirTemp("", "abi-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	suite.work = work
	if err := setupSuite(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: setup:", err)
		return 1
	}
	code := m.Run()
	stopDaemon()
	// CI shows only the head and tail of a long -v log: repeat what failed
	// at the end, and keep the runs' files for whoever looks next.
	if code != 0 || os.Getenv("AB_KEEP") != "" {
		printFailedRuns(os.Stderr)
		fmt.Fprintln(os.Stderr, "integration: keeping work directory", work)
	} else {
		os.RemoveAll(work)
	}
	return code
}

// failedRuns lists, for the summary printed after the suite, the playbook
// runs of the tests that failed.
var failedRuns struct {
	sync.Mutex
	lines []string
}

// noteRunOnFailure adds r to the end-of-suite summary if t fails.
func noteRunOnFailure(t *testing.T, r *runResult) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		failedRuns.Lock()
		defer failedRuns.Unlock()
		failedRuns.lines = append(failedRuns.lines, fmt.Sprintf("--- FAIL: %s: %s run of %s: exit %d (%s); stdout ends:\n%s",
			t.Name(), r.Spec.Side, r.Spec.Playbook, r.ExitCode, r.Dir, indent(tail(r.Stdout, 25), "    ")))
	})
}

func printFailedRuns(w io.Writer) {
	failedRuns.Lock()
	defer failedRuns.Unlock()
	if len(failedRuns.lines) == 0 {
		return
	}
	fmt.Fprintln(w, "integration: failed playbook comparisons (full output above):")
	for _, l := range failedRuns.lines {
		fmt.Fprintln(w, l)
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// lockLab takes exclusive locks on the lab, waiting for any other
// integration run to finish: the lab's own (scripts/lab.sh down waits for
// it), and a machine-wide one, since the lab's users and their homes are
// shared by every lab on the machine whatever its port.
func lockLab() (func(), error) {
	var held []*os.File
	unlock := func() {
		for _, f := range held {
			f.Close()
		}
	}
	for _, p := range []string{"/run/ab-lab-integration.lock", filepath.Join(suite.lab.Dir, "integration.lock")} {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			unlock()
			return nil, fmt.Errorf("lab lock: %w", err)
		}
		held = append(held, f)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			fmt.Fprintf(os.Stderr, "integration: waiting for another run holding %s\n", p)
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
				unlock()
				return nil, fmt.Errorf("lab lock: %w", err)
			}
		}
	}
	return unlock, nil
}

// prerequisites returns why the integration tests cannot run here, or "".
func prerequisites() string {
	if os.Getenv("AB_LAB") == "" {
		return "AB_LAB is not set: run `scripts/lab.sh up` and `eval \"$(scripts/lab.sh env)\"` (or `make test`)"
	}
	for _, p := range []string{"ansible-playbook", "/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/scp", "/usr/bin/sftp"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Sprintf("%s not found: run scripts/setup.sh", p)
		}
	}
	if os.Geteuid() != 0 {
		return "not root: the tests read and clear the target's files directly (the target is this machine)"
	}
	env := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	suite.lab = labConfig{
		Dir:      os.Getenv("AB_LAB"),
		Port:     env("AB_PORT", "2222"),
		Key:      env("AB_KEY", filepath.Join(os.Getenv("AB_LAB"), "id_ed25519")),
		WrongKey: env("AB_WRONG_KEY", filepath.Join(os.Getenv("AB_LAB"), "wrong_ed25519")),
		User:     env("AB_USER", "abtest"),
		PWUser:   env("AB_PWUSER", "abpw"),
		Password: os.Getenv("AB_PASSWORD"),
		NoPyUser: env("AB_NOPYUSER", "abnopy"),
	}
	if suite.lab.Password == "" {
		return "AB_PASSWORD is not set: eval \"$(scripts/lab.sh env)\""
	}
	// Results are for this ansible-core (make test ANSIBLE=… puts another
	// version first on PATH): say which.
	if out, err := exec.Command("ansible-playbook", "--version").Output(); err == nil {
		fmt.Fprintf(os.Stderr, "integration: %s\n", strings.SplitN(string(out), "\n", 2)[0])
	}
	return ""
}

func setupSuite() error {
	s := &suite
	s.compareStock = os.Getenv("AB_COMPARE") == "stock"
	s.realSSH = "/usr/bin/ssh"
	s.basePATH = os.Getenv("PATH")

	corpus, err := filepath.Abs("corpus")
	if err != nil {
		return err
	}
	s.corpus = corpus
	s.home = filepath.Join(s.work, "home")
	s.data = filepath.Join(s.work, "data")
	s.local = filepath.Join(s.work, "local")
	for _, d := range []string{s.home, s.data, s.local} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// An empty config file, so that no ansible.cfg around us applies.
	if err := os.WriteFile(filepath.Join(s.work, "ansible.cfg"), nil, 0o644); err != nil {
		return err
	}

	s.targetOut = map[string]string{}
	for _, name := range []string{s.lab.User, s.lab.PWUser} {
		u, err := user.Lookup(name)
		if err != nil {
			return fmt.Errorf("lab user %s: %w (run scripts/lab.sh up)", name, err)
		}
		s.targetOut[name] = filepath.Join(u.HomeDir, "out")
	}
	if err := writeInputs(); err != nil {
		return err
	}
	if !s.compareStock {
		s.buildErr = buildBridge()
		if s.buildErr != nil {
			fmt.Fprintln(os.Stderr, "integration: bridge unusable, bridge runs will fail:", s.buildErr)
		}
	}
	return nil
}

// writeInputs generates the files the corpus copies: they are made here, not
// kept in git, so that odd names and binary content need no care in the repo.
func writeInputs() error {
	big := make([]byte, 5<<20)
	r := rand.New(rand.NewPCG(1, 2)) // fixed: same bytes every run
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	sum := sha256.Sum256(big)
	suite.bigSHA = fmt.Sprintf("%x", sum)
	files := map[string][]byte{
		"big.bin":      big,
		"one.bin":      {0x00},
		"ünï côdé.txt": []byte("ünï côdé\nzwei Zeilen\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(suite.data, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// buildBridge builds the module root into the work directory and installs
// the shims.
func buildBridge() error {
	s := &suite
	s.bin = filepath.Join(s.work, "ansible-bridge")
	s.shims = filepath.Join(s.work, "shims")
	sockDir := filepath.Join(s.work, "sock")
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		return err
	}
	s.socket = filepath.Join(sockDir, "bridge.sock")
	s.daemonLog = filepath.Join(s.work, "daemon.log")

	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = "/usr/local/go/bin/go"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, "build", "-ldflags=-s -w", "-o", s.bin, ".")
	build.Dir = ".."                                  // the module root
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the Makefile builds it
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	// The shim-only binary, as make build makes it.
	build = exec.CommandContext(ctx, goTool, "build", "-ldflags=-s -w", "-o", filepath.Join(filepath.Dir(s.bin), "ansible-bridge-shim"), "./fakessh/cmd/ansible-bridge-shim")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	// And the C front, which the shims link to and which hands what it
	// does not serve to the Go shim.
	if err := cbuild.Build(ctx, "..", cbuild.Front, filepath.Join(filepath.Dir(s.bin), fakessh.FrontBinary)); err != nil {
		return err
	}
	shims := exec.CommandContext(ctx, s.bin, "shims", s.shims)
	shims.Env = bridgeEnv(os.Environ())
	if out, err := shims.CombinedOutput(); err != nil {
		return fmt.Errorf("ansible-bridge shims: %w\n%s", err, out)
	}
	for _, p := range []string{"ssh", "scp", "sftp"} {
		if _, err := os.Stat(filepath.Join(s.shims, p)); err != nil {
			return fmt.Errorf("ansible-bridge shims made no %s: %w", p, err)
		}
	}
	return nil
}

// bridgeEnv sets the private daemon's socket and log in env.
func bridgeEnv(env []string) []string {
	return append(env,
		"ANSIBLE_BRIDGE_SOCKET="+suite.socket,
		"ANSIBLE_BRIDGE_LOG="+suite.daemonLog,
	)
}

func stopDaemon() {
	if suite.bin == "" || suite.buildErr != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.bin, "stop")
	cmd.Env = bridgeEnv(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: ansible-bridge stop: %v\n%s", err, out)
	}
}

// requireLab skips t when the suite cannot run here and fails it when the
// lab's sshd does not answer.
func requireLab(t *testing.T) {
	t.Helper()
	if suite.skip != "" {
		t.Skip(suite.skip)
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", suite.lab.Port), 5*time.Second)
	if err != nil {
		t.Fatalf("lab sshd on 127.0.0.1:%s: %v (run scripts/lab.sh up)", suite.lab.Port, err)
	}
	c.Close()
}

// requireBridge fails t when the binary could not be built; with
// AB_COMPARE=stock it does nothing.
func requireBridge(t *testing.T) {
	t.Helper()
	if suite.compareStock {
		return
	}
	if suite.buildErr != nil {
		t.Fatalf("bridge binary unusable: %v", suite.buildErr)
	}
	watchDaemonLog(t)
}

// watchDaemonLog logs what the daemon wrote during t if t fails.
func watchDaemonLog(t *testing.T) {
	t.Helper()
	start := fileSize(suite.daemonLog)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		b := readFrom(suite.daemonLog, start)
		const max = 64 << 10
		if len(b) > max {
			b = append([]byte("[...]\n"), b[len(b)-max:]...)
		}
		t.Logf("daemon log (%s) during this test:\n%s", suite.daemonLog, b)
	})
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the contents of path from offset on ("" if unreadable).
func readFrom(path string, offset int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	return b
}
