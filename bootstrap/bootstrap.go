package bootstrap

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ansible-bridge/ansible-bridge/interp"
	"github.com/sirupsen/logrus"
)

// ErrFailed wraps every error of Start: the target should stay on
// passthrough.
var ErrFailed = errors.New("bootstrap failed")

// DefaultTimeout bounds Start when ctx has no deadline.
const DefaultTimeout = 30 * time.Second

// stage1 reads a 4-byte big-endian length and that many bytes of zlib
// data from fd 0 (unbuffered, looping until the exact count), and runs the
// result as the agent. Python 3.6+ syntax only. On a terminal (a become
// agent started under a PTY) it first makes the terminal raw, sends
// stderr to /dev/null (it would mix with the frames) and prints
// RawMarker: the payload may go once that has been read.
const stage1 = `import os,zlib
if os.isatty(0):
 import tty;tty.setraw(0);os.dup2(os.open(os.devnull,os.O_WRONLY),2);os.write(1,b"` + RawMarker + `\n")
def r(n):
 b=b""
 while len(b)<n:
  c=os.read(0,n-len(b))
  if not c:raise SystemExit("ansible-bridge: stdin closed during bootstrap")
  b+=c
 return b
exec(compile(zlib.decompress(r(int.from_bytes(r(4),"big"))),"<ansible-bridge-agent>","exec"),{"__name__":"__ansible_bridge_agent__"})
`

// RawMarker is what the first stage prints once it has made its terminal
// raw (see Inline).
const RawMarker = "ANSIBLE-BRIDGE-RAW"

// Command returns the remote command line that starts the agent with
// python, which is what Ansible names: a path, or several words such as
// "/usr/bin/env FOO=bar python3", kept as given. The first stage travels
// base64-encoded, so the line holds no character a login shell (sh, bash,
// csh) would expand.
func Command(python string) string {
	return `/bin/sh -c '` + quoteInner(Inline(python)) + `'`
}

// Inline is the shell command that runs the first stage with python, for
// use inside another command (a become wrapper). On a terminal, the
// first stage prints RawMarker and a newline before it reads the payload.
// python's words follow as the agent's arguments: it watches what they
// name (a symlink repointed, a wrapper replaced), which stock's next
// step would run.
func Inline(python string) string {
	enc := base64.StdEncoding.EncodeToString([]byte(stage1))
	return python + ` -c 'import base64;exec(base64.b64decode("` + enc + `"))' ` + python
}

// quoteInner escapes single quotes for a single-quoted sh word. Not
// go-shellquote's Join, which escapes with backslashes: the line must
// mean the same to a csh login shell, which Join's output does not.
func quoteInner(s string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte("'"), []byte(`'"'"'`)))
}

var (
	payloadOnce sync.Once
	payload     []byte
)

// Payload is what goes to the agent's stdin right after Command starts: a
// 4-byte big-endian length and the zlib-compressed agent source.
func Payload() []byte {
	payloadOnce.Do(func() {
		var buf bytes.Buffer
		buf.Write([]byte{0, 0, 0, 0})
		zw, _ := zlib.NewWriterLevel(&buf, zlib.BestCompression)
		_, _ = zw.Write(interp.AgentSource)
		_ = zw.Close()
		b := buf.Bytes()
		binary.BigEndian.PutUint32(b[:4], uint32(len(b)-4))
		payload = b
	})
	return payload
}

// Runner starts a remote command: an SSH session in the bridge, os/exec in
// tests (see LocalRunner).
type Runner interface {
	// Start runs command and returns its stdin, stdout and stderr, and a
	// Wait that returns when the command has ended, or ends it when its
	// ctx ends first (see interp.Conn).
	Start(ctx context.Context, command string) (interp.Conn, error)
}

// Start runs the agent with python through r, sends it the payload and
// waits (bounded by ctx, or DefaultTimeout) for its hello. The error
// wraps ErrFailed and carries what the remote printed on stderr, such as
// "/bin/sh: 1: /usr/bin/python3: not found".
func Start(ctx context.Context, r Runner, python string, log logrus.FieldLogger) (*interp.Client, error) {
	log = log.WithField("python", python)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	conn, err := r.Start(ctx, Command(python))
	if err != nil {
		return nil, fmt.Errorf("%w: start %s: %w", ErrFailed, python, err)
	}
	c, err := Attach(ctx, conn, log)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", python, err)
	}
	return c, nil
}

// Attach sends the payload to a first stage already running on conn
// (started with Inline inside some other command, its raw marker read if
// on a terminal) and waits for the agent's hello.
func Attach(ctx context.Context, conn interp.Conn, log logrus.FieldLogger) (*interp.Client, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	stdin := conn.Stdin
	// Write in the background: a remote that never reads (no python) must
	// not block us; the hello wait below is what is bounded.
	werr := make(chan error, 1)
	go func() {
		_, err := interp.WriteChunked(stdin, Payload())
		werr <- err
	}()
	c, err := interp.NewClient(ctx, conn, log)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFailed, err)
	}
	if err := <-werr; err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w: write agent: %w", ErrFailed, err)
	}
	return c, nil
}
