package bootstrap

import (
	"context"
	"os/exec"

	"github.com/ansible-bridge/ansible-bridge/interp"
)

// LocalRunner runs commands on this machine with /bin/sh -c, like sshd
// runs a command through the login shell. For tests.
type LocalRunner struct {
	// Env, if set, replaces the environment of the commands.
	Env []string
	// Dir, if set, is the commands' working directory.
	Dir string
}

var _ Runner = LocalRunner{}

// Start implements Runner.
func (l LocalRunner) Start(ctx context.Context, command string) (interp.Conn, error) {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Env = l.Env
	cmd.Dir = l.Dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return interp.Conn{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return interp.Conn{}, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return interp.Conn{}, err
	}
	if err := cmd.Start(); err != nil {
		return interp.Conn{}, err
	}
	wait := func(ctx context.Context) error {
		stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
		defer stop()
		return cmd.Wait()
	}
	return interp.Conn{Stdin: stdin, Stdout: stdout, Stderr: stderr, Wait: wait}, nil
}
