package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// Held temp dirs exist only in the bridge until something needs them on
// the target, so the uploads into them must come through the bridge too.
// With only ssh_executable pointing at the shim, Ansible runs the real
// sftp or scp from PATH, which would find no directory: then temp dirs
// are made on the target as Ansible asks.

// shimNames are the binaries ssh, scp and sftp shims link to.
var shimNames = map[string]bool{"ansible-bridge": true, fakessh.ShimBinary: true}

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
		ok = isShim(lookPath(sftp, path))
	case "scp":
		ok = isShim(lookPath(scp, path))
	default: // smart: sftp, then scp if it fails
		ok = isShim(lookPath(sftp, path)) && isShim(lookPath(scp, path))
	}
	transferCache.Store(key, ok)
	return ok
}

// lookPath finds prog as a shell would with the given PATH.
func lookPath(prog, path string) string {
	if strings.Contains(prog, "/") {
		return prog
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// isShim reports whether p is a link to (or copy named as) the bridge.
func isShim(p string) bool {
	if p == "" {
		return false
	}
	real, err := filepath.EvalSymlinks(p)
	return err == nil && shimNames[filepath.Base(real)]
}
