package mux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Message types and forwarding kinds of PROTOCOL.mux.
const (
	msgHello                = 0x00000001
	msgNewSession           = 0x10000002
	msgAliveCheck           = 0x10000004
	msgTerminate            = 0x10000005
	msgOpenFwd              = 0x10000006
	msgCloseFwd             = 0x10000007
	msgNewStdioFwd          = 0x10000008
	msgStopListening        = 0x10000009
	msgOK                   = 0x80000001
	msgFailure              = 0x80000003
	msgExitMessage          = 0x80000004
	msgAlive                = 0x80000005
	msgSessionOpened        = 0x80000006
	msgRemotePort           = 0x80000007
	msgTTYAllocFail         = 0x80000008
	protocolVersion         = 4
	maxPacket               = 256 * 1024 // mux.c refuses more (mux_client_read_packet)
	noEscape                = 0xffffffff
	portIsPath       uint32 = 0xfffffffe // (unsigned int)-2: the host is a unix socket path
)

var errMalformed = errors.New("malformed message")

// packet is one message body being read.
type packet struct{ b []byte }

func (p *packet) u32() (uint32, error) {
	if len(p.b) < 4 {
		return 0, errMalformed
	}
	v := binary.BigEndian.Uint32(p.b)
	p.b = p.b[4:]
	return v, nil
}

func (p *packet) str() (string, error) {
	n, err := p.u32()
	if err != nil || uint32(len(p.b)) < n {
		return "", errMalformed
	}
	s := string(p.b[:n])
	p.b = p.b[n:]
	return s, nil
}

func (p *packet) empty() bool { return len(p.b) == 0 }

// builder composes a message body.
type builder []byte

func (b builder) u32(v uint32) builder { return binary.BigEndian.AppendUint32(b, v) }
func (b builder) str(s string) builder { return append(b.u32(uint32(len(s))), s...) }

// readPacket reads one length-prefixed message.
func readPacket(r io.Reader) (*packet, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxPacket {
		return nil, fmt.Errorf("mux packet of %d bytes: %w", n, errMalformed)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return &packet{b}, nil
}

// writePacket writes one message with its length.
func writePacket(w io.Writer, body builder) error {
	_, err := w.Write(append(builder(nil).u32(uint32(len(body))), body...))
	return err
}
