package fakessh

import (
	"os"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// Fallback reasons that OpenSSH's contract asks for: only the real
// binary prints what it prints.
const (
	ReasonInteractive = "interactive terminal session: escapes and the terminal are the real ssh's"
	ReasonVerbose     = "-v, LogLevel VERBOSE or DEBUG: ssh's log lines (Authenticated to, Transferred, debug) are the real ssh's"
	ReasonBackground  = "a background job of its terminal: ssh's master reads and writes it, where the shim would be stopped (SIGTTIN, SIGTTOU)"
)

// DaemonReason prefixes, in the shim log, the reasons the daemon gave for
// the invocations it handed back.
const DaemonReason = "daemon: "

// interactive reports whether ssh would run inv as a user's interactive
// session: a terminal asked for and given (stdin is a terminal), and
// that terminal is the controlling one, where the user types ~. and ~?.
// Ansible's -tt runs give ssh a pty of their own on stdin, not its
// controlling terminal, and stay with the bridge.
func interactive(inv *SSHInvocation) bool {
	if inv.TTY < 0 || inv.TTY == 0 && inv.HasCommand() || !term.IsTerminal(int(os.Stdin.Fd())) {
		return false
	}
	// tcgetsid: only the controlling terminal has our session's id.
	_, err := unix.IoctlGetInt(int(os.Stdin.Fd()), unix.TIOCGSID)
	return err == nil
}

// background reports whether stdin, stdout or stderr is the controlling
// terminal and this process is not in its foreground process group (`ssh
// host cmd &` from a shell). A mux client hands those fds to its master,
// which reads and writes them from another session, so the job runs on;
// the shim, reading them itself, would be stopped. tcgetpgrp fails on
// any other descriptor.
func background() bool {
	pgrp := unix.Getpgrp()
	for fd := 0; fd <= 2; fd++ {
		if fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err == nil && fg != pgrp {
			return true
		}
	}
	return false
}
