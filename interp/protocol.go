package interp

import (
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// AgentSource is the agent's Python source, run on the target by the
// bootstrap first stage (package bootstrap).
//
//go:embed agent.py
var AgentSource []byte

// Magic is written by the agent before its hello frame, so that noise a
// login shell prints first can be skipped.
const Magic = "\x00ANSIBLE-BRIDGE-AGENT-1\n"

// Protocol is the protocol version this client speaks.
const Protocol = 1

// Frame types. agent.py names each frameName T_NAME and defines Magic,
// Protocol, headerSize and maxFrame too: TestAgentConstants checks that
// the two sides agree.
const (
	// Type 1 is reserved; the hello is a response to request id 0.
	frameReq      = 2
	frameResp     = 3
	frameStdin    = 4
	frameStdinEOF = 5
	frameStdout   = 6
	frameStderr   = 7
	frameCancel   = 8
	// frameWritten: a module request's Dirs and Files are on the target
	// (ModuleRequest.Written); its task is starting.
	frameWritten = 9
)

const (
	headerSize = 9 // uint32 length | uint8 type | uint32 id
	maxFrame   = 1 << 30
)

type frame struct {
	typ     byte
	id      uint32
	payload []byte
}

// encodeFrame returns the wire form of a frame.
func encodeFrame(typ byte, id uint32, payload []byte) []byte {
	b := make([]byte, headerSize, headerSize+len(payload))
	binary.BigEndian.PutUint32(b[0:4], uint32(5+len(payload)))
	b[4] = typ
	binary.BigEndian.PutUint32(b[5:9], id)
	return append(b, payload...)
}

// readFrame reads one frame.
func readFrame(r io.Reader) (frame, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(h[0:4])
	if n < 5 || n > maxFrame {
		return frame{}, fmt.Errorf("bad frame length %d", n)
	}
	f := frame{typ: h[4], id: binary.BigEndian.Uint32(h[5:9]), payload: make([]byte, n-5)}
	if _, err := io.ReadFull(r, f.payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	return f, nil
}

// encodeReq builds a request payload: uint32 JSON length | JSON | blob.
func encodeReq(req any, blob ...[]byte) ([]byte, error) {
	js, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	n := 4 + len(js)
	for _, b := range blob {
		n += len(b)
	}
	p := make([]byte, 4, n)
	binary.BigEndian.PutUint32(p, uint32(len(js)))
	p = append(p, js...)
	for _, b := range blob {
		p = append(p, b...)
	}
	return p, nil
}

// response is a decoded response frame, or the client's error for a
// request that gets no frame.
type response struct {
	Error  string `json:"error"`
	Errno  string `json:"errno"`
	Code   string `json:"code"` // see codeErrs
	Exit   *int   `json:"exit"`
	Signal int    `json:"signal"`
	// CheckMicros is what a module run spent checking that what the
	// agent and the zygote imported is unchanged (freshness).
	CheckMicros int64 `json:"check_us"`
	// PolicyChanged: what the become tools read changed during a module
	// run that asked (ModuleRequest.WatchPolicy); Changed: the same,
	// since the agent started, in a policy request's answer, with Blind.
	PolicyChanged bool            `json:"policy_changed"`
	PasswdChanged bool            `json:"passwd_changed"`
	Changed       bool            `json:"changed"`
	Blind         bool            `json:"blind"`
	Stat          *statJSON       `json:"stat"`
	Raw           json.RawMessage `json:"-"`
	blob          []byte
	// gone, if set, is why the agent is gone (it wraps ErrAgentGone):
	// the request was pending when the client died.
	gone error
}

// codeErrs maps the codes the agent sets in a response (agent.py) to the
// errors they stand for.
var codeErrs = map[string]error{
	"restart": ErrRestart,
	"nozip":   errNoZip,
}

// codeErr returns the error r's code stands for, or nil.
func (r *response) codeErr() error {
	return codeErrs[r.Code]
}

type statJSON struct {
	Mode    uint32 `json:"mode"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	Target  string `json:"target"`
}

func decodeResp(p []byte) (*response, error) {
	if len(p) < 4 {
		return nil, fmt.Errorf("short response")
	}
	n := binary.BigEndian.Uint32(p)
	if uint64(n) > uint64(len(p)-4) {
		return nil, fmt.Errorf("bad response JSON length %d", n)
	}
	r := &response{Raw: p[4 : 4+n], blob: p[4+n:]}
	if err := json.Unmarshal(r.Raw, r); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	return r, nil
}
