package fakessh

import (
	"testing"

	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
	"golang.org/x/sys/unix"
)

// TestTerminalModes: the modes ssh sends, as ttymodes.c encodes them.
func TestTerminalModes(t *testing.T) {
	zero := TerminalModes(wire.Termios{})
	if len(zero) != 2+14+36 {
		t.Errorf("%d modes, want the 52 OpenSSH sends on Linux", len(zero))
	}
	for op, v := range zero {
		want := uint32(0)
		if op >= 1 && op <= 18 {
			want = 255 // _POSIX_VDISABLE
		}
		if v != want {
			t.Errorf("zero termios: mode %d = %d, want %d", op, v, want)
		}
	}
	cc := make([]uint8, 19)
	cc[unix.VINTR], cc[unix.VEOF] = 3, 4
	m := TerminalModes(wire.Termios{Iflag: unix.ICRNL | unix.IUTF8, Oflag: unix.OPOST | unix.ONLCR, Cflag: unix.B38400 | unix.CS8, Lflag: unix.ECHO | unix.ICANON, Cc: cc})
	for op, want := range map[uint8]uint32{128: 38400, 129: 38400, 1: 3, 5: 4, 2: 255, 36: 1, 42: 1, 70: 1, 72: 1, 91: 1, 53: 1, 51: 1, 50: 0, 92: 0} {
		if m[op] != want {
			t.Errorf("mode %d = %d, want %d", op, m[op], want)
		}
	}
}
