package interp

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestBufSinkOverwrites: a module's output is copied once into the
// result; the frame payloads it came in are overwritten.
func TestBufSinkOverwrites(t *testing.T) {
	var s bufSink
	p1, p2 := []byte("nolog-"), []byte("marker")
	s.write(p1)
	s.write(p2)
	if got := s.bytes(); string(got) != "nolog-marker" {
		t.Fatalf("bytes = %q", got)
	}
	if bytes.Contains(append(p1, p2...), []byte("nolog")) || bytes.Contains(s.buf.Bytes(), []byte("marker")) {
		t.Errorf("copies left: %q %q, sink %q", p1, p2, s.buf.Bytes())
	}
}

// TestClientWipe: a dead client overwrites its zips' base templates and
// its read buffer.
func TestClientWipe(t *testing.T) {
	base := []byte("ANSIBALLZ_PARAMS = 'nolog-marker'")
	c := &Client{zips: map[[32]byte]*zipState{{1}: {base: base}}}
	rec := &recordingReader{r: strings.NewReader("result: nolog-marker\n")}
	c.br = bufio.NewReaderSize(rec, 64)
	if _, err := c.br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(rec.buf, []byte("nolog")) {
		t.Fatalf("the recorder did not see bufio's buffer: %q", rec.buf)
	}
	c.wipe()
	if bytes.Contains(base, []byte("nolog")) {
		t.Errorf("template left: %q", base)
	}
	if bytes.Contains(rec.buf, []byte("nolog")) {
		t.Errorf("read buffer left: %q", rec.buf)
	}
}

// recordingReader keeps the whole of the last buffer it was asked to
// fill: bufio.Reader's own.
type recordingReader struct {
	r   io.Reader
	buf []byte
}

func (r *recordingReader) Read(p []byte) (int, error) {
	r.buf = p[:cap(p)]
	return r.r.Read(p)
}
