package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// What the scanner looks for in Ansible's ANSIBALLZ_TEMPLATE
// (ansible/executor/module_common.py, 2.x):
//
//	_ANSIBALLZ_WRAPPER = True # For test-module.py ...     (line 3)
//	    runpy.run_module(mod_name='ansible.modules.ping', init_globals=dict(_module_fqn='ansible.modules.ping', ...
//	    ANSIBALLZ_PARAMS = '{"ANSIBLE_MODULE_ARGS": {...}}'  (repr of json.dumps)
var (
	wrapperMarker = []byte("_ANSIBALLZ_WRAPPER = True")
	fqnKey        = []byte("_module_fqn='")
	paramsKey     = []byte("ANSIBALLZ_PARAMS = ")
)

const (
	// markerLines and markerBytes bound where the wrapper marker must
	// appear; past them the stream is taken as something else and no
	// longer scanned.
	markerLines = 8
	markerBytes = 16 << 10
	// maxLine is how much of an ordinary line the scanner keeps; longer
	// lines (the ZIPDATA literal) are skipped.
	maxLine = 4 << 10
	// maxParams bounds the ANSIBALLZ_PARAMS line.
	maxParams = 1 << 20
	// headLen is how much of a line tells whether it is the params
	// line: indentation and paramsKey.
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
	return s.result()
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
	if bytes.HasPrefix(bytes.TrimLeft(s.line, " \t"), paramsKey) {
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
	if !s.marked {
		if bytes.HasPrefix(line, wrapperMarker) {
			s.marked = true
		} else if s.lines >= markerLines {
			s.stopped = true
		}
		return
	}
	if s.fqn == "" {
		if i := bytes.Index(line, fqnKey); i >= 0 {
			rest := line[i+len(fqnKey):]
			if j := bytes.IndexByte(rest, '\''); j > 0 {
				s.fqn = string(rest[:j])
			}
		}
	}
	if s.params == nil {
		if t := bytes.TrimLeft(line, " \t"); bytes.HasPrefix(t, paramsKey) {
			s.params = bytes.Clone(t[len(paramsKey):])
		}
	}
	if s.fqn != "" && s.params != nil {
		s.stopped = true
		s.line = nil
	}
}

// close ends the stream: a last line without a newline counts.
func (s *wrapperScanner) close() {
	if !s.stopped && (len(s.line) > 0 || s.overflow) {
		s.endLine()
	}
	s.stopped = true
	s.line = nil
}

// result decodes what was found.
func (s *wrapperScanner) result() (string, json.RawMessage, bool) {
	if !s.marked || s.fqn == "" || s.params == nil {
		return "", nil, false
	}
	lit, err := pyStringLiteral(s.params)
	if err != nil {
		return "", nil, false
	}
	var top struct {
		Args json.RawMessage `json:"ANSIBLE_MODULE_ARGS"`
	}
	if err := json.Unmarshal(lit, &top); err != nil || len(top.Args) == 0 {
		return "", nil, false
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, top.Args, "", "  "); err != nil {
		return "", nil, false
	}
	return s.fqn, json.RawMessage(buf.Bytes()), true
}

var errLiteral = errors.New("not a Python string literal")

// pyStringLiteral decodes a Python 3 str literal (as repr writes it) at
// the start of src, followed by nothing but blanks or a comment, and
// returns its UTF-8 encoding.
func pyStringLiteral(src []byte) ([]byte, error) {
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
