package integration

import (
	"context"
	"net"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/integration/relay"
)

// startRelay puts a counting TCP relay in front of the lab's sshd.
func startRelay(t *testing.T) *relay.Relay {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := relay.Start(ctx, "127.0.0.1:0", net.JoinHostPort("127.0.0.1", suite.lab.Port), 0)
	if err != nil {
		cancel()
		t.Fatalf("relay: %v", err)
	}
	t.Cleanup(func() {
		r.Close()
		cancel()
	})
	return r
}

// viaRelay points host t at r.
func viaRelay(r *relay.Relay) map[string]map[string]any {
	return map[string]map[string]any{"t": {"ansible_host": "127.0.0.1", "ansible_port": r.Port()}}
}

// TestConnectionCount checks that a bridge run opens exactly one TCP
// connection to the target, and one more after a `meta: reset_connection`.
// Stock ssh with ControlPersist makes the same numbers, which the test also
// checks: it shows that the relay counts what the test thinks it counts.
func TestConnectionCount(t *testing.T) {
	requireLab(t)
	tests := []struct {
		playbook string
		want     int
	}{
		{"conn", 1},
		{"conn-reset", 2},
	}
	modes := []mode{{false, "sftp"}, {false, "scp"}, {true, "piped"}}
	for _, tc := range tests {
		t.Run(tc.playbook, func(t *testing.T) {
			for _, m := range modes {
				t.Run(m.String(), func(t *testing.T) {
					requireBridge(t)
					for _, sd := range []side{stock, bridgeSide()} {
						// A relay per run: the bridge may keep a connection
						// to a target it has served before.
						r := startRelay(t)
						res := runPlaybook(t, runSpec{
							Playbook: tc.playbook + ".yml",
							Mode:     m,
							Side:     sd,
							HostVars: viaRelay(r),
						})
						wantExit(t, res, 0)
						wantStats(t, res, "t", map[string]int{"failures": 0, "unreachable": 0})
						st := r.Stats()
						t.Logf("%s run: %d connections, %d bytes up, %d bytes down, %d turns",
							sd, st.Connections, st.BytesUp, st.BytesDown, st.Turns)
						if st.Connections != tc.want {
							t.Errorf("%s run of %s: %d TCP connections to the target, want %d",
								sd, tc.playbook, st.Connections, tc.want)
						}
					}
				})
			}
		})
	}
}
