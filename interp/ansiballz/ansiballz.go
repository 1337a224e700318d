package ansiballz

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrNotWrapper: the source is not an AnsiballZ wrapper of a format this
// package knows. Callers run such a source as it is (passthrough) and
// count it.
var ErrNotWrapper = errors.New("not an AnsiballZ wrapper")

// Format is the generation of Ansible's ANSIBALLZ_TEMPLATE.
type Format int

const (
	// Triple: ansible-core up to 2.15, `ZIPDATA = """…"""` and
	// `ANSIBALLZ_PARAMS = '…'` inside `def _ansiballz_main():`.
	Triple Format = iota + 1
	// Repr: 2.16 to 2.18, the same with `ZIPDATA = '…'`.
	Repr
	// Call: 2.19 on, `_ansiballz_main(…)` called with keyword arguments
	// one per line (`zip_data='…'`, `params='…'`, `module_fqn='…'`,
	// `profile='…'`), modules run by _ansiballz._loader.run_module.
	Call
)

func (f Format) String() string {
	switch f {
	case Triple:
		return "2.14-2.15"
	case Repr:
		return "2.16-2.18"
	case Call:
		return "2.19+"
	}
	return "unknown"
}

// Kind is what one line of a wrapper holds, for Line.
type Kind int

const (
	Other    Kind = iota
	Marker        // _ANSIBALLZ_WRAPPER = True
	ZipData       // the base64 zip literal
	FQN           // the module's fully qualified name
	Params        // the module parameters' literal (a Python str repr)
	Profile       // 2.19+: the serialization profile
	DateTime      // the task's start time: 2.19+'s datetime.datetime(…) call, before a tuple
)

// Line classifies one line of a wrapper (without its newline) and returns
// what it holds: for ZipData the base64 text, for FQN and Profile the
// name, for Params the Python string literal (quotes included) as Ansible
// wrote it, and what follows it on the line, for DateTime the
// datetime.datetime(…) expression. It is the one place that knows the
// lines of every format.
func Line(line []byte) (Kind, []byte, Format) {
	t := bytes.TrimLeft(line, " ")
	indented := len(t) < len(line)
	switch {
	case !indented && bytes.HasPrefix(t, []byte("_ANSIBALLZ_WRAPPER = True")):
		return Marker, nil, 0
	case indented && bytes.HasPrefix(t, []byte(`ZIPDATA = """`)):
		if v, ok := quoted(t[len(`ZIPDATA = `):], `"""`, false); ok {
			return ZipData, v, Triple
		}
	case indented && bytes.HasPrefix(t, []byte(`ZIPDATA = '`)):
		if v, ok := quoted(t[len(`ZIPDATA = `):], `'`, false); ok {
			return ZipData, v, Repr
		}
	case !indented && bytes.HasPrefix(t, []byte(`zip_data='`)):
		if v, ok := quoted(t[len(`zip_data=`):], `'`, true); ok {
			return ZipData, v, Call
		}
	case indented && bytes.HasPrefix(t, []byte("ANSIBALLZ_PARAMS = '")):
		return Params, t[len("ANSIBALLZ_PARAMS = "):], 0
	case !indented && bytes.HasPrefix(t, []byte("params='")):
		return Params, bytes.TrimSuffix(bytes.TrimRight(t[len("params="):], " \t\r"), []byte(",")), Call
	case !indented && bytes.HasPrefix(t, []byte("module_fqn='")):
		if v, ok := quoted(t[len("module_fqn="):], `'`, true); ok && dotted(v) {
			return FQN, v, Call
		}
	case !indented && bytes.HasPrefix(t, []byte("profile='")):
		if v, ok := quoted(t[len("profile="):], `'`, true); ok {
			return Profile, v, Call
		}
	case !indented && bytes.HasPrefix(t, []byte(dateTimeArg)):
		if v := t[len("date_time=") : len(t)-1]; bytes.HasSuffix(t, []byte("),")) && dateTimeCall(v) {
			return DateTime, v, Call
		}
	case indented && bytes.HasPrefix(t, []byte(dateTimeTuple)):
		// Before 2.19: sitecustomize.py's zip entry's time, which the
		// template's shape would otherwise change with every second.
		if v := t[len(dateTimeTuple)-1:]; bytes.HasSuffix(v, []byte(")")) && intsOnly(v[1:len(v)-1]) {
			return DateTime, v, 0
		}
	case indented && bytes.Contains(t, []byte("_module_fqn='")):
		// runpy.run_module(..., init_globals=dict(_module_fqn='X', ...
		rest := t[bytes.Index(t, []byte("_module_fqn='"))+len("_module_fqn='"):]
		if j := bytes.IndexByte(rest, '\''); j > 0 && dotted(rest[:j]) {
			return FQN, rest[:j], 0
		}
	}
	return Other, nil, 0
}

// dateTimeArg starts 2.19+'s date_time argument line; dateTimeTuple the
// line of earlier versions that sets the time of sitecustomize.py's zip
// entry (2.14: "( 2026, 1, 2, 3, 4, 5)", 2.16: "(2026, 1, 2, 3, 4, 5)").
const (
	dateTimeArg   = "date_time=datetime.datetime("
	dateTimeTuple = "zinfo.date_time = ("
)

// intsOnly reports whether v holds only digits, commas and spaces, and a
// digit.
func intsOnly(v []byte) bool {
	digit := false
	for _, c := range v {
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c != ',' && c != ' ':
			return false
		}
	}
	return digit
}

// dateTimeCall reports whether v is datetime.datetime(N, …,
// tzinfo=datetime.timezone.utc) with integer arguments only, as Ansible
// writes the task's start time.
func dateTimeCall(v []byte) bool {
	const head, tail = "datetime.datetime(", ", tzinfo=datetime.timezone.utc)"
	return bytes.HasPrefix(v, []byte(head)) && bytes.HasSuffix(v, []byte(tail)) && len(v) > len(head)+len(tail) &&
		intsOnly(v[len(head):len(v)-len(tail)])
}

// payloadLines are the lines of every format's wrapper that write its
// zip to a temp dir, append sitecustomize.py to it, and remove the dir,
// in the order of agent.py's PAYLOAD_LINES: an interpreter that has the
// zip on disk already runs the wrapper with each replaced. After its
// indentation (spaces), a line is one of them if it is one of exact, or
// starts with one of prefixes, is longer and ends with ")".
var payloadLines = [...]struct{ exact, prefixes []string }{
	{exact: []string{"z = zipfile.ZipFile(modlib_path, mode='a')"}},
	{exact: []string{"z.writestr(zinfo, sitecustomize)"}},
	{exact: []string{"z.close()"}},
	{prefixes: []string{"temp_path = tempfile.mkdtemp(prefix=", "temp_path = os.path.realpath(tempfile.mkdtemp(prefix="}},
	{prefixes: []string{"zipped_mod = os.path.join(temp_path, "}},
	{exact: []string{"with open(zipped_mod, 'wb') as modlib:"}},
	{exact: []string{"shutil.rmtree(temp_path)", "shutil.rmtree(temp_path, ignore_errors=True)"}},
}

// payloadLine returns the index in payloadLines of line, or -1.
func payloadLine(line []byte) int {
	body := bytes.TrimLeft(line, " ")
	if len(body) == len(line) || len(body) == 0 {
		return -1
	}
	for i, p := range payloadLines {
		for _, e := range p.exact {
			if string(body) == e {
				return i
			}
		}
		for _, pre := range p.prefixes {
			if len(body) > len(pre) && bytes.HasPrefix(body, []byte(pre)) && body[len(body)-1] == ')' {
				return i
			}
		}
	}
	return -1
}

// payloadName returns the module name a line gives the payload's file
// names ("ping", "ansible.builtin.ping": a collection's name has dots): `ansible_module='NAME',` (2.19+), or mkdtemp's
// `prefix='ansible_NAME_payload_'` (2.14) or `prefix='ansible_' + 'NAME'
// + '_payload_'` (2.16-2.18) in it; else "".
func payloadName(line []byte) string {
	if v, ok := bytes.CutPrefix(line, []byte("ansible_module='")); ok {
		if name, ok := bytes.CutSuffix(v, []byte("',")); ok && plainName(name) {
			return string(name)
		}
	}
	const prefix, plus, tail = "prefix='ansible_", "' + '", "_payload_'"
	for rest := line; ; {
		i := bytes.Index(rest, []byte(prefix))
		if i < 0 {
			return ""
		}
		rest = rest[i+len(prefix):]
		v := bytes.TrimPrefix(rest, []byte(plus))
		n := 0
		for n < len(v) && nameByte(v[n]) {
			n++
		}
		switch after := v[n:]; {
		case n > 0 && bytes.HasPrefix(after, []byte(plus+tail)):
			return string(v[:n])
		case bytes.HasPrefix(after, []byte("'")) && n > len(tail)-1 && string(v[n-len(tail)+1:n]) == tail[:len(tail)-1]:
			return string(v[:n-len(tail)+1])
		}
	}
}

// plainName reports whether name is [A-Za-z0-9_.]+.
func plainName(name []byte) bool {
	for _, c := range name {
		if !nameByte(c) {
			return false
		}
	}
	return len(name) > 0
}

func nameByte(c byte) bool {
	return c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// quoted returns the text between q and q at the start of s, which must be
// all that is on the line (a trailing comma allowed when comma). The text
// may not contain a quote or backslash: zips are base64, names plain.
func quoted(s []byte, q string, comma bool) ([]byte, bool) {
	if !bytes.HasPrefix(s, []byte(q)) {
		return nil, false
	}
	s = s[len(q):]
	end := bytes.Index(s, []byte(q))
	if end < 0 || hasQuoteOrBackslash(s[:end]) {
		return nil, false
	}
	rest := bytes.TrimRight(s[end+len(q):], " \t\r")
	if comma {
		rest = bytes.TrimPrefix(rest, []byte(","))
	}
	if len(rest) != 0 {
		return nil, false
	}
	return s[:end], true
}

// hasQuoteOrBackslash is bytes.ContainsAny(b, `'"\`), an order of
// magnitude quicker on a 140 KB zip literal (ContainsAny goes byte by
// byte; IndexByte does not).
func hasQuoteOrBackslash(b []byte) bool {
	return bytes.IndexByte(b, '\'') >= 0 || bytes.IndexByte(b, '"') >= 0 || bytes.IndexByte(b, '\\') >= 0
}

// dotted reports whether name looks like a Python module path.
func dotted(name []byte) bool {
	if len(name) == 0 {
		return false
	}
	for _, c := range name {
		if !(c == '.' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Wrapper is an AnsiballZ wrapper taken apart: the one value the bridge
// passes from the route that read it to the journal, its own checks, the
// interpreter client and the agent. Offsets index Src. A Wrapper is not
// safe for concurrent use.
type Wrapper struct {
	// Src is the wrapper as Ansible generated it. It is not copied: the
	// Wrapper shares it with the caller of Parse.
	Src    []byte
	Format Format
	// ZipStart, ZipEnd: the base64 text of the module zip, between its
	// quotes. Everything else varies from task to task only in the
	// parameters and date_time.
	ZipStart, ZipEnd int
	// ParamsStart, ParamsEnd: the parameters' Python string literal,
	// quotes included.
	ParamsStart, ParamsEnd int
	// DateTimeStart, DateTimeEnd: the task's start time: 2.19+'s
	// date_time argument, the datetime.datetime(…) expression, or before
	// 2.19 the tuple sitecustomize.py's zip entry gets; both 0 when there
	// is none.
	DateTimeStart, DateTimeEnd int
	// ModuleFQN is the module the wrapper runs, e.g. ansible.modules.ping.
	ModuleFQN string
	// Profile is 2.19+'s serialization profile ("legacy", ...), else "".
	Profile string
	// PayloadName is the module's name in the file names of the
	// wrapper's payload (ansible_NAME_payload.zip) where the wrapper
	// writes it as a plain name (2.14 in mkdtemp's prefix, 2.16-2.18 as a
	// literal of its own there, 2.19+ as the ansible_module argument),
	// else "" (a collection's module, ansible.legacy.command).
	PayloadName string
	// Payload holds the spans (indentation left out, to the end of the
	// line) of the lines in which the wrapper writes its zip to a temp
	// dir, appends sitecustomize.py to it and removes the dir, in the
	// order of agent.py's PAYLOAD_LINES; nil unless each is there exactly
	// once.
	Payload [][2]int

	params    []byte // decoded, once Params was called
	paramsErr error
	decoded   bool
}

// Zip returns the base64 text of the module zip.
func (w *Wrapper) Zip() []byte { return w.Src[w.ZipStart:w.ZipEnd] }

// ParamsLiteral returns the parameters' Python string literal as written.
func (w *Wrapper) ParamsLiteral() []byte { return w.Src[w.ParamsStart:w.ParamsEnd] }

// Params returns the module parameters: the JSON Ansible serialized,
// decoded from their literal the first time and kept (Forget overwrites
// it). The caller must not modify it.
func (w *Wrapper) Params() ([]byte, error) {
	if !w.decoded {
		w.params, w.paramsErr = PyString(w.ParamsLiteral())
		w.decoded = true
	}
	return w.params, w.paramsErr
}

// PlainArgs reports whether the parameters say, readably, that the task
// is not no_log (Ansible's _ansible_no_log, false).
func (w *Wrapper) PlainArgs() bool {
	p, err := w.Params()
	if err != nil {
		return false
	}
	var top struct {
		Args struct {
			NoLog any `json:"_ansible_no_log"`
		} `json:"ANSIBLE_MODULE_ARGS"`
	}
	return json.Unmarshal(p, &top) == nil && top.Args.NoLog == false
}

// IsAsyncStatus reports whether a module's name is async_status's, whose
// result is another task's, no_log or not.
func IsAsyncStatus(fqn string) bool {
	return fqn == "async_status" || strings.HasSuffix(fqn, ".async_status")
}

// Forget overwrites the decoded parameters once the task has run: they
// may be a no_log task's.
func (w *Wrapper) Forget() {
	clear(w.params)
	w.params, w.paramsErr, w.decoded = nil, errLiteral, true
}

// Wipe is Forget, and overwrites the parameters' literal in Src too, for
// a source nothing else keeps (a piped wrapper). The rest of Src, the
// module's zip, may be shared.
func (w *Wrapper) Wipe() {
	w.Forget()
	clear(w.Src[w.ParamsStart:w.ParamsEnd])
}

// Template is a wrapper with its zip's base64 text replaced by a marker:
// the shape an interpreter compiles once per zip and fills in per task.
// Offsets index Src.
type Template struct {
	Src []byte
	// Params and DateTime are the parameters' literal and the date_time
	// expression (both 0 when there is none).
	Params, DateTime [2]int
	// Payload is Wrapper.Payload.
	Payload [][2]int
}

// Template returns a copy of Src with the zip's base64 text replaced by
// marker, and the offsets in it of what varies from task to task.
func (w *Wrapper) Template(marker string) Template {
	tpl := make([]byte, 0, len(w.Src)-(w.ZipEnd-w.ZipStart)+len(marker))
	tpl = append(tpl, w.Src[:w.ZipStart]...)
	tpl = append(tpl, marker...)
	tpl = append(tpl, w.Src[w.ZipEnd:]...)
	shift := len(marker) - (w.ZipEnd - w.ZipStart)
	at := func(span [2]int) [2]int {
		if span[0] >= w.ZipEnd {
			return [2]int{span[0] + shift, span[1] + shift}
		}
		return span
	}
	t := Template{Src: tpl, Params: at([2]int{w.ParamsStart, w.ParamsEnd})}
	if w.DateTimeEnd > 0 {
		t.DateTime = at([2]int{w.DateTimeStart, w.DateTimeEnd})
	}
	for _, p := range w.Payload {
		t.Payload = append(t.Payload, at(p))
	}
	return t
}

// Parse takes apart a wrapper of any format from ansible-core 2.14 to
// 2.22. An error wraps ErrNotWrapper and says what is missing, which
// callers report (e.g. in `ansible-bridge status`) when they fall back.
func Parse(src []byte) (*Wrapper, error) {
	w := &Wrapper{Src: src}
	marked, params := false, false
	var payloads [len(payloadLines)]int
	var payload [len(payloadLines)][2]int
	var zipFormat, callFormat Format
	for off, n := 0, 0; off < len(src); n++ {
		end := bytes.IndexByte(src[off:], '\n')
		if end < 0 {
			end = len(src) - off
		}
		line := src[off : off+end]
		kind, v, f := Line(line)
		// v is a slice of line, which ends where src does: their
		// capacities differ by v's offset in line.
		vOff := off + cap(line) - cap(v)
		switch kind {
		case Marker:
			marked = true
		case ZipData:
			if zipFormat != 0 {
				return nil, fmt.Errorf("%w: two zip literals", ErrNotWrapper)
			}
			zipFormat = f
			w.ZipStart, w.ZipEnd = vOff, vOff+len(v)
		case FQN:
			if w.ModuleFQN == "" {
				w.ModuleFQN = string(v)
			}
		case Params:
			if !params {
				n := literalLen(v)
				if n < 0 {
					n = len(v) // as written: Params reports the error
				}
				params = true
				w.ParamsStart, w.ParamsEnd = vOff, vOff+n
			}
		case Profile:
			w.Profile = string(v)
		case DateTime:
			if w.DateTimeEnd == 0 {
				w.DateTimeStart, w.DateTimeEnd = vOff, vOff+len(v)
			}
		}
		if f == Call {
			callFormat = Call
		}
		if kind != ZipData { // the zip's line is long, and only base64
			if w.PayloadName == "" {
				w.PayloadName = payloadName(line)
			}
			if k := payloadLine(line); k >= 0 {
				payloads[k]++
				indent := len(line) - len(bytes.TrimLeft(line, " "))
				payload[k] = [2]int{off + indent, off + len(line)}
			}
		}
		if !marked && n >= 16 {
			return nil, fmt.Errorf("%w: no _ANSIBALLZ_WRAPPER marker", ErrNotWrapper)
		}
		off += end + 1
	}
	switch {
	case !marked:
		return nil, fmt.Errorf("%w: no _ANSIBALLZ_WRAPPER marker", ErrNotWrapper)
	case zipFormat == 0:
		return nil, fmt.Errorf("%w: no zip literal (unrecognised wrapper: a newer ansible-core?)", ErrNotWrapper)
	case w.ModuleFQN == "":
		return nil, fmt.Errorf("%w: no module name", ErrNotWrapper)
	case !params:
		return nil, fmt.Errorf("%w: no module parameters", ErrNotWrapper)
	case (zipFormat == Call) != (callFormat == Call && w.Profile != ""):
		return nil, fmt.Errorf("%w: mixed wrapper formats", ErrNotWrapper)
	}
	w.Format = zipFormat
	for _, n := range payloads {
		if n != 1 {
			return w, nil
		}
	}
	w.Payload = payload[:]
	return w, nil
}

// Is reports whether src is a wrapper Parse takes apart.
func Is(src []byte) bool {
	_, err := Parse(src)
	return err == nil
}

var errLiteral = errors.New("not a Python string literal")

// literalLen returns the length of the quoted literal at the start of
// src, quotes included (escapes are skipped, not decoded), or -1.
func literalLen(src []byte) int {
	if len(src) < 2 || src[0] != '\'' && src[0] != '"' {
		return -1
	}
	for i := 1; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case src[0]:
			return i + 1
		}
	}
	return -1
}

// PyString decodes a Python 3 str literal (as repr writes it) at the start
// of src, followed by nothing but blanks or a comment, and returns its
// UTF-8 encoding.
func PyString(src []byte) ([]byte, error) {
	src = bytes.TrimRight(src, " \t\r")
	if len(src) < 2 || (src[0] != '\'' && src[0] != '"') {
		return nil, errLiteral
	}
	q := src[0]
	out := make([]byte, 0, len(src))
	i := 1
	for {
		if i >= len(src) {
			return nil, errLiteral
		}
		c := src[i]
		if c == q {
			i++
			break
		}
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(src) {
			return nil, errLiteral
		}
		e := src[i+1]
		i += 2
		switch e {
		case '\\', '\'', '"':
			out = append(out, e)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'a':
			out = append(out, '\a')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'v':
			out = append(out, '\v')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n > len(src) {
				return nil, errLiteral
			}
			v, err := strconv.ParseUint(string(src[i:i+n]), 16, 32)
			if err != nil || v > utf8.MaxRune {
				return nil, errLiteral
			}
			out = utf8.AppendRune(out, rune(v))
			i += n
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i - 1
			for j < len(src) && j < i+2 && src[j] >= '0' && src[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(string(src[i-1:j]), 8, 32)
			out = utf8.AppendRune(out, rune(v))
			i = j
		default:
			out = append(out, '\\', e) // Python keeps unknown escapes
		}
	}
	rest := bytes.TrimLeft(src[i:], " \t")
	if len(rest) > 0 && rest[0] != '#' {
		return nil, errLiteral
	}
	return out, nil
}
