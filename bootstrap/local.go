package bootstrap

import (
	"context"
	"io"
	"os/exec"
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
func (l LocalRunner) Start(ctx context.Context, command string) (io.WriteCloser, io.Reader, io.Reader, func(context.Context) error, error) {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Env = l.Env
	cmd.Dir = l.Dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, nil, err
	}
	wait := func(ctx context.Context) error {
		stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
		defer stop()
		return cmd.Wait()
	}
	return stdin, stdout, stderr, wait, nil
}
