package fakessh

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"golang.org/x/term"
)

// ResumeEnv is how the C front (fakessh/front) hands a conversation with
// the daemon to this shim when the daemon sends what the front does not
// handle (a prompt, a fallback): "FD STATE", the connection's fd and how
// far it got ("hello", "accepted" or "eof", see progress). The frame the
// front stopped at is still unread on the connection.
const ResumeEnv = "ANSIBLE_BRIDGE_RESUME"

// resume takes over the front's conversation and ends it as Main would.
func resume(prog string, argv []string, spec string) int {
	conn, from, err := resumedConn(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ansible-bridge: %s: %s: %v\r\n", prog, ResumeEnv, err)
		return ExitSSHError
	}
	defer conn.Close()
	code, fb, err := converse(conn, prog, nil, term.IsTerminal(int(os.Stdin.Fd())), from)
	return finish(prog, argv, code, fb, err)
}

// resumedConn is the connection spec names, checked as a dial is: a unix
// socket whose peer runs as this user.
func resumedConn(spec string) (net.Conn, progress, error) {
	states := map[string]progress{"hello": helloSent, "accepted": stdinPumping, "eof": stdinSent}
	fdText, state, _ := strings.Cut(spec, " ")
	fd, err := strconv.Atoi(fdText)
	from, ok := states[state]
	if err != nil || !ok || fd < 3 {
		return nil, 0, fmt.Errorf("malformed %q", spec)
	}
	f := os.NewFile(uintptr(fd), "bridge daemon")
	defer f.Close()
	conn, err := net.FileConn(f)
	if err != nil {
		return nil, 0, err
	}
	if err := wire.CheckPeer(conn, fmt.Sprintf("fd %d", fd), os.Getuid()); err != nil {
		conn.Close()
		return nil, 0, fmt.Errorf("not the daemon's connection: %w", err)
	}
	return conn, from, nil
}
