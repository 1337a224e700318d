package interp

import (
	"bytes"
	"errors"
	"testing"
)

// sizesWriter records the size of each write, and fails once failAt
// bytes have been written.
type sizesWriter struct {
	sizes  []int
	buf    bytes.Buffer
	failAt int
}

func (w *sizesWriter) Write(b []byte) (int, error) {
	w.sizes = append(w.sizes, len(b))
	if w.failAt > 0 && w.buf.Len()+len(b) > w.failAt {
		k := w.failAt - w.buf.Len()
		w.buf.Write(b[:k])
		return k, errors.New("channel closed")
	}
	return w.buf.Write(b)
}

// TestWriteChunked: an interpreter's channel gets no write larger than
// writeChunk (x/crypto keeps a buffer as large as the largest), all of
// the bytes in order, and a failed write's count.
func TestWriteChunked(t *testing.T) {
	src := bytes.Repeat([]byte("0123456789abcdef"), (2*writeChunk+100)/16)
	var w sizesWriter
	if n, err := WriteChunked(&w, src); n != len(src) || err != nil {
		t.Fatalf("wrote %d of %d: %v", n, len(src), err)
	}
	if !bytes.Equal(w.buf.Bytes(), src) {
		t.Error("bytes differ")
	}
	for _, n := range w.sizes {
		if n > writeChunk {
			t.Errorf("a write of %d bytes, want at most %d: %v", n, writeChunk, w.sizes)
		}
	}
	if len(w.sizes) != 3 {
		t.Errorf("writes %v, want 3", w.sizes)
	}
	f := sizesWriter{failAt: writeChunk + 5}
	if n, err := WriteChunked(&f, src); n != writeChunk+5 || err == nil {
		t.Errorf("failing channel: wrote %d, err %v; want %d and an error", n, err, writeChunk+5)
	}
}
