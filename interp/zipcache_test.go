package interp

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
)

// TestPrepare: two tasks of one module share their zip's hash, and the
// template keeps the parameters where the request says.
func TestPrepare(t *testing.T) {
	src := testdataWrapper(t, "ping-2.22.py.gz")
	other := bytes.Replace(src, []byte(`"ANSIBLE_MODULE_ARGS": {`), []byte(`"ANSIBLE_MODULE_ARGS": {"data": "x", `), 1)
	var runs []*moduleRun
	for _, s := range [][]byte{src, other} {
		w, err := ansiballz.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		m, err := prepare(w)
		if err != nil {
			t.Fatal(err)
		}
		if p := m.tpl.Params; !bytes.Equal(m.tpl.Src[p[0]:p[1]], w.ParamsLiteral()) {
			t.Errorf("params at %v: %.40q", p, m.tpl.Src[p[0]:p[1]])
		}
		if m.fqn != "ansible.modules.ping" || m.payload != "ping" || len(m.zip) < 1000 || !bytes.Contains(m.tpl.Src, []byte(zipMarker)) || len(m.tpl.Src) > 20000 {
			t.Errorf("fqn %q, payload %q, zip %d, template %d", m.fqn, m.payload, len(m.zip), len(m.tpl.Src))
		}
		runs = append(runs, m)
	}
	if runs[0].hash != runs[1].hash {
		t.Error("one module's zip, two hashes")
	}
}

func TestDecodeZipCache(t *testing.T) {
	lit := func(i int) []byte {
		return []byte(base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("PK zip number %d %s", i, bytes.Repeat([]byte("x"), 1000)))))
	}
	a1, h1, err := decodeZip(lit(0))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := base64.StdEncoding.DecodeString(string(lit(0)))
	if !bytes.Equal(a1, want) || h1 != sha256.Sum256(want) {
		t.Fatal("decoded zip or hash wrong")
	}
	a2, h2, _ := decodeZip(lit(0))
	if &a2[0] != &a1[0] || h2 != h1 {
		t.Fatal("the same literal was decoded again")
	}
	for i := 1; i <= zipCacheSize; i++ {
		if _, _, err := decodeZip(lit(i)); err != nil {
			t.Fatal(err)
		}
	}
	a3, h3, _ := decodeZip(lit(0))
	if &a3[0] == &a1[0] || h3 != h1 || !bytes.Equal(a3, want) {
		t.Fatalf("after %d others the first literal is still cached, or decodes differently", zipCacheSize)
	}
	// Not canonical: an error every time, never a cached answer.
	bad := append(lit(1), '\n')
	for range 2 {
		if _, _, err := decodeZip(bad); !errors.Is(err, ErrNotAnsiballZ) {
			t.Fatalf("non-canonical literal: %v", err)
		}
	}
	// Forgotten (the daemon's last connection closed): decoded afresh.
	if n := ZipsCached(); n != zipCacheSize {
		t.Fatalf("%d zips cached, want %d", n, zipCacheSize)
	}
	if ForgetZips(); ZipsCached() != 0 {
		t.Fatalf("ForgetZips left %d", ZipsCached())
	}
	a4, h4, _ := decodeZip(lit(0))
	if &a4[0] == &a3[0] || h4 != h1 || !bytes.Equal(a4, want) {
		t.Fatal("a forgotten literal was still cached, or decodes differently")
	}
}

// TestZipFilesKeyIsAgents: the daemon names a module zip's files as the
// agent does (agent.py's zip_files_key), on zips of 2.14 to 2.22: a twin
// sent by reference must be found.
func TestZipFilesKeyIsAgents(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	for _, name := range []string{"command-2.14.py.gz", "ping-2.16.py.gz", "ping-2.19.py.gz", "command-2.22.py.gz"} {
		w, err := ansiballz.Parse(testdataWrapper(t, name))
		if err != nil {
			t.Fatal(err)
		}
		m, err := prepare(w)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(python, "-c", "import sys; sys.path.insert(0, '.'); import agent; print(agent.zip_files_key(sys.stdin.buffer.read()))")
		cmd.Stdin = bytes.NewReader(m.zip)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: agent.zip_files_key: %v", name, err)
		}
		if got, want := zipFilesKey(m.zip), strings.TrimSpace(string(out)); got != want || got == "" {
			t.Errorf("%s: zipFilesKey %q, the agent's %q", name, got, want)
		}
	}
	if k := zipFilesKey([]byte("not a zip")); k != "" {
		t.Errorf("zipFilesKey of no zip: %q", k)
	}
}
