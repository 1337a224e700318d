package bridge

import (
	"testing"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// TestMuxClient: an invocation is a ControlMaster's client (which is not
// told why its master's connection ended) when it names a ControlPath and
// does not turn ControlMaster off, as Ansible's always do.
func TestMuxClient(t *testing.T) {
	tests := []struct {
		argv []string
		want bool
	}{
		{[]string{"-o", "ControlMaster=auto", "-o", "ControlPersist=60s", "-o", "ControlPath=/tmp/cp/x", "h", "true"}, true},
		{[]string{"-o", "ControlPath=/tmp/cp/x", "h", "true"}, true},
		{[]string{"h", "true"}, false},
		{[]string{"-o", "ControlPath=none", "h", "true"}, false},
		{[]string{"-o", "ControlMaster=no", "-o", "ControlPath=/tmp/cp/x", "h", "true"}, false},
	}
	for _, tt := range tests {
		inv, err := fakessh.ParseSSH(tt.argv)
		if err != nil {
			t.Fatalf("ParseSSH(%q): %v", tt.argv, err)
		}
		if got := muxClient(inv); got != tt.want {
			t.Errorf("muxClient(%q) = %t, want %t", tt.argv, got, tt.want)
		}
	}
}
