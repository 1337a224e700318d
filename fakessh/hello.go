package fakessh

import (
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// Hello is the first frame a shim sends: the invocation as its process
// sees it, and its command line as the shim parsed it, so the daemon never
// parses argv again. Exactly one of SSH, SCP and SFTP is set, by Prog.
type Hello struct {
	wire.HelloMsg
	SSH  *SSHInvocation  `json:"ssh,omitempty"`
	SCP  *SCPInvocation  `json:"scp,omitempty"`
	SFTP *SFTPInvocation `json:"sftp,omitempty"`
}

// NewHello parses argv for prog ("ssh", "scp" or "sftp") into a Hello. It
// returns what the bridge cannot honour, or "" when the daemon can take
// the invocation. A parse error also means fallback: the real binary then
// prints its own, authoritative message.
func NewHello(prog string, argv []string) (*Hello, string) {
	h := &Hello{HelloMsg: wire.HelloMsg{Prog: prog, Argv: argv, Argv0: Argv0(prog)}}
	wd, _ := os.Getwd()
	if !allUTF8(append([]string{wd, h.Argv0}, argv...)) || !allUTF8(os.Environ()) {
		return h, ReasonNotUTF8
	}
	if reason := h.Parse(); reason != "" {
		return h, reason
	}
	if prog == "ssh" && interactive(h.SSH) {
		return h, ReasonInteractive
	}
	if prog == "ssh" && background() {
		return h, ReasonBackground
	}
	if prog == "sftp" && h.SFTP.BatchFile == "-" && batchUnserved() {
		return h, ReasonBatchOpen
	}
	return h, ""
}

// Parse fills in the command line parsed from Prog and Argv: what the
// daemon does for the C front's hello, whose stdin is never its
// controlling terminal (so never interactive). It returns what the bridge
// cannot honour, or "".
func (h *Hello) Parse() string {
	var bad []string
	var err error
	switch h.Prog {
	case "ssh":
		if h.SSH, err = ParseSSH(h.Argv); err == nil {
			bad = h.SSH.Unsupported
		}
	case "scp":
		if h.SCP, err = ParseSCP(h.Argv); err == nil {
			bad = append(h.SCP.Unsupported, h.SCP.SSH.Unsupported...)
		}
	case "sftp":
		if h.SFTP, err = ParseSFTP(h.Argv); err == nil {
			bad = append(h.SFTP.Unsupported, h.SFTP.SSH.Unsupported...)
		}
	default:
		return "unknown program " + h.Prog
	}
	switch {
	case err != nil:
		return "cannot parse arguments: " + err.Error()
	case len(bad) > 0:
		return "unsupported: " + strings.Join(bad, " ")
	}
	return ""
}

// describeProcess adds what the daemon needs of the shim's process: its
// directory, environment, umask, terminal and whether it can prompt.
func (h *Hello) describeProcess() {
	h.Cwd, _ = os.Getwd()
	h.Env = os.Environ()
	h.PID = os.Getpid()
	h.Umask = syscall.Umask(0)
	syscall.Umask(h.Umask)
	if term.IsTerminal(int(os.Stdin.Fd())) {
		h.StdinTTY = true
		if cols, rows, err := term.GetSize(int(os.Stdin.Fd())); err == nil {
			h.Rows, h.Cols = rows, cols
		}
		if t, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS); err == nil {
			h.Termios = &wire.Termios{Iflag: t.Iflag, Oflag: t.Oflag, Cflag: t.Cflag, Lflag: t.Lflag, Cc: t.Cc[:]}
		}
	}
	// Without a terminal OpenSSH asks an askpass program, if allowed.
	use, program := askpassProgram(os.Getenv, haveTTY())
	h.CanPrompt = !use || program != ""
}

// ReasonNotUTF8: the hello is JSON, which carries text only; a stray byte
// would arrive as U+FFFD, another command or file name.
const ReasonNotUTF8 = "an argument, environment variable or working directory that is not UTF-8"

func allUTF8(ss []string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}
