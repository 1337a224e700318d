package bridge

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

// Held temp dirs exist only in the bridge until something needs them on
// the target, so the uploads into them must come through the bridge too.
// Which sftp and scp Ansible runs is decided by its configuration
// (ansible.cfg, ANSIBLE_*_EXECUTABLE, PATH, even inventory variables),
// which the daemon cannot read reliably. So it learns it: until an
// upload into one of Ansible's temp dirs has come through the shims for
// a target, with the same view of Ansible's configuration, temp dirs are
// made on the target as Ansible asks (and a wrapper uploaded through the
// bridge into one still runs in the interpreter, from the copy the
// bridge kept). From the first such upload on, temp dirs are held.

// transferKey names what decides, as far as a shim's hello shows it,
// which sftp and scp Ansible runs: its working directory (./ansible.cfg),
// PATH, HOME, the environment variables Ansible reads for the transfer
// settings, and which file each ansible.cfg candidate is (by inode,
// size and modification time: an edited ansible.cfg is learned afresh).
func transferKey(h wire.HelloMsg) string {
	get := func(k string) string {
		for _, kv := range h.Env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	var b strings.Builder
	b.WriteString(h.Cwd)
	for _, k := range []string{
		"PATH", "HOME", "ANSIBLE_CONFIG",
		"ANSIBLE_SFTP_EXECUTABLE", "ANSIBLE_SCP_EXECUTABLE", "ANSIBLE_SSH_EXECUTABLE",
		"ANSIBLE_SSH_TRANSFER_METHOD", "ANSIBLE_SCP_IF_SSH", "ANSIBLE_SFTP_BATCH_MODE",
	} {
		fmt.Fprintf(&b, "\x00%s=%s", k, get(k))
	}
	cfgs := []string{get("ANSIBLE_CONFIG"), "/etc/ansible/ansible.cfg"}
	if h.Cwd != "" {
		cfgs = append(cfgs, filepath.Join(h.Cwd, "ansible.cfg"))
	}
	if home := get("HOME"); home != "" {
		cfgs = append(cfgs, filepath.Join(home, ".ansible.cfg"))
	}
	for _, p := range cfgs {
		if p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(h.Cwd, p)
		}
		fmt.Fprintf(&b, "\x00%s:%s", p, fileIdentity(p))
	}
	return b.String()
}

// fileIdentity tells one version of a file from another: device, inode,
// size and modification time, or "-" when there is none.
func fileIdentity(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return "-"
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
	}
	return fmt.Sprintf("%d/%d/%d/%d", st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano())
}

// maxTransferKeys bounds what a target remembers: beyond it, it starts
// over (and learns again, at the cost of one temp dir on the target).
const maxTransferKeys = 64

// transfersKnown reports whether uploads into temp dirs have come through
// the bridge for this target under key (transferKey).
func (h *housekeeping) transfersKnown(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.viaBridge[key]
}

// learnTransfers records that an upload into one of Ansible's temp dirs
// came through the bridge under key. It is kept across resets: a new
// login does not change which programs Ansible runs.
func (h *housekeeping) learnTransfers(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.viaBridge == nil || len(h.viaBridge) >= maxTransferKeys {
		h.viaBridge = map[string]bool{}
	}
	h.viaBridge[key] = true
}
