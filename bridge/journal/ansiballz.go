package journal

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/interp/ansiballz"
)

const (
	// markerLines and markerBytes bound where the wrapper marker must
	// appear; past them the stream is taken as something else and no
	// longer scanned.
	markerLines = 16
	markerBytes = 16 << 10
	// maxLine is how much of an ordinary line the scanner keeps; longer
	// lines (the ZIPDATA literal) are skipped.
	maxLine = 4 << 10
	// maxParams bounds the ANSIBALLZ_PARAMS line.
	maxParams = 1 << 20
	// headLen is how much of a line tells whether it is the params
	// line (ansiballz.Line).
	headLen = 64
)

// DecodeAnsiballZ picks the module and its arguments out of an AnsiballZ
// wrapper as Ansible generated it: module is the module's fully
// qualified name (e.g. ansible.modules.ping), args the
// ANSIBLE_MODULE_ARGS object, pretty-printed with two-space indents. ok
// is false when src is not such a wrapper.
func DecodeAnsiballZ(src []byte) (module string, args json.RawMessage, ok bool) {
	var s wrapperScanner
	s.write(src)
	s.close()
	f := s.result()
	return f.module, f.args, f.ok
}

// wrapperScanner finds an AnsiballZ wrapper's module and arguments in a
// stream, keeping a bounded amount of it.
type wrapperScanner struct {
	line     []byte // the current line, or its beginning
	overflow bool   // the current line is longer than kept
	lines    int    // complete lines seen
	n        int64  // bytes seen
	marked   bool   // the wrapper marker was seen
	stopped  bool   // done, or not a wrapper
	fqn      string
	params   []byte // the ANSIBALLZ_PARAMS literal's line
}

func (s *wrapperScanner) write(p []byte) {
	for len(p) > 0 && !s.stopped {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		s.n += int64(len(chunk))
		s.add(chunk)
		if i < 0 {
			break
		}
		s.n++
		p = p[i+1:]
		s.endLine()
	}
	if !s.marked && !s.stopped && s.n > markerBytes {
		s.stopped = true
	}
}

// add appends part of the current line, within the line's limit.
func (s *wrapperScanner) add(chunk []byte) {
	if s.overflow {
		return
	}
	// Take enough of the line to tell the params line from the others.
	if n := min(len(chunk), max(0, headLen-len(s.line))); n > 0 {
		s.line = append(s.line, chunk[:n]...)
		chunk = chunk[n:]
	}
	limit := maxLine
	if k, _, _ := ansiballz.Line(s.line); k == ansiballz.Params {
		limit = maxParams
	}
	if len(s.line)+len(chunk) > limit {
		s.overflow = true
		s.line = s.line[:0]
		return
	}
	s.line = append(s.line, chunk...)
}

func (s *wrapperScanner) endLine() {
	line := s.line
	overflow := s.overflow
	s.line, s.overflow = s.line[:0], false
	s.lines++
	if overflow {
		return
	}
	kind, v, _ := ansiballz.Line(line)
	if !s.marked {
		if kind == ansiballz.Marker {
			s.marked = true
		} else if s.lines >= markerLines {
			s.stopped = true
		}
		return
	}
	switch {
	case kind == ansiballz.FQN && s.fqn == "":
		s.fqn = string(v)
	case kind == ansiballz.Params && s.params == nil:
		s.params = bytes.Clone(v)
	}
	if s.fqn != "" && s.params != nil {
		s.stopped = true
		s.dropLine()
	}
}

// close ends the stream: a last line without a newline counts.
func (s *wrapperScanner) close() {
	if !s.stopped && (len(s.line) > 0 || s.overflow) {
		s.endLine()
	}
	s.stopped = true
	s.dropLine()
}

// dropLine overwrites and drops the line buffer (the params line passed
// through it).
func (s *wrapperScanner) dropLine() {
	clear(s.line[:cap(s.line)])
	s.line = nil
}

// found is what a wrapperScanner found: the module and its arguments;
// for a module run with no_log, args is nil and noLog set. ok is false
// when they cannot be read.
type found struct {
	module    string
	args      json.RawMessage
	noLog, ok bool
}

// result decodes what was found. The scanner's buffers are overwritten:
// it is done.
func (s *wrapperScanner) result() found {
	defer s.wipe()
	if !s.marked || s.fqn == "" || s.params == nil {
		return found{}
	}
	lit, err := ansiballz.PyString(s.params)
	defer clear(lit)
	if err != nil {
		return found{}
	}
	args, noLog, ok := moduleArgs(lit)
	if !ok {
		return found{}
	}
	return found{module: s.fqn, args: args, noLog: noLog, ok: true}
}

// moduleArgs picks the ANSIBLE_MODULE_ARGS object out of a wrapper's
// parameters (the JSON Ansible serialized), pretty-printed with two-space
// indents; for a module run with no_log, args is nil and noLog set. ok is
// false when they cannot be read.
func moduleArgs(params []byte) (args json.RawMessage, noLog, ok bool) {
	var top struct {
		Args json.RawMessage `json:"ANSIBLE_MODULE_ARGS"`
	}
	err := json.Unmarshal(params, &top)
	defer clear(top.Args)
	if err != nil || len(top.Args) == 0 {
		return nil, false, false
	}
	var flags struct {
		NoLog any `json:"_ansible_no_log"`
	}
	if err := json.Unmarshal(top.Args, &flags); err != nil {
		return nil, false, false
	}
	if isTrue(flags.NoLog) {
		return nil, true, true
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, top.Args, "", "  "); err != nil {
		return nil, false, false
	}
	return json.RawMessage(buf.Bytes()), false, true
}

// isTrue reads a boolean as Ansible's module_utils boolean() does.
func isTrue(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case float64:
		return v == 1
	case string:
		switch strings.ToLower(v) {
		case "y", "yes", "on", "1", "true", "t":
			return true
		}
	}
	return false
}

// wipe overwrites what the scanner kept of the stream.
func (s *wrapperScanner) wipe() {
	s.dropLine()
	clear(s.params)
	s.params = nil
}

// noLogMask is what AnsibleModule puts in its result's
// invocation.module_args for a parameter its argument_spec marks no_log.
const noLogMask = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"

// newSecretsKey is where ansible-core 2.22 and later list, in a module's
// result, the values it registered as secrets (its no_log parameters'),
// instead of returning a masked invocation.
const newSecretsKey = "_ansible_new_secrets"

// maskedArgs returns the values that the module's result in out says
// are secrets: those of args (a module's arguments, JSON) that its
// invocation masks as no_log parameters, and those it lists in
// _ansible_new_secrets. A value that was sent as a number or a boolean
// (which the module masked once converted to a string) is returned as
// its JSON text, as it stands in args and in the wrapper. Ansible reads
// its result from the first line that starts with "{".
func maskedArgs(args json.RawMessage, out []byte) [][]byte {
	if !bytes.Contains(out, []byte(noLogMask)) && !bytes.Contains(out, []byte(newSecretsKey)) {
		return nil // most results: nothing masked, nothing to decode
	}
	i := bytes.Index(out, []byte("\n{"))
	switch {
	case bytes.HasPrefix(out, []byte("{")):
		i = 0
	case i < 0:
		return nil
	default:
		i++
	}
	var res struct {
		Invocation struct {
			ModuleArgs any `json:"module_args"`
		} `json:"invocation"`
		NewSecrets []any `json:"_ansible_new_secrets"`
	}
	dec := json.NewDecoder(bytes.NewReader(out[i:]))
	dec.UseNumber()
	if dec.Decode(&res) != nil {
		return nil
	}
	var found [][]byte
	for _, v := range res.NewSecrets {
		found = appendScalars(found, v)
	}
	if res.Invocation.ModuleArgs == nil || len(args) == 0 {
		return found
	}
	var sent any
	dec = json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if dec.Decode(&sent) != nil {
		return found
	}
	var walk func(sent, shown any)
	walk = func(sent, shown any) {
		switch shown := shown.(type) {
		case string:
			if shown == noLogMask {
				// A string option given a dict or a list masks the
				// string it made of it: its values stand in args.
				found = appendScalars(found, sent)
			}
		case map[string]any:
			if m, ok := sent.(map[string]any); ok {
				for k, v := range shown {
					walk(m[k], v)
				}
			}
		case []any:
			if l, ok := sent.([]any); ok {
				for i := range min(len(l), len(shown)) {
					walk(l[i], shown[i])
				}
			}
		}
	}
	walk(sent, res.Invocation.ModuleArgs)
	return found
}

// appendScalars appends the non-empty strings and the numbers in v
// (decoded with UseNumber), as their text in JSON: a string's content, a
// number's literal. Booleans are not secrets, as Ansible's own
// list_no_log_values has it: "true" masked everywhere would hide much.
func appendScalars(found [][]byte, v any) [][]byte {
	switch v := v.(type) {
	case string:
		if v != "" {
			found = append(found, []byte(v))
		}
	case json.Number:
		found = append(found, []byte(v.String()))
	case map[string]any:
		for _, x := range v {
			found = appendScalars(found, x)
		}
	case []any:
		for _, x := range v {
			found = appendScalars(found, x)
		}
	}
	return found
}

// hasResult reports whether out holds a module result as Ansible reads
// it: from the first line that starts with "{" to the last that ends
// with "}", one JSON value.
func hasResult(out []byte) bool {
	i := bytes.Index(out, []byte("\n{"))
	switch {
	case bytes.HasPrefix(out, []byte("{")):
		i = 0
	case i < 0:
		return false
	default:
		i++
	}
	end := i
	for rest := out[i:]; len(rest) > 0; {
		line, next, _ := bytes.Cut(rest, []byte("\n"))
		if bytes.HasSuffix(bytes.TrimRight(line, " \t\r"), []byte("}")) {
			end = len(out) - len(rest) + len(line)
		}
		rest = next
	}
	return end > i && json.Valid(out[i:end])
}

// argNames returns args (a module's arguments, JSON) with every value
// but objects' and lists' replaced by null, Ansible's own (_ansible_*)
// kept: what the journal shows of a module that left no result to say
// which are its no_log parameters.
func argNames(args json.RawMessage) json.RawMessage {
	var top map[string]any
	if json.Unmarshal(args, &top) != nil {
		return nil
	}
	var blank func(any) any
	blank = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				v[k] = blank(x)
			}
			return v
		case []any:
			for i, x := range v {
				v[i] = blank(x)
			}
			return v
		}
		return nil
	}
	for k, v := range top {
		if !strings.HasPrefix(k, "_ansible_") {
			top[k] = blank(v)
		}
	}
	out, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		return nil
	}
	return out
}
