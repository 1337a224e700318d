package bridge

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/pkg/sftp"
)

// sftpPair returns a client talking to an in-process SFTP server on the
// local file system.
func sftpPair(t *testing.T) *sftp.Client {
	t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	sc, err := sftp.NewClientPipe(cr, cw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Both ends' reads must end for Close to return.
		cw.Close()
		sw.Close()
		sc.Close()
	})
	return sc
}

// modeProbe is a reader that, when the upload's first byte is read,
// records every file under dir but dst with its mode and whether it sits
// in a directory only its owner can enter.
type modeProbe struct {
	t        *testing.T
	dir, dst string
	data     io.Reader
	seen     []string // "path mode private"
	probed   bool
}

func (p *modeProbe) Read(b []byte) (int, error) {
	if !p.probed {
		p.probed = true
		_ = filepath.WalkDir(p.dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || path == p.dst {
				return err
			}
			fi, _ := os.Stat(path)
			parent, _ := os.Stat(filepath.Dir(path))
			private := parent.Mode().Perm()&0o077 == 0
			p.seen = append(p.seen, fi.Mode().Perm().String()+" "+map[bool]string{true: "private", false: "open"}[private])
			return nil
		})
	}
	return p.data.Read(b)
}

// TestPutAtomicNeverWider: while the content is written, the file is
// no wider than its final mode, or sits where no one else can reach it.
func TestPutAtomicNeverWider(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	sc := sftpPair(t)
	for _, tc := range []struct {
		name     string
		dirMode  fs.FileMode
		existing fs.FileMode // 0: dst is new
		mode     fs.FileMode // asked for
		final    fs.FileMode
		while    string // what the probe must see while writing
	}{
		{"private dir, 0600 upload", 0o700, 0, 0o600, 0o600, "-rw------- private"},
		{"open dir, new file as dd makes it", 0o755, 0, 0o666, 0o644, "-rw-r--r-- open"},
		{"open dir, existing 0600 file", 0o755, 0o600, 0o666, 0o600, "-rw------- private"},
		{"open dir, 0600 upload", 0o755, 0, 0o600, 0o600, "-rw------- private"},
		{"open dir, 0755 upload", 0o755, 0, 0o755, 0o755, "-rw-r--r-- open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if err := os.Mkdir(dir, tc.dirMode); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, "f")
			if tc.existing != 0 {
				if err := os.WriteFile(dst, []byte("old"), tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			content := []byte(strings.Repeat("secret ", 1000))
			probe := &modeProbe{t: t, dir: dir, dst: dst, data: bytes.NewReader(content)}
			n, err := putAtomic(sc, dst, probe, tc.mode)
			if err != nil || n != int64(len(content)) {
				t.Fatalf("putAtomic: %d, %v", n, err)
			}
			if len(probe.seen) != 1 || probe.seen[0] != tc.while {
				t.Errorf("while writing: %q, want [%q]", probe.seen, tc.while)
			}
			fi, err := os.Stat(dst)
			if err != nil || fi.Mode().Perm() != tc.final {
				t.Errorf("final: %v, %v; want %v", fi.Mode(), err, tc.final)
			}
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, content) {
				t.Error("content differs")
			}
			if left, _ := os.ReadDir(dir); len(left) != 1 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

func TestReadAllOnce(t *testing.T) {
	for _, n := range []int{0, 1, 64 << 10, 64<<10 + 1, 200 << 10} {
		in := bytes.Repeat([]byte("x"), n)
		for _, hint := range []int{0, n, 2 * n} {
			got, err := readAllOnce(iotest.OneByteReader(bytes.NewReader(in)), hint)
			if err != nil || !bytes.Equal(got, in) {
				t.Errorf("%d bytes, hint %d: got %d, %v", n, hint, len(got), err)
			}
		}
	}
	if _, err := readAllOnce(io.MultiReader(strings.NewReader("a"), iotestErr{}), 0); err == nil {
		t.Error("a read error was lost")
	}
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, io.ErrClosedPipe }
