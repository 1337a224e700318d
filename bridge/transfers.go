package bridge

import (
	"strings"
	"sync"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// Held temp dirs exist only in the bridge until something needs them on
// the target, so the uploads into them must come through the bridge too.
// With only ssh_executable pointing at the shim, Ansible runs the real
// sftp or scp from PATH, which would find no directory: then temp dirs
// are made on the target as Ansible asks.

// transferCache remembers the answer per environment: a playbook asks the
// same for every task.
var transferCache sync.Map // PATH and Ansible's settings -> bool

// transfersThroughBridge reports whether the sftp and scp that Ansible
// would run, given the shim's environment, are the bridge's shims (or the
// transfer method needs neither).
func transfersThroughBridge(env []string) bool {
	get := func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	method := get("ANSIBLE_SSH_TRANSFER_METHOD")
	if method == "piped" {
		return true // dd over ssh
	}
	path, sftp, scp := get("PATH"), get("ANSIBLE_SFTP_EXECUTABLE"), get("ANSIBLE_SCP_EXECUTABLE")
	key := strings.Join([]string{method, path, sftp, scp}, "\x00")
	if v, ok := transferCache.Load(key); ok {
		return v.(bool)
	}
	if sftp == "" {
		sftp = "sftp"
	}
	if scp == "" {
		scp = "scp"
	}
	ok := true
	switch method {
	case "sftp":
		ok = fakessh.IsBridgeBinary(fakessh.LookPathIn(sftp, path))
	case "scp":
		ok = fakessh.IsBridgeBinary(fakessh.LookPathIn(scp, path))
	default: // smart: sftp, then scp if it fails
		ok = fakessh.IsBridgeBinary(fakessh.LookPathIn(sftp, path)) && fakessh.IsBridgeBinary(fakessh.LookPathIn(scp, path))
	}
	transferCache.Store(key, ok)
	return ok
}
