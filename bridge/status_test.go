package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ansible-bridge/ansible-bridge/bridge/sshclient"
	"github.com/ansible-bridge/ansible-bridge/fakessh"
	"github.com/ansible-bridge/ansible-bridge/fakessh/wire"
)

// TestStatusWireBytes: status counts the bytes on the target's connection
// (WIRE IN/OUT) apart from what the shims exchanged with the daemon (SHIM
// IN/OUT), and its table names both.
func TestStatusWireBytes(t *testing.T) {
	h := newHarness(t, 0)
	payload := strings.Repeat("x", 64<<10)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "cat"), payload); r.code != 0 || r.stdout != payload {
		t.Fatalf("cat: code %d, %d bytes out", r.code, len(r.stdout))
	}
	st := h.srv.Status()
	if len(st.Targets) != 1 {
		t.Fatalf("%d targets", len(st.Targets))
	}
	ts := st.Targets[0]
	// The payload went to the target and came back, encrypted and framed.
	if ts.WireOut < int64(len(payload)) || ts.WireIn < int64(len(payload)) {
		t.Errorf("wire in %d, out %d; want each at least the %d bytes sent through cat", ts.WireIn, ts.WireOut, len(payload))
	}
	if ts.BytesIn != int64(len(payload)) || ts.BytesOut != int64(len(payload)) {
		t.Errorf("shim in %d, out %d; want %d each", ts.BytesIn, ts.BytesOut, len(payload))
	}
	r := h.run("ctl", []string{"status"}, "")
	for _, want := range []string{"WIRE IN", "WIRE OUT", "SHIM IN", "SHIM OUT"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status does not show %s:\n%s", want, r.stdout)
		}
	}
	// Every column of the table is defined for status --help.
	var header string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "TARGET ") {
			header = l
		}
	}
	cols := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(header), -1)
	if len(cols) < 2 {
		t.Fatalf("no table header in:\n%s", r.stdout)
	}
	for _, col := range cols[1:] {
		if !strings.Contains(StatusColumns, "\n  "+col+" ") {
			t.Errorf("StatusColumns does not define %s", col)
		}
	}
}

// TestStatusConcealsInFlight: a running command the journal conceals (a
// no_log task's environment values, raw's command) is shown by status as
// its entry shows it, by the program's name.
func TestStatusConcealsInFlight(t *testing.T) {
	h := newHarness(t, 0)
	secret := "inflight-env-4b9e"
	h.accepted("ssh", h.sshArgs("127.0.0.1", "APITOKEN="+secret+" cat"))
	st := h.srv.Status()
	if len(st.InFlight) != 1 {
		t.Fatalf("%d invocations in flight", len(st.InFlight))
	}
	if in := st.InFlight[0]; in.Command != "ssh" {
		t.Errorf("in flight: command %q, want the program's name", in.Command)
	}
	b, _ := json.Marshal(st)
	if strings.Contains(string(b), secret) {
		t.Errorf("status shows the command: %s", b)
	}
}

// TestStatusCountsEveryInvocation: each shim invocation is in exactly
// one row of status (a target's route, or the daemon's no_target by
// outcome), whether it was served, handed to the real binary, killed at
// a become tool's password prompt (Ansible's "Missing sudo password") or
// failed to log in; status requests are not invocations.
func TestStatusCountsEveryInvocation(t *testing.T) {
	h := newHarness(t, 0)
	sudo := writeFakeSudo(t)
	if r := h.run("ssh", h.sshArgs("127.0.0.1", "true"), ""); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	// Ansible 2.14's ControlPersist probe, from the C front: its command
	// line goes back to the shim, which runs the real ssh.
	func() {
		c, err := net.Dial("unix", h.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hello, _ := json.Marshal(fakessh.Hello{HelloMsg: wire.HelloMsg{Prog: "ssh", Argv: []string{"-o", "ControlPersist"}, Front: true}})
		if err := wire.Write(c, wire.Hello, hello); err != nil {
			t.Fatal(err)
		}
		if f, err := wire.Read(c); err != nil || f.Type != wire.Handover {
			t.Fatalf("probe: frame %v, %v; want a handover", f, err)
		}
	}()
	if r := h.run("ssh", withOption(h.sshArgs("127.0.0.1", "true"), "ControlPath", "none"), ""); r.fallback == "" {
		t.Fatalf("no ControlPath: %+v, want a fallback", r)
	}
	// A become step whose client is killed at sudo's prompt.
	func() {
		c, err := net.Dial("unix", h.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cmd := sudoCmd(sudo, `-H -S -p "`+sudoPrompt+`"`, "/usr/bin/python3")
		if err := wire.Write(c, wire.Hello, shimHello("ssh", h.sshArgs("127.0.0.1", cmd), h.cwd, []string{"HOME=" + h.home, "PATH=" + h.path})); err != nil {
			t.Fatal(err)
		}
		var errb bytes.Buffer
		for !strings.Contains(errb.String(), sudoPrompt) {
			f, err := wire.Read(c)
			if err != nil {
				t.Fatalf("become: %v before the prompt (stderr %q)", err, errb.String())
			}
			if f.Type == wire.Stderr {
				errb.Write(f.Payload)
			}
		}
	}()
	// A refused connection: its target is not kept.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closed, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	if r := h.run("ssh", withOption(h.sshArgsAt(h.cp+"-refused", "127.0.0.1", "true"), "Port", closed), ""); r.code != 255 {
		t.Fatalf("refused: %+v", r)
	}
	// ssh -O check without a master.
	if r := h.run("ssh", h.sshArgsAt(h.cp+"-none", "-O", "check", "127.0.0.1"), ""); r.code != 255 {
		t.Fatalf("-O check: %+v", r)
	}
	if r := h.run("ctl", []string{"status"}, ""); r.code != 0 {
		t.Fatalf("status: %+v", r)
	}
	waitFor(t, "the invocations to end", func() bool {
		st := h.srv.Status()
		return len(st.InFlight) == 0 && len(st.Targets) == 1
	})
	st := h.srv.Status()
	sum := uint64(0)
	for _, ts := range st.Targets {
		for r, n := range ts.Routes {
			if r != routeMux {
				sum += uint64(n)
			}
		}
	}
	for _, n := range st.NoTarget {
		sum += n
	}
	if st.Invocations != 6 || sum != st.Invocations {
		t.Errorf("%d invocations, %d in routes and no_target; want 6 each (routes %v, no_target %v)", st.Invocations, sum, st.Targets[0].Routes, st.NoTarget)
	}
	if r := st.Targets[0].Routes; r[routeExec] != 1 || r[routeBecome] != 1 {
		t.Errorf("routes %v, want exec 1, become 1", r)
	}
	want := map[string]uint64{routeFallback: 2, outcomeNotConnected: 1, routeControl: 1}
	if !maps.Equal(st.NoTarget, want) {
		t.Errorf("no_target %v, want %v", st.NoTarget, want)
	}
	r := h.run("ctl", []string{"status"}, "")
	for _, line := range []string{"6 invocations of ssh, scp and sftp (status requests not counted", "invocations in no target's row: control 1, fallback 2, not connected 1"} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("status does not say %q:\n%s", line, r.stdout)
		}
	}
}

// TestRouteCountedOnce: an invocation a route hands on (a module run
// that falls back to passthrough) is counted in the last route only.
func TestRouteCountedOnce(t *testing.T) {
	reg := newRegistry(logrus.New(), nil, 1)
	iv := &invocation{log: logrus.New()}
	tg := reg.get(&sshclient.Settings{ControlPath: "/cp", User: "u", HostName: "h", Port: 22}, iv)
	tg.countRoute(iv, routeModule)
	tg.countRoute(iv, routeExec)
	tg.countRoute(iv, routeExec)
	if !maps.Equal(tg.routes, map[string]int{routeExec: 1}) {
		t.Errorf("routes %v, want exec 1", tg.routes)
	}
}

// TestStatusFallbackReasons: the daemon counts why it handed each
// invocation to the real binary, in a target's row or not, and status
// says so itself: a shim in a sandbox that binds the socket's directory
// read-only (ansible-runner --process-isolation) logs nothing of it.
func TestStatusFallbackReasons(t *testing.T) {
	h := newHarness(t, 0)
	var reasons []string
	for _, argv := range [][]string{
		h.sshArgs("-L", "1234:localhost:1", "127.0.0.1", "true"), // unsupported, before a target
		h.sshArgs("-L", "1234:localhost:1", "127.0.0.1", "true"),
		{"-F", "none", "127.0.0.1", "true"}, // no ControlPath: ssh connects on its own
	} {
		r := h.run("ssh", argv, "")
		if r.fallback == "" {
			t.Fatalf("%q: served, want a fallback: %+v", argv, r)
		}
		reasons = append(reasons, r.fallback)
	}
	st := h.srv.Status()
	if st.Fallbacks[reasons[0]] != 2 || st.Fallbacks[reasons[2]] != 1 || len(st.Fallbacks) != 2 {
		t.Errorf("fallbacks %v, want %q twice and %q once", st.Fallbacks, reasons[0], reasons[2])
	}
	r := h.run("ctl", []string{"status"}, "")
	if want := "handed to the real binary by the daemon: 2× " + reasons[0] + "\n"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("status: %+v\nwant %q", r, want)
	}
}

// TestFallbackReasonsBounded: past maxFallbackReasons distinct reasons
// (some hold an option's value), the rest are counted together.
func TestFallbackReasonsBounded(t *testing.T) {
	reg := newRegistry(logrus.New(), nil, 1)
	for i := range maxFallbackReasons + 6 {
		reg.countFallback(fmt.Sprintf("-o Opt=%d", i))
	}
	reg.countFallback("-o Opt=0")
	_, _, fb := reg.snapshot()
	if len(fb) != maxFallbackReasons+1 || fb["(other reasons)"] != 6 || fb["-o Opt=0"] != 2 {
		t.Errorf("%d reasons, other %d, the first %d; want %d, 6, 2", len(fb), fb["(other reasons)"], fb["-o Opt=0"], maxFallbackReasons+1)
	}
}
