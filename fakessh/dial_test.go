package fakessh

import (
	"slices"
	"testing"
)

// TestDaemonEnv: the daemon, which outlives the run that starts it,
// inherits only what it needs, not the run's credentials or secrets.
func TestDaemonEnv(t *testing.T) {
	in := []string{
		"PATH=/usr/bin", "HOME=/home/a", "LANG=C.UTF-8", "LC_ALL=C", "XDG_RUNTIME_DIR=/run/user/1",
		"TMPDIR=/tmp/a", "ANSIBLE_BRIDGE_IDLE=1m", "GOMAXPROCS=2",
		"SSH_AUTH_SOCK=/tmp/agent", "SSH_ASKPASS=/bin/askpass", "DISPLAY=:0", "AWS_SECRET_ACCESS_KEY=s3cret",
		"ANSIBLE_VAULT_PASSWORD=v", "MY_TOKEN=t", "LANGUAGE_SECRET=x", "PATHX=y",
	}
	got := daemonEnv(in)
	want := in[:8]
	if !slices.Equal(got, want) {
		t.Errorf("daemonEnv = %q, want %q", got, want)
	}
}
