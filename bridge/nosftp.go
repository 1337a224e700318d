package bridge

// A target without a usable sftp subsystem: sshd_config names none, or
// the login shell's rc file (or a forced command) prints before
// sftp-server speaks. OpenSSH's client meets it only where it asks for
// the subsystem (sftp, scp); what the bridge serves behind an exec-looking
// command (dd of=) runs as that command, as stock runs it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// sftpMaxMsg is OpenSSH's SFTP_MAX_MSG_LENGTH (and pkg/sftp's limit).
const sftpMaxMsg = 256 * 1024

// noSFTPError is a connection's sftp subsystem that cannot be had: the
// server refused it, or its version exchange failed. The connection is
// alive; it remembers the error, so that no later step asks again.
type noSFTPError struct {
	refused bool   // the server refused the subsystem request
	long    uint32 // the reply's first word when over sftp's limit (output before sftp-server), else 0
	err     error
}

func (e *noSFTPError) Error() string { return e.err.Error() }
func (e *noSFTPError) Unwrap() error { return e.err }

// reason is the line status counts for what the bridge did instead.
func (e *noSFTPError) reason() string {
	switch {
	case e.refused:
		return "the target refuses the sftp subsystem"
	case e.long != 0:
		return "the target's sftp subsystem is broken by output before it (a login shell rc file or forced command that prints)"
	}
	return "the target's sftp subsystem gives no version (" + e.err.Error() + ")"
}

// opensshLines is what OpenSSH 9.2's sftp client (sftp, and scp in its
// SFTP mode) prints before it exits 255, with ok false where the bridge
// cannot know it: a subsystem that ended early may have said why on
// stderr, as ssh relays it.
func (e *noSFTPError) opensshLines() (lines []string, ok bool) {
	switch {
	case e.refused:
		// ssh exits; sftp-client.c's get_msg_extended reads nothing.
		return []string{"Connection closed"}, true
	case e.long != 0:
		return []string{
			fmt.Sprintf("Received message too long %d", e.long),
			"Ensure the remote shell produces no output for non-interactive sessions.",
		}, true
	}
	return nil, false
}

// noSFTP tells whether a connection of t has found its sftp subsystem
// unusable: a held temp dir could not be written to the target.
func (t *target) noSFTP() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.conns {
		c.mu.Lock()
		no := c.noSFTP != nil
		c.mu.Unlock()
		if no {
			return true
		}
	}
	return false
}

// openSFTP starts the sftp subsystem on client and exchanges versions,
// as sftp.NewClient does, telling a subsystem that cannot be had
// (*noSFTPError) from a connection that failed.
func openSFTP(client *ssh.Client, opts ...sftp.ClientOption) (*sftp.Client, error) {
	e, err := sshclient.StartSubsystem(client, nil, "sftp")
	if errors.Is(err, sshclient.ErrSubsystemRefused) {
		return nil, &noSFTPError{refused: true, err: err}
	}
	if err != nil {
		return nil, err
	}
	go func() { _, _ = io.Copy(io.Discard, e.Stderr()) }()
	first := &firstWord{r: e.Stdout()}
	sc, err := sftp.NewClientPipe(first, e.Stdin(), opts...)
	if err != nil {
		_ = e.Close()
		ns := &noSFTPError{err: err}
		if first.n == 4 {
			if w := binary.BigEndian.Uint32(first.word[:]); w > sftpMaxMsg {
				ns.long = w
			}
		}
		return nil, ns
	}
	return sc, nil
}

// firstWord passes r through, keeping its first four bytes: the length
// of the SFTP version packet, or what a shell printed instead.
type firstWord struct {
	r    io.Reader
	word [4]byte
	n    int
}

func (f *firstWord) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if f.n < 4 {
		f.n += copy(f.word[f.n:], p[:n])
	}
	return n, err
}
