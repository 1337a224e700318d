package fakessh

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseInherited closes the descriptors above stderr that this process
// inherited, as ssh does first thing (closefrom in ssh.c). A pipe or
// terminal its caller leaked then stays open no longer than the caller's
// own processes hold it: a pty's reader (pexpect under ansible-runner)
// sees its end when the job's processes die, not when a daemon or master
// started along the way exits. Inherited ones are those without
// close-on-exec, as Go opens each of its own with it.
func CloseInherited() {
	for _, fd := range openFDs() {
		if fd <= 2 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			_ = unix.Close(fd)
		}
	}
}

// openFDs lists this process's descriptors, from /proc, or where there
// is none (a sandbox without it) every number below the open-files limit.
func openFDs() []int {
	var fds []int
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			if fd, err := strconv.Atoi(e.Name()); err == nil {
				fds = append(fds, fd)
			}
		}
		return fds
	}
	limit := uint64(1024)
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur > 0 {
		limit = min(rl.Cur, 1<<16)
	}
	for fd := 0; uint64(fd) < limit; fd++ {
		fds = append(fds, fd)
	}
	return fds
}
