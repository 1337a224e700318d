package bridge

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
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
