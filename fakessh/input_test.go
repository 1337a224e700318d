package fakessh

import (
	"os"
	"path/filepath"
	"testing"
)

func TestInputComplete(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString("put a b\n"); err != nil {
		t.Fatal(err)
	}
	if inputComplete(int(r.Fd())) {
		t.Error("a pipe with a writer still open counts as complete")
	}
	w.Close()
	if !inputComplete(int(r.Fd())) {
		t.Error("a pipe whose writer closed counts as incomplete")
	}

	f, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if inputComplete(int(f.Fd())) {
		t.Error("a regular file counts as complete (it may be large)")
	}

	tty, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	if inputComplete(int(tty.Fd())) {
		t.Error("a character device counts as complete")
	}
}
