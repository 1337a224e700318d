package fakessh

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// defaultAskpass is OpenSSH's _PATH_SSH_ASKPASS_DEFAULT on Debian.
const defaultAskpass = "/usr/bin/ssh-askpass"

// askpassProgram decides, as OpenSSH's read_passphrase(3) does for a
// password or passphrase prompt, whether a prompt is answered by an
// askpass program rather than on the terminal, and which. use is true
// when the terminal is not used; program is "" when askpass is not
// allowed either (no DISPLAY and no SSH_ASKPASS_REQUIRE=force): the
// answer is then empty. ansible-core 2.19 and later pass passwords this
// way (SSH_ASKPASS with SSH_ASKPASS_REQUIRE=force) instead of sshpass.
func askpassProgram(getenv func(string) string, haveTTY bool) (use bool, program string) {
	allow := getenv("DISPLAY") != ""
	switch strings.ToLower(getenv("SSH_ASKPASS_REQUIRE")) {
	case "force":
		use, allow = true, true
	case "prefer":
		use = allow
	case "never":
		allow = false
	}
	if !use && !haveTTY {
		use = true
	}
	if !use || !allow {
		return use, ""
	}
	if p := getenv("SSH_ASKPASS"); p != "" {
		return true, p
	}
	return true, defaultAskpass
}

// haveTTY reports whether the controlling terminal can be opened.
func haveTTY() bool {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	tty.Close()
	return true
}

// runAskpass runs program with the prompt as its argument, as OpenSSH's
// ssh_askpass does, and returns its output up to the first line end. A
// program that fails gives an error (OpenSSH then answers empty).
func runAskpass(program, prompt string) (string, error) {
	cmd := exec.Command(program, prompt)
	cmd.Stdin = nil
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ssh_askpass: %s: %w", program, err)
	}
	if i := bytes.IndexAny(out, "\r\n"); i >= 0 {
		out = out[:i]
	}
	return string(out), nil
}
