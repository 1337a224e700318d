package mux

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEscapes: the master's filter for a mux client's terminal session.
func TestEscapes(t *testing.T) {
	for _, tc := range []struct {
		name, in, sent, said string
	}{
		{"plain", "ls\r", "ls\r", ""},
		{"only after a newline", "a~?\r", "a~?\r", ""},
		{"help", "~?x", "x", escapeHelp('~')},
		{"doubled", "~~x", "~x", ""},
		{"unknown kept", "~x", "~x", ""},
		{"not for mux clients", "~\x1a~v\r~V~&\r~C", "\r\r", "~^Z escape not available to multiplexed sessions\r\n~v escape not available to multiplexed sessions\r\n~V escape not available to multiplexed sessions\r\n~& escape not available to multiplexed sessions\r\n~C escape not available to multiplexed sessions\r\n"},
		{"after a line", "a\n~?", "a\n", escapeHelp('~')},
	} {
		var said bytes.Buffer
		s := &session{errOut: &lockedWriter{w: &said}}
		sent, err := io.ReadAll(NewEscapeFilter(strings.NewReader(tc.in), '~', s))
		if err != nil || string(sent) != tc.sent || said.String() != tc.said {
			t.Errorf("%s: sent %q, said %q (%v); want %q, %q", tc.name, sent, said.String(), err, tc.sent, tc.said)
		}
	}
	if !strings.Contains(escapeHelp('~'), " ~.   - terminate session\r\n") || strings.Contains(escapeHelp('~'), "~C") {
		t.Errorf("help is not a mux client's:\n%s", escapeHelp('~'))
	}
}

// TestListen: the socket is put in place as ssh's master puts it.
func TestListen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cp")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(path)
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 || !l.At(path) {
		t.Fatalf("socket: %v %v", st, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the temporary name was left: %v", entries)
	}
	var exists *ExistsError
	if _, err := Listen(path); !errors.As(err, &exists) || err.Error() != "ControlSocket "+path+" already exists, disabling multiplexing" {
		t.Errorf("a second master: %v", err)
	}
	l.Close()
	if _, err := os.Lstat(path); err == nil || l.At(path) {
		t.Errorf("the socket outlived Close")
	}
	var fatal *FatalError
	if _, err := Listen(filepath.Join(dir, "no", "cp")); !errors.As(err, &fatal) || !strings.HasPrefix(err.Error(), "unix_listener: cannot bind to path "+dir+"/no/cp.") {
		t.Errorf("a missing directory: %v", err)
	}
	// Someone else's socket at the path is not removed by our Close.
	l2, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(path)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l2.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("Close removed what was not its socket: %v", err)
	}
}
