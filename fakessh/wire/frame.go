package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Type identifies a frame.
type Type byte

// Frame types. Lower case ones carry stream data, upper case ones control.
const (
	Hello       Type = 'H' // shim → daemon: JSON HelloMsg
	Accept      Type = 'A' // daemon → shim: start pumping stdin
	Fallback    Type = 'F' // daemon → shim: exec the real binary; payload is the reason
	Replay      Type = 'r' // daemon → shim, before Fallback: the stdin it consumed, for the real binary to read again
	ViaBridge   Type = 'v' // daemon → shim, before Fallback: the real scp or sftp is to reach the target through the shim's ssh (-S)
	Stdin       Type = 'i' // shim → daemon
	StdinEOF    Type = 'I' // shim → daemon
	Stdout      Type = 'o' // daemon → shim
	Stderr      Type = 'e' // daemon → shim
	Exit        Type = 'X' // daemon → shim: 4-byte big-endian exit status
	Signal      Type = 'S' // shim → daemon: signal name without "SIG" ("INT", "TERM", ...)
	WindowSize  Type = 'W' // shim → daemon: 4-byte rows, cols (uint16 each)
	Prompt      Type = 'P' // daemon → shim: JSON PromptMsg
	PromptReply Type = 'R' // shim → daemon: the answer; empty payload + PromptFail type on failure
	PromptFail  Type = 'N' // shim → daemon: no terminal or the user gave up
	Handover    Type = 'G' // daemon → front: run the Go shim instead, as if the front had never called
	OnSignal    Type = 's' // daemon → shim: what to write to stderr if a signal ends the shim ("Shared connection to HOST closed." for a session on a terminal)
	// OutputClosed: shim → daemon: writing stdout failed (a closed pipe, a
	// full disk); as ssh's chan_write_failed, the rest is dropped.
	OutputClosed Type = 'O'
	// StopStdin: daemon → shim: stop reading stdin and leave it open, as
	// ssh does on eow@openssh.com (the remote command closed its stdin).
	StopStdin Type = 'E'
	// ProxyCommand: daemon → shim: JSON ProxyMsg; the shim starts the
	// command as its child, as ssh does (its terminal, session, umask),
	// and answers ProxyStarted.
	ProxyCommand Type = 'C'
	// ProxyStarted: shim → daemon: the proxy's 4-byte pid (0: the exec
	// failed, the pipes are closed at the far end), sent with
	// SCM_RIGHTS: the read end of its stdout, the write end of its
	// stdin and, where the kernel gives one, its pidfd.
	ProxyStarted Type = 'D'
)

// MaxPayload bounds one frame's payload.
const MaxPayload = 1 << 20

// HeaderLen is the size of a frame header.
const HeaderLen = 5

// ErrTooLarge is returned for frames whose declared length exceeds MaxPayload.
var ErrTooLarge = errors.New("wire: frame too large")

// Frame is one decoded frame.
type Frame struct {
	Type    Type
	Payload []byte
}

// HelloMsg opens a conversation. A shim sends it inside fakessh.Hello,
// which adds its parsed command line.
type HelloMsg struct {
	// Prog is "ssh", "scp", "sftp", or "ctl" for ansible-bridge's own
	// subcommands (status, stop).
	Prog string   `json:"prog"`
	Argv []string `json:"argv"` // without argv[0]
	// Argv0 is argv[0] as run: scp starts its own messages with it.
	Argv0 string   `json:"argv0,omitempty"`
	Cwd   string   `json:"cwd"`
	Env   []string `json:"env"`
	// StdinTTY tells whether the shim's stdin is a terminal; Rows/Cols
	// are its size (0 when not a terminal), as ssh sends them with -tt.
	StdinTTY bool `json:"stdin_tty"`
	Rows     int  `json:"rows"`
	Cols     int  `json:"cols"`
	// Termios is stdin's terminal's state, when it is one: ssh sends its
	// modes with a pty-req (fakessh.TerminalModes).
	Termios *Termios `json:"termios,omitempty"`
	// CanPrompt is true when the shim can open its controlling terminal
	// (sshpass gives ssh one) to ask for a password.
	CanPrompt bool `json:"can_prompt"`
	PID       int  `json:"pid"`
	// Umask is the shim's umask, applied to files fetched to its side.
	Umask int `json:"umask"`
	// Front is set by the C front (fakessh/front), which leaves the
	// command line for the daemon to parse and takes no terminal.
	Front bool `json:"front,omitempty"`
}

// Termios is a terminal's flags and control characters (the kernel's
// struct termios, c_cc[0:19]).
type Termios struct {
	Iflag uint32  `json:"iflag"`
	Oflag uint32  `json:"oflag"`
	Cflag uint32  `json:"cflag"`
	Lflag uint32  `json:"lflag"`
	Cc    []uint8 `json:"cc"`
}

// PromptMsg asks the shim to prompt on its terminal.
type PromptMsg struct {
	Text string `json:"text"`
	Echo bool   `json:"echo"`
}

// ProxyMsg asks the shim to run Shell with "-c" and Command (the whole
// "exec CMD" string), stderr on /dev/null when StderrNull.
type ProxyMsg struct {
	Shell      string `json:"shell"`
	Command    string `json:"command"`
	StderrNull bool   `json:"stderr_null"`
}

// Write writes one frame. It does a single Write call so that frames from
// concurrent writers guarded by a mutex stay whole.
func Write(w io.Writer, t Type, payload []byte) error {
	buf, err := encode(t, payload)
	if err != nil {
		return err
	}
	_, err = w.Write(buf)
	return err
}

// encode returns one frame's bytes: header and payload.
func encode(t Type, payload []byte) ([]byte, error) {
	if len(payload) > MaxPayload {
		return nil, ErrTooLarge
	}
	buf := make([]byte, HeaderLen+len(payload))
	buf[0] = byte(t)
	binary.BigEndian.PutUint32(buf[1:], uint32(len(payload)))
	copy(buf[HeaderLen:], payload)
	return buf, nil
}

// Read reads one frame. io.EOF is returned only at a frame boundary; a
// frame cut short gives io.ErrUnexpectedEOF.
func Read(r io.Reader) (Frame, error) {
	return ReadWith(r, func(n int) []byte { return make([]byte, n) })
}

// ReadWith reads one frame as Read does, into alloc(n): n bytes that
// alloc gives once the header has come, so that a reader can reuse
// buffers without holding one while it waits.
func ReadWith(r io.Reader, alloc func(n int) []byte) (Frame, error) {
	var hdr [HeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: %d bytes", ErrTooLarge, n)
	}
	f := Frame{Type: Type(hdr[0]), Payload: alloc(int(n))}
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return f, nil
}

// ExitPayload encodes an exit status.
func ExitPayload(code int) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(int32(code)))
}

// ExitCode decodes an Exit payload.
func ExitCode(p []byte) (int, error) {
	if len(p) != 4 {
		return 0, fmt.Errorf("wire: exit payload of %d bytes", len(p))
	}
	return int(int32(binary.BigEndian.Uint32(p))), nil
}

// SizePayload encodes a window size.
func SizePayload(rows, cols int) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(rows))
	return binary.BigEndian.AppendUint16(b, uint16(cols))
}

// Size decodes a WindowSize payload.
func Size(p []byte) (rows, cols int, err error) {
	if len(p) != 4 {
		return 0, 0, fmt.Errorf("wire: window size payload of %d bytes", len(p))
	}
	return int(binary.BigEndian.Uint16(p)), int(binary.BigEndian.Uint16(p[2:])), nil
}
