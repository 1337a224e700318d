package interp

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
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

// TestPlainArgs: only arguments that say _ansible_no_log false are a
// task's that is not no_log.
func TestPlainArgs(t *testing.T) {
	for _, c := range []struct {
		args  map[string]any
		plain bool
	}{
		{map[string]any{"_ansible_no_log": false, "data": "x"}, true},
		{map[string]any{"_ansible_no_log": true, "data": "x"}, false},
		{map[string]any{"_ansible_no_log": "yes"}, false},
		{map[string]any{"data": "x"}, false}, // unsaid: taken as no_log
	} {
		if got := pingWith(t, c.args).PlainArgs(); got != c.plain {
			t.Errorf("%v: plainArgs = %v, want %v", c.args, got, c.plain)
		}
	}
}

// TestBlankParams: the literal keeps its length and quotes, its content
// goes; a span outside the template changes nothing.
func TestBlankParams(t *testing.T) {
	tpl := []byte("A = 'nolog'\n")
	if got := string(blankParams(tpl, [2]int{4, 11})); got != "A = '     '\n" {
		t.Errorf("blankParams = %q", got)
	}
	if got := string(blankParams(tpl, [2]int{4, 99})); got != string(tpl) {
		t.Errorf("out of range: %q", got)
	}
	if string(tpl) != "A = 'nolog'\n" {
		t.Errorf("the template itself changed: %q", tpl)
	}
}

// pingWith is 2.14's ping wrapper (ansiballz/testdata) with args as its
// module arguments, taken apart.
func pingWith(t *testing.T, args map[string]any) *ansiballz.Wrapper {
	t.Helper()
	src := testdataWrapper(t, "ping-2.14.py.gz")
	js, _ := json.Marshal(map[string]any{"ANSIBLE_MODULE_ARGS": args})
	src = regexp.MustCompile(`(?m)^(\s*ANSIBALLZ_PARAMS = )'.*$`).ReplaceAll(src, []byte("${1}'"+string(js)+"'"))
	w, err := ansiballz.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// testdataWrapper reads a recorded wrapper from ansiballz/testdata.
func testdataWrapper(t *testing.T, name string) []byte {
	t.Helper()
	f, err := os.Open("ansiballz/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	src, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return src
}
