package interp_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"sync/atomic"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/interp"
)

// helloAgent plays an agent that says hello and closes its stdout when its
// stdin ends.
func helloAgent() (stdin io.WriteCloser, stdout io.Reader) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		js, _ := json.Marshal(interp.AgentInfo{Protocol: interp.Protocol, PID: 1})
		resp := binary.BigEndian.AppendUint32(nil, uint32(len(js)))
		resp = append(resp, js...)
		hello := binary.BigEndian.AppendUint32([]byte(interp.Magic), uint32(5+len(resp)))
		hello = append(hello, 3) // a response frame, id 0
		hello = binary.BigEndian.AppendUint32(hello, 0)
		if _, err := outW.Write(append(hello, resp...)); err == nil {
			_, _ = io.Copy(io.Discard, inR)
		}
		outW.Close()
	}()
	return inW, outR
}

// TestCloseEndsWait: a remote command that does not end when the agent's
// stdin closes (a stuck become tool, a wedged session) is ended by Close,
// so that nothing is left waiting on it.
func TestCloseEndsWait(t *testing.T) {
	stdin, stdout := helloAgent()
	var waiting atomic.Int32
	wait := func(ctx context.Context) error {
		waiting.Add(1)
		defer waiting.Add(-1)
		<-ctx.Done() // only an explicit end stops this command
		return ctx.Err()
	}
	c, err := interp.NewClient(context.Background(), interp.Conn{Stdin: stdin, Stdout: stdout, Wait: wait}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err == nil {
		t.Error("Close of a command that would not end reported no error")
	}
	if n := waiting.Load(); n != 0 {
		t.Fatalf("%d waits still running after Close", n)
	}
}
