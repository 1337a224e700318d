package ansiballz

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// wrappers returns the real wrappers in testdata by file name: ping from
// every version, command from the oldest and newest.
func wrappers(t testing.TB) map[string][]byte {
	t.Helper()
	files, _ := filepath.Glob("testdata/*.py.gz")
	if len(files) < 7 {
		t.Fatalf("testdata: %v", files)
	}
	out := map[string][]byte{}
	for _, f := range files {
		out[strings.TrimSuffix(filepath.Base(f), ".py.gz")] = readGzip(t, f)
	}
	return out
}

func TestParseEveryVersion(t *testing.T) {
	formats := map[string]Format{"2.14": Triple, "2.16": Repr, "2.18": Repr, "2.19": Call, "2.22": Call}
	for name, src := range wrappers(t) {
		t.Run(name, func(t *testing.T) {
			module, version, _ := strings.Cut(name, "-")
			w, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			if w.Format != formats[version] {
				t.Errorf("format %v, want %v", w.Format, formats[version])
			}
			if w.ModuleFQN != "ansible.modules."+module {
				t.Errorf("module %q", w.ModuleFQN)
			}
			if (w.Profile != "") != (w.Format == Call) {
				t.Errorf("profile %q for format %v", w.Profile, w.Format)
			}
			zip, err := base64.StdEncoding.DecodeString(string(w.Zip()))
			if err != nil || !bytes.HasPrefix(zip, []byte("PK\x03\x04")) {
				t.Errorf("zip: %v, starts %q", err, zip[:min(4, len(zip))])
			}
			params, err := w.Params()
			if err != nil {
				t.Fatal(err)
			}
			var p struct {
				Args map[string]any `json:"ANSIBLE_MODULE_ARGS"`
			}
			if err := json.Unmarshal(params, &p); err != nil || !strings.HasPrefix(p.Args["_ansible_version"].(string), version) {
				t.Errorf("params: %v, %v", err, p.Args["_ansible_version"])
			}
			if module == "command" && !strings.Contains(p.Args["_raw_params"].(string), "echo 'it'") {
				t.Errorf("command's _raw_params: %q", p.Args["_raw_params"])
			}
			checkTemplate(t, w)
		})
	}
}

// The parameters' literal and date_time's expression as agent.py found
// them with regular expressions before it was given their offsets (and
// as agent_test.py still does): the offsets must be the same.
var (
	agentParamsRE   = regexp.MustCompile(`(?m)^(    ANSIBALLZ_PARAMS = |params=)('(?:[^'\\\n]|\\.)*')(,?)$`)
	agentDateTimeRE = regexp.MustCompile(`(?m)^(?:date_time=(datetime\.datetime\([0-9, ]+, tzinfo=datetime\.timezone\.utc\)),|        zinfo\.date_time = (\([0-9, ]+\)))$`)
	// agent.py's PAYLOAD_LINES as they were, each of which must be in
	// the template once.
	agentPayloadLineREs = []*regexp.Regexp{
		regexp.MustCompile(`(?m)^( +)z = zipfile\.ZipFile\(modlib_path, mode='a'\)$`),
		regexp.MustCompile(`(?m)^( +)z\.writestr\(zinfo, sitecustomize\)$`),
		regexp.MustCompile(`(?m)^( +)z\.close\(\)$`),
		regexp.MustCompile(`(?m)^( +)temp_path = (?:os\.path\.realpath\()?tempfile\.mkdtemp\(prefix=[^\n]*\)$`),
		regexp.MustCompile(`(?m)^( +)zipped_mod = os\.path\.join\(temp_path, [^\n]*\)$`),
		regexp.MustCompile(`(?m)^( +)with open\(zipped_mod, 'wb'\) as modlib:$`),
		regexp.MustCompile(`(?m)^( +)shutil\.rmtree\(temp_path(?:, ignore_errors=True)?\)$`),
	}
	agentPayloadRE = regexp.MustCompile(`(?m)^ansible_module='([A-Za-z0-9_.]+)',$|prefix='ansible_(?:' \+ ')?([A-Za-z0-9_.]+)(?:' \+ ')?_payload_'`)
)

// checkTemplate: the template's offsets point where agent.py's regular
// expressions found the parameters' literal and (2.19+) the date_time
// expression.
func checkTemplate(t *testing.T, w *Wrapper) {
	t.Helper()
	const marker = "@@ZIP@@"
	tmpl := w.Template(marker)
	tpl, params, dateTime := tmpl.Src, tmpl.Params, tmpl.DateTime
	if want := len(w.Src) - (w.ZipEnd - w.ZipStart) + len(marker); len(tpl) != want || !bytes.Contains(tpl, []byte(marker)) {
		t.Fatalf("template of %d bytes, want %d with the marker", len(tpl), want)
	}
	if lit := tpl[params[0]:params[1]]; !bytes.Equal(lit, w.ParamsLiteral()) {
		t.Errorf("params at %v: %.40q", params, lit)
	}
	m := agentParamsRE.FindSubmatchIndex(tpl)
	if m == nil || [2]int{m[4], m[5]} != params {
		t.Errorf("params at %v, the agent's regexp found %v", params, m)
	}
	var want [2]int
	if d := agentDateTimeRE.FindSubmatchIndex(tpl); d != nil && d[2] >= 0 {
		want = [2]int{d[2], d[3]}
	} else if d != nil {
		want = [2]int{d[4], d[5]}
	}
	if dateTime != want || want[1] == 0 {
		t.Errorf("date_time at %v, the agent's regexp found %v (format %v)", dateTime, want, w.Format)
	}
	name := ""
	if m := agentPayloadRE.FindSubmatch(tpl); m != nil {
		name = string(m[1]) + string(m[2])
	}
	if w.PayloadName != name {
		t.Errorf("payload name %q, the agent's regexp found %q", w.PayloadName, name)
	}
	var payload [][2]int
	for _, re := range agentPayloadLineREs {
		m := re.FindAllSubmatchIndex(tpl, -1)
		if len(m) != 1 {
			payload = nil
			break
		}
		payload = append(payload, [2]int{m[0][3], m[0][1]})
	}
	if !slices.Equal(tmpl.Payload, payload) || len(payload) != 7 {
		t.Errorf("payload lines at %v, the agent's regexps found %v", tmpl.Payload, payload)
	}
}

func TestPayloadLines(t *testing.T) {
	src := wrappers(t)["ping-2.16"]
	for _, tc := range []struct{ name, old, new string }{
		{"one missing", "shutil.rmtree(temp_path", "shutil.rmtree(tp"},
		{"one twice", "\n", "\n    z.close()\n"},
		{"tab-indented", "    z.close()", "\tz.close()"},
	} {
		mut := bytes.Replace(src, []byte(tc.old), []byte(tc.new), 1)
		w, err := Parse(mut)
		if err != nil {
			t.Fatal(err)
		}
		if w.Payload != nil {
			t.Errorf("%s: payload lines %v", tc.name, w.Payload)
		}
	}
}

func TestPayloadName(t *testing.T) {
	for line, want := range map[string]string{
		"ansible_module='ping',":                                               "ping",
		"ansible_module='ansible.legacy.command',":                             "ansible.legacy.command",
		"ansible_module='ping', ":                                              "",
		"        temp_path = tempfile.mkdtemp(prefix='ansible_ping_payload_')": "ping",
		"prefix='ansible_' + 'ping' + '_payload_')":                            "ping",
		"prefix='ansible_' + 'a_payload_b_payload_')":                          "a_payload_b",
		"prefix='ansible_a_payload_' + '_payload_'":                            "a_payload_",
		"prefix='ansible__payload_'":                                           "",
		"prefix='ansible_' + ansible_module + '_payload_'":                     "",
		"prefix='ansible_ansible.legacy.command_payload_'":                     "ansible.legacy.command",
		"prefix='ansible_a/b_payload_'":                                        "",
		"prefix='ansible_x' x prefix='ansible_y_payload_'":                     "y",
	} {
		if got := payloadName([]byte(line)); got != want {
			t.Errorf("payloadName(%s) = %q, want %q", line, got, want)
		}
		if m := agentPayloadRE.FindStringSubmatch(line); (m == nil) != (want == "") || m != nil && m[1]+m[2] != want {
			t.Errorf("the agent's regexp on %s: %q", line, m)
		}
	}
}

// TestForget: Forget overwrites the decoded parameters, Wipe them in the
// source too.
func TestForget(t *testing.T) {
	src := bytes.Clone(wrappers(t)["ping-2.22"])
	w, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	params, err := w.Params()
	if err != nil || !bytes.Contains(params, []byte("ANSIBLE_MODULE_ARGS")) {
		t.Fatalf("params %.40q, %v", params, err)
	}
	w.Forget()
	if bytes.Contains(params, []byte("ANSIBLE_MODULE_ARGS")) || !bytes.Contains(src, []byte("ANSIBLE_MODULE_ARGS")) {
		t.Error("Forget: decoded parameters left, or the source's gone")
	}
	if p, err := w.Params(); p != nil || err == nil {
		t.Errorf("Params after Forget = %q, %v", p, err)
	}
	w.Wipe()
	if bytes.Contains(src, []byte("ANSIBLE_MODULE_ARGS")) {
		t.Error("parameters left in the source after Wipe")
	}
}

// TestParseRejects: mutations of a real wrapper that the bridge must not
// take for one (a future format would look like these).
func TestParseRejects(t *testing.T) {
	all := wrappers(t)
	for _, tc := range []struct{ name, version, old, new string }{
		{"no marker", "2.14", "_ANSIBALLZ_WRAPPER = True", "_ANSIBALLZ_WRAPPER = 1"},
		{"renamed zip", "2.16", "    ZIPDATA = '", "    ZIPDATA2 = '"},
		{"renamed zip arg", "2.22", "zip_data='", "zip_blob='"},
		{"no module", "2.19", "module_fqn='ansible.modules.ping',", "module='ansible.modules.ping',"},
		{"no params", "2.14", "    ANSIBALLZ_PARAMS = ", "    ANSIBALLZ_ARGS = "},
		{"no profile", "2.22", "profile='legacy',", "serializer='legacy',"},
	} {
		src := all["ping-"+tc.version]
		if !bytes.Contains(src, []byte(tc.old)) {
			t.Fatalf("%s: %q not in the %s wrapper", tc.name, tc.old, tc.version)
		}
		mut := bytes.Replace(src, []byte(tc.old), []byte(tc.new), 1)
		if w, err := Parse(mut); !errors.Is(err, ErrNotWrapper) {
			t.Errorf("%s: Parse = %+v, %v; want ErrNotWrapper", tc.name, w, err)
		}
	}
	if Is([]byte("print('hello')\n")) {
		t.Error("a plain script taken for a wrapper")
	}
}

func TestPyString(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{`'abc'`, "abc", true},
		{`"abc"  # comment`, "abc", true},
		{`'it\'s'`, "it's", true},
		{`'a\\b'`, `a\b`, true},
		{`'\n\t\r\x41\u00e9\U0001F600\101\0'`, "\n\t\rAé😀A\x00", true},
		{`'\q'`, `\q`, true},
		{`"{\"a\": 1}"`, `{"a": 1}`, true},
		{`'abc`, "", false},
		{`abc`, "", false},
		{`'abc' + x`, "", false},
		{`'\x4'`, "", false},
	} {
		got, err := PyString([]byte(tc.in))
		if (err == nil) != tc.ok || string(got) != tc.want {
			t.Errorf("PyString(%s) = %q, %v; want %q, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestLiteralLen(t *testing.T) {
	for in, want := range map[string]int{
		`'abc'`:             5,
		`"abc"  # comment`:  5,
		`'it\'s' + x`:       7,
		`'a\\'b'`:           5,
		`'{"a": "\"q\""}',`: 16,
		`'abc`:              -1,
		`abc`:               -1,
		`'`:                 -1,
	} {
		if got := literalLen([]byte(in)); got != want {
			t.Errorf("literalLen(%s) = %d, want %d", in, got, want)
		}
	}
}

// FuzzParse: any input parses or is refused, and a parsed wrapper's zip
// offsets lie inside it.
func FuzzParse(f *testing.F) {
	for _, src := range wrappers(f) {
		f.Add(src)
	}
	recorded, _ := filepath.Glob("testdata/recorded/*/*.py.gz")
	for _, path := range recorded {
		f.Add(readGzip(f, path))
	}
	f.Add([]byte("_ANSIBALLZ_WRAPPER = True\n    ZIPDATA = '''\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		w, err := Parse(src)
		if err != nil {
			if !errors.Is(err, ErrNotWrapper) {
				t.Fatalf("error %v does not wrap ErrNotWrapper", err)
			}
			return
		}
		if w.ZipStart < 0 || w.ZipEnd > len(src) || w.ZipStart > w.ZipEnd {
			t.Fatalf("zip at %d:%d of %d", w.ZipStart, w.ZipEnd, len(src))
		}
		if bytes.ContainsAny(w.Zip(), "'\"\\\n") {
			t.Fatalf("zip text %q", w.Zip())
		}
		if w.ParamsStart < 0 || w.ParamsEnd > len(src) || w.ParamsStart >= w.ParamsEnd || w.DateTimeStart > w.DateTimeEnd || w.DateTimeEnd > len(src) {
			t.Fatalf("params at %d:%d, date_time at %d:%d of %d", w.ParamsStart, w.ParamsEnd, w.DateTimeStart, w.DateTimeEnd, len(src))
		}
		w.Template("@@")
	})
}
