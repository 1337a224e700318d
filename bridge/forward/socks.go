package forward

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
)

// socksRequest is a decoded SOCKS CONNECT.
type socksRequest struct {
	host  string
	port  uint32
	reply []byte // sent only once the connection is made, as OpenSSH does
	rest  []byte // what the client sent after its request
}

var errSOCKSVersion = errors.New("unknown SOCKS version")

// readSOCKS is channel_pre_dynamic: it reads r until it holds a SOCKS4,
// SOCKS4A or SOCKS5 CONNECT request, writing the SOCKS5 method reply to w
// on the way. Any other request is an error, on which OpenSSH closes the
// connection without a reply; so does a failed connect, since the success
// reply is only written once the channel is open.
func readSOCKS(r io.Reader, w io.Writer) (*socksRequest, error) {
	var (
		buf      []byte
		authDone bool
		chunk    = make([]byte, 16*1024)
	)
	for {
		// The fixed part of any request is at least 3 bytes.
		if len(buf) >= 3 {
			var (
				req  *socksRequest
				used int
				out  []byte
				err  error
			)
			switch buf[0] {
			case 4:
				req, used, err = decodeSOCKS4(buf)
			case 5:
				req, used, out, err = decodeSOCKS5(buf, &authDone)
			default:
				err = errSOCKSVersion
			}
			if err != nil {
				return nil, err
			}
			buf = buf[used:]
			if len(out) > 0 {
				if _, err := w.Write(out); err != nil {
					return nil, fmt.Errorf("socks5 reply: %w", err)
				}
			}
			if req != nil {
				req.rest = buf
				return req, nil
			}
			if used > 0 {
				continue // the request may already be here
			}
		}
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil && n == 0 {
			return nil, fmt.Errorf("reading SOCKS request: %w", err)
		}
	}
}

// decodeSOCKS4 is channel_decode_socks4: nil, 0, nil means need more.
func decodeSOCKS4(p []byte) (*socksRequest, int, error) {
	if len(p) < 8 {
		return nil, 0, nil
	}
	need := 1
	if p[4] == 0 && p[5] == 0 && p[6] == 0 && p[7] != 0 {
		need = 2 // SOCKS4A: 0.0.0.x, then a host name
	}
	found := 0
	for i := 8; i < len(p); i++ {
		if p[i] == 0 {
			found++
			if found == need {
				break
			}
		}
		if i > 1024 {
			return nil, 0, errors.New("decode socks4: too long")
		}
	}
	if found < need {
		return nil, 0, nil
	}
	cmd, port := p[1], binary.BigEndian.Uint16(p[2:4])
	rest := p[8:]
	rest = rest[bytes.IndexByte(rest, 0)+1:] // the user name
	var host string
	if need == 1 {
		host = netip.AddrFrom4([4]byte(p[4:8])).String()
	} else {
		n := bytes.IndexByte(rest, 0)
		if n+1 > niMaxHost {
			return nil, 0, fmt.Errorf("hostname %q too long", rest[:min(n, 100)])
		}
		host, rest = string(rest[:n]), rest[n+1:]
	}
	if cmd != 1 {
		return nil, 0, fmt.Errorf("cannot handle: SOCKS4 cn %d", cmd)
	}
	// vn 0, cd 90 (granted), port and address ignored.
	reply := []byte{0, 90, 0, 0, 0, 0, 0, 0}
	return &socksRequest{host: host, port: uint32(port), reply: reply}, len(p) - len(rest), nil
}

// decodeSOCKS5 is channel_decode_socks5: it answers the method
// negotiation (out) and then decodes the request. Only "no
// authentication" and CONNECT are supported.
func decodeSOCKS5(p []byte, authDone *bool) (req *socksRequest, used int, out []byte, err error) {
	if p[0] != 5 {
		return nil, 0, nil, errSOCKSVersion
	}
	if !*authDone {
		if len(p) < 2 {
			return nil, 0, nil, nil
		}
		n := int(p[1])
		if len(p) < n+2 {
			return nil, 0, nil, nil
		}
		if bytes.IndexByte(p[2:n+2], 0) < 0 {
			return nil, 0, nil, errors.New("method SSH_SOCKS5_NOAUTH not found")
		}
		*authDone = true
		return nil, n + 2, []byte{5, 0}, nil
	}
	if len(p) < 5 {
		return nil, 0, nil, nil
	}
	if p[1] != 1 || p[2] != 0 {
		return nil, 0, nil, errors.New("only socks5 connect supported")
	}
	var addrLen, off int
	switch p[3] {
	case 1:
		addrLen, off = 4, 4
	case 3:
		addrLen, off = int(p[4]), 5
	case 4:
		addrLen, off = 16, 4
	default:
		return nil, 0, nil, fmt.Errorf("bad socks5 atyp %d", p[3])
	}
	need := off + addrLen + 2
	if len(p) < need {
		return nil, 0, nil, nil
	}
	addr := p[off : off+addrLen]
	var host string
	switch p[3] {
	case 1:
		host = netip.AddrFrom4([4]byte(addr)).String()
	case 3:
		// OpenSSH copies the name as a C string.
		if i := bytes.IndexByte(addr, 0); i >= 0 {
			addr = addr[:i]
		}
		host = string(addr)
	case 4:
		host = netip.AddrFrom16([16]byte(addr)).String()
	}
	port := binary.BigEndian.Uint16(p[off+addrLen:])
	// Success, bound to 0.0.0.0:0.
	reply := []byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	return &socksRequest{host: host, port: uint32(port), reply: reply}, need, nil, nil
}
