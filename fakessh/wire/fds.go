package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// maxFDs bounds the descriptors one frame may carry.
const maxFDs = 4

// WriteFDs writes one frame with fds attached (SCM_RIGHTS) to its first
// byte, so that ReadFDs gets them with the frame's header.
func WriteFDs(c *net.UnixConn, t Type, payload []byte, fds []int) error {
	buf, err := encode(t, payload)
	if err != nil {
		return err
	}
	n, _, err := c.WriteMsgUnix(buf, syscall.UnixRights(fds...), nil)
	if err != nil {
		return err
	}
	if n < len(buf) {
		_, err = c.Write(buf[n:])
	}
	return err
}

// ReadFDs reads one frame as Read does, and the descriptors that came
// with its header (none for a frame sent by Write). The caller owns them.
func ReadFDs(c *net.UnixConn) (Frame, []int, error) {
	var hdr [HeaderLen]byte
	var fds []int
	fail := func(err error) (Frame, []int, error) {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return Frame{}, nil, err
	}
	for got := 0; got < HeaderLen; {
		oob := make([]byte, syscall.CmsgSpace(maxFDs*4))
		n, oobn, _, _, err := c.ReadMsgUnix(hdr[got:], oob)
		if oobn > 0 {
			msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
			if perr == nil {
				for i := range msgs {
					if rights, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
						fds = append(fds, rights...)
					}
				}
			}
		}
		got += n
		if err == nil && n == 0 || errors.Is(err, io.EOF) {
			err = io.EOF
		}
		if err != nil {
			if err == io.EOF && got > 0 {
				err = io.ErrUnexpectedEOF
			}
			return fail(err)
		}
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxPayload {
		return fail(fmt.Errorf("%w: %d bytes", ErrTooLarge, n))
	}
	f := Frame{Type: Type(hdr[0]), Payload: make([]byte, n)}
	if _, err := io.ReadFull(c, f.Payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fail(err)
	}
	return f, fds, nil
}
