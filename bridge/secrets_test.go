package bridge

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestDropTempWipes: a held dir Ansible removes leaves no copy of its
// files (a wrapper holds its task's arguments).
func TestDropTempWipes(t *testing.T) {
	var h housekeeping
	h.addTemp("/b", "/b/ansible-tmp-9")
	st, name := h.lookup("/b/ansible-tmp-9/AnsiballZ_command.py")
	if held, _, err := st.hold(name, strings.NewReader("args: nolog-marker"), -1, 0o600); !held || err != nil {
		t.Fatalf("hold: %v, %v", held, err)
	}
	f, _ := st.file(name)
	data := f.data
	h.dropTemp("/b/ansible-tmp-9")
	if bytes.Contains(data, []byte("nolog-marker")) {
		t.Errorf("held data after the dir was removed: %q", data)
	}
	if s, _ := h.lookup("/b/ansible-tmp-9/AnsiballZ_command.py"); s != nil {
		t.Error("dir still known")
	}
}

type secretsSeen struct{ got []string }

func (s *secretsSeen) AddSecret(b []byte) { s.got = append(s.got, string(b)) }

// TestStdinGateHandsOverPassword: the password line goes to the tool and
// the journal's redactor; lastLine hands it over and the gate keeps no
// copy, its read buffer neither.
func TestStdinGateHandsOverPassword(t *testing.T) {
	shimR, shimW := io.Pipe()
	toolR, toolW := io.Pipe()
	seen := &secretsSeen{}
	g := newStdinGate(shimR, toolW, seen, nil)
	go func() { _, _ = shimW.Write([]byte("pass-w0rd\r\n")) }()
	line := make([]byte, 64)
	n, _ := io.ReadAtLeast(toolR, line, len("pass-w0rd\r\n"))
	tool := string(line[:n])
	rest := g.stop()
	go func() {
		_, _ = shimW.Write([]byte("module"))
		shimW.Close()
	}()
	after, _ := io.ReadAll(rest)
	if string(after) != "module" || tool != "pass-w0rd\r\n" {
		t.Fatalf("after the marker %q, to the tool %q", after, tool)
	}
	if len(seen.got) != 1 || seen.got[0] != "pass-w0rd" {
		t.Errorf("secrets registered: %q", seen.got)
	}
	pw := g.lastLine()
	if string(pw) != "pass-w0rd" {
		t.Fatalf("lastLine = %q", pw)
	}
	if again := g.lastLine(); again != nil {
		t.Errorf("the gate kept the password: %q", again)
	}
}

// TestPasswordHashOverwritten: a reservation keeps only the hash, and
// overwrites the password it was given.
func TestPasswordHashOverwritten(t *testing.T) {
	pw := []byte("s3cret-pw")
	h := newPasswordHash(pw)
	if !h.matches([]byte("s3cret-pw")) || h.matches([]byte("other")) {
		t.Fatal("hash does not tell the password")
	}
	r := &agentReservation{key: slotKey{python: "k"}, slot: &agentSlot{ready: make(chan struct{})}}
	var tg target
	tg.agents.slots = map[slotKey]*agentSlot{}
	r.done(&tg, nil, pw, nil)
	if !bytes.Equal(pw, make([]byte, len(pw))) {
		t.Errorf("password not overwritten: %q", pw)
	}
}

// TestWrongPasswordWiped: a become password that does not match goes to
// the tool, and the buffer that held it is overwritten once read.
func TestWrongPasswordWiped(t *testing.T) {
	answer := []byte("wrong-pass\n")
	got, err := io.ReadAll(io.MultiReader(&wipingReader{b: answer}, strings.NewReader("module")))
	if err != nil || string(got) != "wrong-pass\nmodule" {
		t.Fatalf("read %q, %v", got, err)
	}
	if bytes.Contains(answer, []byte("wrong")) {
		t.Errorf("the answer is still in its buffer: %q", answer)
	}
}
