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
)

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
