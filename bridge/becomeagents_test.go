package bridge

import (
	"bytes"
	"strings"
	"testing"
	"testing/iotest"
)

// markerWatch records what had been written when atMarker ran.
type markerWatch struct {
	bytes.Buffer
	atMarker string // contents of the buffer when atMarker was called
	called   bool
}

func TestRelayUntil(t *testing.T) {
	const marker = "BECOME-SUCCESS-abc"
	tests := []struct {
		name, in   string
		wantOut    string
		wantRest   string
		wantOK     bool
		wantBefore string // written before atMarker ran
	}{
		{name: "prompt then marker", in: "[sudo] password: \nBECOME-SUCCESS-abc\nagent", wantOut: "[sudo] password: \nBECOME-SUCCESS-abc\n", wantOK: true, wantBefore: "[sudo] password: \n"},
		{name: "marker alone", in: "BECOME-SUCCESS-abc\r\n", wantOut: "BECOME-SUCCESS-abc\r\n", wantOK: true},
		{name: "tool fails", in: "Sorry, try again.\nsudo: 3 incorrect password attempts\n", wantOut: "Sorry, try again.\nsudo: 3 incorrect password attempts\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte per read: the marker arrives split, as it may, and
			// nothing past its line is read.
			r := iotest.OneByteReader(strings.NewReader(tt.in))
			var w markerWatch
			rest, ok := relayUntil(r, &w, []byte(marker), func() {
				w.called, w.atMarker = true, w.String()
			})
			if w.String() != tt.wantOut || string(rest) != tt.wantRest || ok != tt.wantOK {
				t.Fatalf("relayUntil wrote %q, rest %q, ok %v; want %q, %q, %v", w.String(), rest, ok, tt.wantOut, tt.wantRest, tt.wantOK)
			}
			// Ansible sends a pipelined module once it sees the marker:
			// the stdin gate must be shut before then.
			if w.called != tt.wantOK || w.atMarker != tt.wantBefore {
				t.Errorf("atMarker called %v with %q written; want %v with %q", w.called, w.atMarker, tt.wantOK, tt.wantBefore)
			}
		})
	}
}
