package sshclient

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// securePermissions is Debian's OpenSSH secure_permissions (its
// user-group-modes patch), which decides whether ssh may read a config
// file: owned by root or uid, not writable by others, and writable by
// its group only where that group's one member is the file's owner (a
// user private group under umask 002). Upstream refuses any group write;
// Debian's ssh, which the bridge stands in for, does not.
func securePermissions(st *syscall.Stat_t, uid int) bool {
	if st.Uid != 0 && int(st.Uid) != uid {
		return false
	}
	if st.Mode&0o002 != 0 {
		return false
	}
	if st.Mode&0o020 == 0 {
		return true
	}
	return soleMember(st.Gid, st.Uid)
}

// soleMember reports whether gid's members are owner alone, counting
// primary memberships (passwd entries with that gid) and the group's
// member list, as getpwent and getgrgid see them through NSS. A group
// with no members does not count as owner's.
func soleMember(gid, owner uint32) bool {
	group, ok := getent("group", strconv.FormatUint(uint64(gid), 10))
	if !ok || len(group) != 1 {
		return false
	}
	gf := strings.Split(group[0], ":")
	if len(gf) < 4 {
		return false
	}
	users, ok := getent("passwd")
	if !ok {
		return false
	}
	members := 0
	ownerName := ""
	for _, ln := range users {
		pf := strings.Split(ln, ":")
		if len(pf) < 7 {
			continue
		}
		if pf[2] == strconv.FormatUint(uint64(owner), 10) && ownerName == "" {
			ownerName = pf[0]
		}
		if pf[3] == gf[2] {
			members++
			if pf[2] != strconv.FormatUint(uint64(owner), 10) {
				return false
			}
		}
	}
	if ownerName == "" {
		return false
	}
	if gf[3] != "" {
		members++
		if listed := strings.Split(gf[3], ","); listed[0] != ownerName || len(listed) > 1 {
			return false
		}
	}
	return members > 0
}

// getent returns the lines `getent DB KEY...` prints; false if it fails
// (no such entry, or no getent).
func getent(db string, keys ...string) ([]string, bool) {
	out, err := exec.Command("getent", append([]string{db}, keys...)...).Output()
	if err != nil {
		return nil, false
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n"), true
}
