package fakessh

import (
	"os"
	"strings"
	"syscall"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
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
	h := &Hello{HelloMsg: wire.HelloMsg{Prog: prog, Argv: argv}}
	var bad []string
	var err error
	var ssh *SSHInvocation // the ssh options, of ssh, scp or sftp
	switch prog {
	case "ssh":
		if h.SSH, err = ParseSSH(argv); err == nil {
			bad, ssh = h.SSH.Unsupported, h.SSH
		}
	case "scp":
		if h.SCP, err = ParseSCP(argv); err == nil {
			bad, ssh = append(h.SCP.Unsupported, h.SCP.SSH.Unsupported...), &h.SCP.SSH
		}
	case "sftp":
		if h.SFTP, err = ParseSFTP(argv); err == nil {
			bad, ssh = append(h.SFTP.Unsupported, h.SFTP.SSH.Unsupported...), &h.SFTP.SSH
		}
	default:
		return h, "unknown program " + prog
	}
	switch {
	case err != nil:
		return h, "cannot parse arguments: " + err.Error()
	case len(bad) > 0:
		return h, "unsupported: " + strings.Join(bad, " ")
	case prog == "ssh" && interactive(ssh):
		return h, ReasonInteractive
	}
	return h, ""
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
	}
	// Without a terminal OpenSSH asks an askpass program, if allowed.
	use, program := askpassProgram(os.Getenv, haveTTY())
	h.CanPrompt = !use || program != ""
}
