package interp

import (
	"bytes"
	"testing"
)

// TestCommonEnds: the base's prefix, the bytes between and the base's
// suffix always rebuild the template, as the agent does.
func TestCommonEnds(t *testing.T) {
	for _, c := range []struct{ base, tpl string }{
		{"", ""},
		{"abc", "abc"},
		{"abc", ""},
		{"", "abc"},
		{"PARAMS = '{\"a\": 1}'\nmain()\n", "PARAMS = '{\"a\": 22}'\nmain()\n"},
		{"aa", "aaa"},
		{"aaa", "aa"},
		{"abcab", "ab"},
		{"xyz", "abc"},
	} {
		base, tpl := []byte(c.base), []byte(c.tpl)
		p, s := commonEnds(base, tpl)
		if p+s > len(base) || p+s > len(tpl) {
			t.Errorf("%q → %q: prefix %d + suffix %d overlap", c.base, c.tpl, p, s)
			continue
		}
		got := append(append(append([]byte{}, base[:p]...), tpl[p:len(tpl)-s]...), base[len(base)-s:]...)
		if !bytes.Equal(got, tpl) {
			t.Errorf("%q → %q: rebuilt %q", c.base, c.tpl, got)
		}
	}
	p, s := commonEnds([]byte("PARAMS = '{\"a\": 1}'\nmain()\n"), []byte("PARAMS = '{\"a\": 22}'\nmain()\n"))
	if p != 16 || s != 10 {
		t.Errorf("prefix, suffix = %d, %d; want 16, 10", p, s)
	}
}
