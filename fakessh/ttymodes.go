package fakessh

import (
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"golang.org/x/sys/unix"
)

// TerminalModes encodes t as OpenSSH's ssh_tty_make_modes (ttymodes.c)
// does on Linux for a pty-req: the speeds, each control character
// (_POSIX_VDISABLE as 255) and each flag, by their RFC 4254 opcodes. A
// zero t gives what an ssh master sends for a mux client whose stdin is
// not a terminal (its tcgetattr failed on a zeroed struct).
func TerminalModes(t wire.Termios) map[uint8]uint32 {
	speed := baud(t.Cflag & (unix.CBAUD | unix.CBAUDEX))
	m := map[uint8]uint32{128: speed, 129: speed} // TTY_OP_ISPEED, TTY_OP_OSPEED
	for _, c := range []struct {
		op    uint8
		index int
	}{
		{1, unix.VINTR}, {2, unix.VQUIT}, {3, unix.VERASE}, {4, unix.VKILL}, {5, unix.VEOF},
		{6, unix.VEOL}, {7, unix.VEOL2}, {8, unix.VSTART}, {9, unix.VSTOP}, {10, unix.VSUSP},
		{12, unix.VREPRINT}, {13, unix.VWERASE}, {14, unix.VLNEXT}, {18, unix.VDISCARD},
	} {
		var v uint32
		if c.index < len(t.Cc) {
			v = uint32(t.Cc[c.index])
		}
		if v == 0 { // _POSIX_VDISABLE
			v = 255
		}
		m[c.op] = v
	}
	for _, f := range []struct {
		op    uint8
		field uint32
		bit   uint32
	}{
		{30, t.Iflag, unix.IGNPAR}, {31, t.Iflag, unix.PARMRK}, {32, t.Iflag, unix.INPCK},
		{33, t.Iflag, unix.ISTRIP}, {34, t.Iflag, unix.INLCR}, {35, t.Iflag, unix.IGNCR},
		{36, t.Iflag, unix.ICRNL}, {37, t.Iflag, unix.IUCLC}, {38, t.Iflag, unix.IXON},
		{39, t.Iflag, unix.IXANY}, {40, t.Iflag, unix.IXOFF}, {41, t.Iflag, unix.IMAXBEL},
		{42, t.Iflag, unix.IUTF8},
		{50, t.Lflag, unix.ISIG}, {51, t.Lflag, unix.ICANON}, {52, t.Lflag, unix.XCASE},
		{53, t.Lflag, unix.ECHO}, {54, t.Lflag, unix.ECHOE}, {55, t.Lflag, unix.ECHOK},
		{56, t.Lflag, unix.ECHONL}, {57, t.Lflag, unix.NOFLSH}, {58, t.Lflag, unix.TOSTOP},
		{59, t.Lflag, unix.IEXTEN}, {60, t.Lflag, unix.ECHOCTL}, {61, t.Lflag, unix.ECHOKE},
		{62, t.Lflag, unix.PENDIN},
		{70, t.Oflag, unix.OPOST}, {71, t.Oflag, unix.OLCUC}, {72, t.Oflag, unix.ONLCR},
		{73, t.Oflag, unix.OCRNL}, {74, t.Oflag, unix.ONOCR}, {75, t.Oflag, unix.ONLRET},
		{90, t.Cflag, unix.CS7}, {91, t.Cflag, unix.CS8}, {92, t.Cflag, unix.PARENB},
		{93, t.Cflag, unix.PARODD},
	} {
		m[f.op] = 0
		if f.field&f.bit != 0 {
			m[f.op] = 1
		}
	}
	return m
}

// baud is OpenSSH's speed_to_baud: a B* speed code as bits per second.
func baud(code uint32) uint32 {
	for _, s := range [...]struct{ code, baud uint32 }{
		{unix.B50, 50}, {unix.B75, 75}, {unix.B110, 110}, {unix.B134, 134}, {unix.B150, 150},
		{unix.B200, 200}, {unix.B300, 300}, {unix.B600, 600}, {unix.B1200, 1200},
		{unix.B1800, 1800}, {unix.B2400, 2400}, {unix.B4800, 4800}, {unix.B9600, 9600},
		{unix.B19200, 19200}, {unix.B38400, 38400}, {unix.B57600, 57600},
		{unix.B115200, 115200}, {unix.B230400, 230400},
	} {
		if s.code == code {
			return s.baud
		}
	}
	if code == unix.B0 {
		return 0
	}
	return 9600 // speed_to_baud's default
}
