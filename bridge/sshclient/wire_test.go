package sshclient

import (
	"testing"
)

// TestDialCountsWire: with Settings.Wire set, Dial counts the transport's
// bytes both ways, from the version exchange on; a command's output adds
// to what comes in.
func TestDialCountsWire(t *testing.T) {
	priv, pub := newEd25519(t)
	srv := startServer(t, withAuthKey(pub))
	env := testEnv(t)
	s := settingsFor(t, env, srv.port(), "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null",
		"IdentityFile="+writeKey(t, env.Home, "id", priv, ""))
	s.Wire = &WireCounter{}
	if _, err := run(t, s, &fakePrompter{}); err != nil {
		t.Fatalf("Dial: %v", err)
	}
	in, out := s.Wire.In.Load(), s.Wire.Out.Load()
	// Each side's version line alone ("SSH-2.0-...\r\n") is more than 8 bytes.
	if in <= int64(len("SSH-2.0-")) || out <= int64(len("SSH-2.0-")) {
		t.Errorf("wire in %d, out %d: the connection was not counted", in, out)
	}
}
