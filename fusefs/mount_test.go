package fusefs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ansible-bridge/ansible-bridge/bridge/journal"
)

// testMount mounts src on a fresh directory, unmounted when the test
// ends; it skips the test where FUSE is unavailable.
func testMount(t *testing.T, src Source) (*Mounted, string) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no FUSE: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Mount(ctx, dir, src, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return m, dir
}

func TestMount(t *testing.T) {
	src := newSource(t)
	m, dir := testMount(t, src)
	if m.Dir() != dir {
		t.Errorf("Dir() = %s, want %s", m.Dir(), dir)
	}

	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var top []string
	for _, e := range ents {
		top = append(top, e.Name())
	}
	if got := strings.Join(top, " "); got != "journal status targets" {
		t.Errorf("ls: %s", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err != nil || !bytes.Equal(b, src.status) {
		t.Errorf("status: %q, %v", b, err)
	}
	if dest, err := os.Readlink(filepath.Join(dir, "journal/latest")); err != nil || dest != "000003-passthrough" {
		t.Errorf("latest -> %q, %v", dest, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "journal/latest/stdout")); err != nil || string(b) != "partial" {
		t.Errorf("latest/stdout: %q, %v", b, err)
	}

	// grep -r: walk everything, compare stat sizes with what reads
	// return, and find a string.
	var hits, files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if strings.HasSuffix(p, "/gone") {
			if err == nil {
				_, err = os.ReadFile(p)
			}
			if !os.IsNotExist(err) {
				t.Errorf("%s: %v, want ENOENT", rel, err)
			}
			return nil
		}
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			if info.Mode().Perm() != 0o500 {
				t.Errorf("%s: mode %v", rel, info.Mode())
			}
			return nil
		}
		if !info.Mode().IsRegular() {
			return nil // latest
		}
		files = append(files, rel)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// The running entry's files are live (its timing's total_ms
		// grows between the stat and the read); growth is checked below.
		live := strings.HasPrefix(rel, "journal/000003-passthrough/")
		if rel != "targets/alice@web1:22/tmp/"+tmp2Name+"/args" && !live && info.Size() != int64(len(b)) {
			t.Errorf("%s: stat size %d, read %d bytes", rel, info.Size(), len(b))
		}
		if perm := info.Mode().Perm(); perm != 0o400 && !(perm == 0o500 && strings.HasSuffix(rel, ".py")) {
			t.Errorf("%s: mode %v", rel, info.Mode())
		}
		if st := info.Sys().(*syscall.Stat_t); st.Uid != uint32(os.Geteuid()) {
			t.Errorf("%s: uid %d", rel, st.Uid)
		}
		if bytes.Contains(b, []byte("hello")) {
			hits = append(hits, rel)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s shows the secret", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(hits)
	want := []string{
		"journal/000001-module/stdout",
		"journal/000002-exec/argv",
		"journal/000002-exec/stdout",
		"targets/alice@web1:22/tmp/" + tmp2Name + "/args",
	}
	if strings.Join(hits, "\n") != strings.Join(want, "\n") {
		t.Errorf("grep -r hello:\n%s\nwant\n%s", strings.Join(hits, "\n"), strings.Join(want, "\n"))
	}
	if len(files) < 25 {
		t.Errorf("only %d files: %v", len(files), files)
	}

	// Read-only.
	for _, err := range []error{
		os.WriteFile(filepath.Join(dir, "status"), []byte("x"), 0o600),
		os.WriteFile(filepath.Join(dir, "new"), []byte("x"), 0o600),
		os.Mkdir(filepath.Join(dir, "journal/x"), 0o700),
		os.Remove(filepath.Join(dir, "status")),
		os.Chmod(filepath.Join(dir, "status"), 0o600),
	} {
		if errnoOf(err) != syscall.EROFS {
			t.Errorf("write: %v, want EROFS", err)
		}
	}
	if m2, err := Mount(context.Background(), dir, src, testLogger(t)); err == nil {
		m2.Unmount()
		t.Error("mounted twice on one dir")
	} else if !strings.Contains(err.Error(), "already mounted") {
		t.Errorf("second mount: %v", err)
	}
}

func TestMountDynamic(t *testing.T) {
	src := newSource(t)
	_, dir := testMount(t, src)
	stdout := filepath.Join(dir, "journal/000003-passthrough/stdout")

	// The running entry grows after a stat: the read still gets it all.
	if st, err := os.Stat(stdout); err != nil || st.Size() != int64(len("partial")) {
		t.Fatalf("stat: %v, %v", st, err)
	}
	src.running.AppendStdout([]byte(" and more"))
	if b, err := os.ReadFile(stdout); err != nil || string(b) != "partial and more" {
		t.Errorf("read %q, %v", b, err)
	}

	// New entries show at once, with secrets added later masked.
	e := src.j.Begin(tgt, "sftp", []string{"sftp", "-b", "-", "web1"})
	e.AppendStdin([]byte("put /tmp/x s3cr3t\n"))
	src.j.AddSecret([]byte("s3cr3t"))
	ents, err := os.ReadDir(filepath.Join(dir, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	if last := ents[len(ents)-2].Name(); last != "000004-sftp" {
		t.Errorf("newest entry %s", last)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "journal/latest/stdin")); err != nil || string(b) != "put /tmp/x "+journal.Mask+"\n" {
		t.Errorf("stdin %q, %v", b, err)
	}
}

// TestStaleMount mounts in a child process, kills it, and mounts again
// on the same directory.
func TestStaleMount(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no FUSE: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	cmd := exec.Command(os.Args[0], "-test.run=^TestMountHelperProcess$")
	cmd.Env = append(os.Environ(), "FUSEFS_HELPER_MOUNT="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "mounted" {
		t.Log("helper:", sc.Text())
	}
	if sc.Err() != nil || sc.Text() != "mounted" {
		t.Fatalf("helper did not mount: %v", sc.Err())
	}
	if _, err := os.Stat(filepath.Join(dir, "status")); err != nil {
		t.Fatalf("helper's mount: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != syscall.ENOTCONN {
		t.Fatalf("after the kill, statfs gives %v, want ENOTCONN", err)
	}

	m, err := Mount(context.Background(), dir, newSource(t), testLogger(t))
	if err != nil {
		t.Fatalf("mount over a stale mount: %v", err)
	}
	defer func() {
		if err := m.Unmount(); err != nil {
			t.Error(err)
		}
		if _, ok := fuseMountAt(dir); ok {
			t.Error("still mounted after Unmount")
		}
	}()
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err != nil || !strings.Contains(string(b), `"pid": 42`) {
		t.Errorf("status after remount: %q, %v", b, err)
	}
}

// TestMountHelperProcess is TestStaleMount's child: it mounts, says so,
// and waits to be killed.
func TestMountHelperProcess(t *testing.T) {
	dir := os.Getenv("FUSEFS_HELPER_MOUNT")
	if dir == "" {
		t.Skip("helper process of TestStaleMount")
	}
	if _, err := Mount(context.Background(), dir, newSource(t), testLogger(t)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("mounted")
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	<-c
	os.Exit(1)
}

func TestAvailableMissingDevice(t *testing.T) {
	old := devFuse
	t.Cleanup(func() { devFuse = old })
	devFuse = filepath.Join(t.TempDir(), "fuse")
	err := Available()
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "no "+devFuse) {
		t.Errorf("Available() = %v", err)
	}
	if _, err := Mount(context.Background(), t.TempDir(), &memSource{}, testLogger(t)); err == nil || !strings.Contains(err.Error(), "no "+devFuse) {
		t.Errorf("Mount() = %v", err)
	}
	os.WriteFile(devFuse, nil, 0o600)
	if err := Available(); err == nil || !strings.Contains(err.Error(), "not a character device") {
		t.Errorf("Available() = %v", err)
	}
}

// TestMountOptions checks what mount(8) would show.
func TestMountOptions(t *testing.T) {
	_, dir := testMount(t, newSource(t))
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if point, fstype, ok := parseMountinfo(line); !ok || point != dir {
			continue
		} else if fstype != "fuse.ansible-bridge" {
			t.Errorf("type %s", fstype)
		}
		f := strings.Fields(line)
		opts := "," + f[5] + ","
		for _, o := range []string{"ro", "nosuid", "nodev"} {
			if !strings.Contains(opts, ","+o+",") {
				t.Errorf("mount options %s lack %s", f[5], o)
			}
		}
		return
	}
	t.Errorf("%s not in mountinfo", dir)
}

// TestUnmountBusy unmounts while a file is open: the mount is detached
// at once, and the open file stays readable until closed.
func TestUnmountBusy(t *testing.T) {
	m, dir := testMount(t, newSource(t))
	f, err := os.Open(filepath.Join(dir, "status"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cwd, err := os.Open(filepath.Join(dir, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer cwd.Close()
	if err := m.Unmount(); err != nil {
		t.Fatalf("Unmount: %v", err)
	}
	if _, ok := fuseMountAt(dir); ok {
		t.Error("still mounted")
	}
	b := make([]byte, 100)
	if n, err := f.Read(b); err != nil || !strings.Contains(string(b[:n]), `"pid": 42`) {
		t.Errorf("read after detach: %q, %v", b[:n], err)
	}
	if err := m.Unmount(); err != nil {
		t.Errorf("second Unmount: %v", err)
	}
}
