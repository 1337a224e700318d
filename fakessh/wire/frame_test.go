package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		typ     Type
		payload []byte
	}{
		{"empty", StdinEOF, nil},
		{"data", Stdout, []byte("hello\r\n")},
		{"exit", Exit, ExitPayload(255)},
		{"max", Stdin, bytes.Repeat([]byte{'x'}, MaxPayload)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, tt.typ, tt.payload); err != nil {
				t.Fatal(err)
			}
			f, err := Read(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if f.Type != tt.typ || !bytes.Equal(f.Payload, tt.payload) {
				t.Fatalf("got %c %q", f.Type, f.Payload)
			}
			if _, err := Read(&buf); err != io.EOF {
				t.Fatalf("want EOF at boundary, got %v", err)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"short header", []byte{'o', 0, 0}, io.ErrUnexpectedEOF},
		{"short payload", []byte{'o', 0, 0, 0, 5, 'a'}, io.ErrUnexpectedEOF},
		{"too large", []byte{'o', 0xff, 0xff, 0xff, 0xff}, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	if err := Write(io.Discard, Stdin, make([]byte, MaxPayload+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized write: %v", err)
	}
}

func TestExitAndSize(t *testing.T) {
	for _, c := range []int{0, 1, 255, -1} {
		got, err := ExitCode(ExitPayload(c))
		if err != nil || got != c {
			t.Fatalf("exit %d: got %d %v", c, got, err)
		}
	}
	if _, err := ExitCode([]byte{1}); err == nil {
		t.Fatal("short exit payload accepted")
	}
	r, c, err := Size(SizePayload(24, 80))
	if err != nil || r != 24 || c != 80 {
		t.Fatalf("size: %d %d %v", r, c, err)
	}
}

// FuzzRead checks the decoder never panics and that what it accepts
// re-encodes to the same bytes.
func FuzzRead(f *testing.F) {
	var seed bytes.Buffer
	_ = Write(&seed, Hello, []byte(`{"prog":"ssh"}`))
	_ = Write(&seed, Exit, ExitPayload(0))
	f.Add(seed.Bytes())
	f.Add([]byte{'o', 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var out bytes.Buffer
		for {
			fr, err := Read(r)
			if err != nil {
				break
			}
			if len(fr.Payload) > MaxPayload {
				t.Fatalf("payload %d beyond limit", len(fr.Payload))
			}
			if err := Write(&out, fr.Type, fr.Payload); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.HasPrefix(data, out.Bytes()) {
			t.Fatal("re-encoding differs from input prefix")
		}
	})
}
