package wire

import (
	"fmt"
	"os"
	"path/filepath"
)

// SocketEnv overrides the daemon socket path.
const SocketEnv = "ANSIBLE_BRIDGE_SOCKET"

// SocketPath returns the daemon socket path: $ANSIBLE_BRIDGE_SOCKET, else
// $XDG_RUNTIME_DIR/ansible-bridge/bridge.sock, else
// /tmp/ansible-bridge-UID/bridge.sock.
func SocketPath() string {
	if p := os.Getenv(SocketEnv); p != "" {
		return p
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "ansible-bridge", "bridge.sock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("ansible-bridge-%d", os.Getuid()), "bridge.sock")
}
