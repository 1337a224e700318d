package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/journal"
	"github.com/sirupsen/logrus"
)

// memSource is a Source held in memory.
type memSource struct {
	j       *journal.Journal
	running *journal.Entry // newSource's last entry, still running

	mu        sync.Mutex
	status    []byte
	statusErr error
	targets   []Target
	tmp       map[string][]TempDir
	remote    map[string][]byte // target + "\x00" + path
	remoteErr error

	remoteReads atomic.Int32
}

func (s *memSource) Status() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, s.statusErr
}

func (s *memSource) Journal() *journal.Journal { return s.j }

func (s *memSource) Targets() []Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Target(nil), s.targets...)
}

func (s *memSource) TempDirs(target string) []TempDir {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]TempDir(nil), s.tmp[target]...)
}

func (s *memSource) ReadRemote(ctx context.Context, target, path string) ([]byte, error) {
	s.remoteReads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.remoteErr != nil {
		return nil, s.remoteErr
	}
	b, ok := s.remote[target+"\x00"+path]
	if !ok {
		return nil, fmt.Errorf("read %s on %s: %w", path, target, fs.ErrNotExist)
	}
	return b, nil
}

func (s *memSource) set(f func(s *memSource)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

const (
	tgt      = "alice@web1:22"
	tgtRoot  = "alice@web1:22/become-root" // a name with a '/'
	tmpName  = "ansible-tmp-1700000000.1-123-456"
	tmpPath  = "/home/alice/.ansible/tmp/" + tmpName
	tmp2Name = "ansible-tmp-1700000001.2-124-457"
	tmp2Path = "/home/alice/.ansible/tmp/" + tmp2Name
	secret   = "hunter2"
)

var mtime = time.Date(2025, 11, 21, 12, 0, 0, 0, time.UTC)

// wrapper is a real AnsiballZ wrapper (see package journal's testdata).
func wrapper(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../bridge/journal/testdata/AnsiballZ_ping.py")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newSource returns a source with three journal entries (a finished
// module run with a wrapper on stdin, a finished exec, a running exec),
// two targets, a held temp dir and one on the target.
func newSource(t *testing.T) *memSource {
	t.Helper()
	j := journal.New(5)
	j.AddSecret([]byte(secret))

	e := j.Begin(tgt, "module", []string{"ssh", "-C", "web1", "/bin/sh -c '/usr/bin/python3 && sleep 0'"})
	e.AppendStdin(wrapper(t))
	e.MarkRemoteStart()
	e.AppendStdout([]byte(`{"ping": "pong", "hello": "from module"}` + "\n"))
	e.Finish(0)

	e = j.Begin(tgt, "exec", []string{"ssh", "web1", "echo hello " + secret})
	e.AppendStdout([]byte("hello " + secret + "\n"))
	e.AppendStderr([]byte("Shared connection to web1 closed.\r\n"))
	e.Finish(2)

	e = j.Begin(tgt, "passthrough", []string{"ssh", "-tt", "web1", "sleep 100"})
	e.AppendStdout([]byte("partial"))

	return &memSource{
		j:       j,
		running: e,
		status:  []byte(`{"pid": 42, "targets": [{"target": "alice@web1:22"}]}` + "\n"),
		targets: []Target{{Name: tgt}, {Name: tgtRoot}},
		tmp: map[string][]TempDir{
			tgt: {
				{Name: tmpName, Path: tmpPath, Mtime: mtime, Files: []TempFile{
					{Name: "AnsiballZ_ping.py", Size: int64(len(wrapper(t))), Mode: 0o700, Mtime: mtime, Held: true, Data: wrapper(t)},
					{Name: "empty", Mode: 0o600, Mtime: mtime, Held: true},
				}},
				{Name: tmp2Name, Path: tmp2Path, OnTarget: true, Mtime: mtime, Files: []TempFile{
					{Name: "args", Size: 3, Mode: 0o600, Mtime: mtime}, // size is a guess
					{Name: "gone", Size: 10, Mode: 0o600, Mtime: mtime},
				}},
			},
		},
		remote: map[string][]byte{
			tgt + "\x00" + tmp2Path + "/args": []byte("hello=remote args\n"),
		},
	}
}

// testLogger sends logs to t.Log until the test ends.
func testLogger(t *testing.T) logrus.FieldLogger {
	t.Helper()
	l := logrus.New()
	w := &tWriter{t: t}
	t.Cleanup(func() { w.off.Store(true) })
	l.SetOutput(w)
	l.SetLevel(logrus.DebugLevel)
	return l
}

type tWriter struct {
	t   *testing.T
	off atomic.Bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	if !w.off.Load() {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// errnoOf returns the syscall.Errno in err, or 0.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	errors.As(err, &e)
	return e
}

var (
	_ io.Writer = (*tWriter)(nil)
	_ Source    = (*memSource)(nil)
)
