package sshconf

import (
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{`a b`, []string{"a", "b"}, true},
		{`"a b" c`, []string{"a b", "c"}, true},
		{`'a "b"' c\ d`, []string{`a "b"`, "c d"}, true},
		{`a # comment`, []string{"a"}, true},
		{`a#b`, []string{"a#b"}, true},
		{`"open`, nil, false},
	} {
		got, ok := Split(tc.in)
		if ok != tc.ok || (ok && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("Split(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestConvTime(t *testing.T) {
	for in, want := range map[string]int64{"30": 30, "1m30s": 90, "2h": 7200, "1w": 604800, "": -1, "x": -1, "5q": -1, "99999999999": -1} {
		if got := ConvTime(in); got != want {
			t.Errorf("ConvTime(%q) = %d, want %d", in, got, want)
		}
	}
}
