package bridge

import (
	"bytes"
	"fmt"
)

// routeCached is Ansible's temp-dir housekeeping answered by the bridge
// without a round trip where it safely can: echo ~ (cached per
// connection), mkdir of a temp dir (held in memory), chmod u+x and
// rm -f -r on held dirs. Uploads into held dirs (sftp, scp, dd) are kept
// in memory by those routes. Permission steps for an unprivileged become
// user (setfacl, chmod +a, chgrp, chmod a+rX) are Ansible's security
// decision and their outcome depends on the target (is setfacl there, do
// ACLs apply): they run on the target, after the held dir is written.
const routeCached = "cached"

var cachedRoute = route{
	name: routeCached,
	match: func(r *request) bool {
		if !r.fast || r.ttNoTerminal() {
			return false
		}
		switch r.cmd.kind {
		case cmdEchoHome, cmdMkTemp, cmdChmodUX, cmdRmTemp:
			return true
		}
		return false
	},
	serve: func(r *request) (int, bool) { return r.serveCached() },
}

// serveCached answers the housekeeping command r.cmd. served is false
// when the command must run on the target as usual.
func (r *request) serveCached() (code int, served bool) {
	iv, t, c := r.iv, r.t, r.cmd
	switch c.kind {
	case cmdEchoHome:
		if out, ok := t.house.home(r.command); ok {
			t.countRoute(iv, routeCached)
			_, _ = iv.stdout().Write([]byte(out))
			return 0, true
		}
		var out, errb bytes.Buffer
		t.countRoute(iv, routeExec)
		code := r.exec(r.command, execOpts{stdout: &out, stderr: &errb})
		if code == 0 && errb.Len() == 0 {
			t.house.setHome(r.command, out.String())
		}
		return code, true
	case cmdMkTemp:
		if !t.house.transfersKnown(transferKey(iv.hello.HelloMsg)) || !t.house.baseKnown(c.base) || t.noSFTP() || t.sftpNoWrite.Load() {
			// No upload has come through the bridge yet: the uploads may
			// go to the real sftp or scp, so the directory is made on the
			// target (see transfers.go). An upload through the bridge into
			// it teaches the target to hold the next ones. And the first
			// temp dir under a base is made there by Ansible's own command:
			// only a mkdir in base tells that the login user may write
			// there (mkdir -p of an existing /etc succeeds), and a base it
			// may not write fails the task as stock's does. Nor is a dir
			// held where the target's sftp cannot write it there, or
			// refused to write into one (read-only): an sftp or scp
			// upload into it fails there as stock's.
			t.countRoute(iv, routeExec)
			code := r.exec(r.command, execOpts{})
			if code == 0 {
				t.house.knowBase(c.base)
				t.house.addTempOnTarget(c.base, c.dir)
			}
			return code, true
		}
		t.countRoute(iv, routeCached)
		t.house.addTemp(c.base, c.dir)
		_, _ = fmt.Fprintf(iv.stdout(), "%s=%s\n", c.name, c.dir)
		return 0, true
	case cmdChmodUX:
		for _, p := range c.paths {
			st, _ := t.house.lookup(p)
			if st == nil || !st.held() {
				return 0, false
			}
		}
		for _, p := range c.paths {
			st, name := t.house.lookup(p)
			if !st.chmodUX(name) {
				// Not held (any more): the real chmod reports it.
				return 0, false
			}
		}
		t.countRoute(iv, routeCached)
		return 0, true
	case cmdRmTemp:
		st, name := t.house.lookup(c.paths[0])
		if st == nil || name != "" {
			return 0, false
		}
		t.house.dropTemp(st.dir)
		// A module run may be writing the dir to the target (a run of
		// the same playbook on another fork): its files land first. Its
		// module may run on (abandoned at a task timeout): stock's rm
		// does not wait for it either.
		if err := st.settled(r.ctx); err != nil {
			return 0, false
		}
		if !st.writtenByAgent() && st.held() {
			t.countRoute(iv, routeCached)
			return 0, true
		}
		if ag := t.anyAgent(); ag != nil && st.writtenByAgent() {
			// rm -f -r reports nothing and always succeeds: no need to
			// wait, nor for an answer at all. The agent runs it before
			// any later request, which keeps stock's order.
			if err := ag.RemoveAllNoWait(st.dir); err == nil {
				t.unsynced.Store(ag)
				t.countRoute(iv, routeCached)
				return 0, true
			}
		}
		return 0, false
	}
	return 0, false
}
