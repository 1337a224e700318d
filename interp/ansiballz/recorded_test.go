package ansiballz

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recordedVersions are the ansible-core versions of testdata/recorded
// (scripts/record-wrappers.sh), with the wrapper format each writes.
var recordedVersions = map[string]Format{"2.14": Triple, "2.16": Repr, "2.18": Repr, "2.19": Call, "2.22": Call}

// recordedModules are the modules the recording playbook runs.
var recordedModules = []string{"command", "stat", "file"}

// readGzip returns the content of a .gz file.
func readGzip(t testing.TB, path string) []byte {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// taken is what a test compares of a parsed wrapper: its format and
// module, the module's own arguments (Ansible's internal _ansible_* ones
// left out) and the names in its zip.
type taken struct {
	format Format
	module string
	args   map[string]any
	files  []string
}

func takeApart(t *testing.T, src []byte) taken {
	t.Helper()
	w, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if (w.Profile != "") != (w.Format == Call) {
		t.Errorf("profile %q for format %v", w.Profile, w.Format)
	}
	checkTemplate(t, w)
	raw, err := base64.StdEncoding.DecodeString(string(w.Zip()))
	if err != nil {
		t.Fatalf("zip: %v", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatalf("zip: %v", err)
	}
	out := taken{format: w.Format, module: w.ModuleFQN, args: map[string]any{}}
	for _, f := range zr.File {
		out.files = append(out.files, f.Name)
	}
	slices.Sort(out.files)
	params, err := w.Params()
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Args map[string]any `json:"ANSIBLE_MODULE_ARGS"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		t.Fatalf("params: %v", err)
	}
	for k, v := range p.Args {
		if !strings.HasPrefix(k, "_ansible_") {
			out.args[k] = v
		}
	}
	return out
}

// Every version's wrappers of several modules, as Ansible pipes them and
// as it writes them to a file, take apart with that version's format and
// the module's name; the two ways give the same module, arguments and zip
// files.
func TestParseRecorded(t *testing.T) {
	for version, format := range recordedVersions {
		for _, module := range recordedModules {
			t.Run(version+"/"+module, func(t *testing.T) {
				var got []taken
				for _, mode := range []string{"piped", "file"} {
					path := filepath.Join("testdata", "recorded", version, mode+"-"+module+".py.gz")
					tk := takeApart(t, readGzip(t, path))
					if tk.format != format || tk.module != "ansible.modules."+module {
						t.Errorf("%s: format %v, module %q", mode, tk.format, tk.module)
					}
					if !slices.Contains(tk.files, "ansible/modules/"+module+".py") {
						t.Errorf("%s: zip lacks the module: %v", mode, tk.files)
					}
					got = append(got, tk)
				}
				piped, file := got[0], got[1]
				if !slices.Equal(piped.files, file.files) {
					t.Errorf("zip files differ: piped %v, file %v", piped.files, file.files)
				}
				pa, _ := json.Marshal(piped.args)
				fa, _ := json.Marshal(file.args)
				if !bytes.Equal(pa, fa) {
					t.Errorf("module arguments differ: piped %s, file %s", pa, fa)
				}
			})
		}
	}
}
