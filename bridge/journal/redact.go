package journal

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf16"
)

// Mask replaces each secret in what the journal returns.
const Mask = "********"

// A Redactor replaces registered secrets with Mask. The zero value is
// ready to use and has no secrets; it is safe for concurrent use.
type Redactor struct {
	mu      sync.RWMutex
	secrets map[string]bool
	pats    [][]byte // every form of every secret, longest first
	gen     uint64   // bumped when pats changes
}

// Add registers a secret. Empty strings are ignored. Besides the secret
// itself, Add registers the forms it takes inside JSON strings (as
// Python's json.dumps writes them) and inside a Python string literal
// holding such JSON (an AnsiballZ wrapper's ANSIBALLZ_PARAMS).
func (r *Redactor) Add(secret string) {
	if secret == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets[secret] {
		return
	}
	if r.secrets == nil {
		r.secrets = map[string]bool{}
	}
	r.secrets[secret] = true
	seen := map[string]bool{}
	for _, p := range r.pats {
		seen[string(p)] = true
	}
	js := jsonEscape(secret)
	for _, form := range []string{secret, js, pyEscape(js)} {
		if !seen[form] {
			seen[form] = true
			r.pats = append(r.pats, []byte(form))
		}
	}
	sort.SliceStable(r.pats, func(a, b int) bool { return len(r.pats[a]) > len(r.pats[b]) })
	r.gen++
}

// generation changes each time a secret is added.
func (r *Redactor) generation() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gen
}

// Redact returns b with every occurrence of a secret replaced by Mask.
// Occurrences that overlap are masked as one. When nothing matches, b
// itself is returned.
func (r *Redactor) Redact(b []byte) []byte {
	return r.redact(b, false)
}

// String is Redact for strings.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	r.mu.RLock()
	n := len(r.pats)
	r.mu.RUnlock()
	if n == 0 {
		return s
	}
	return string(r.redact([]byte(s), false))
}

// redact masks secrets in b; with cut set, b was cut short and a tail
// that is the beginning of a secret is masked too.
func (r *Redactor) redact(b []byte, cut bool) []byte {
	if r == nil || len(b) == 0 {
		return b
	}
	r.mu.RLock()
	pats := r.pats
	r.mu.RUnlock()
	if len(pats) == 0 {
		return b
	}
	type span struct{ from, to int }
	var spans []span
	for _, p := range pats {
		for off := 0; off < len(b); {
			i := bytes.Index(b[off:], p)
			if i < 0 {
				break
			}
			spans = append(spans, span{off + i, off + i + len(p)})
			off += i + 1
		}
		if cut {
			for k := min(len(p)-1, len(b)); k > 0; k-- {
				if bytes.HasSuffix(b, p[:k]) {
					spans = append(spans, span{len(b) - k, len(b)})
					break
				}
			}
		}
	}
	if len(spans) == 0 {
		return b
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	out := make([]byte, 0, len(b))
	pos := 0
	for i := 0; i < len(spans); {
		from, to := spans[i].from, spans[i].to
		for i++; i < len(spans) && spans[i].from <= to; i++ {
			to = max(to, spans[i].to)
		}
		out = append(out, b[pos:from]...)
		out = append(out, Mask...)
		pos = to
	}
	return append(out, b[pos:]...)
}

// jsonEscape escapes s as Python's json.dumps does with its default
// ensure_ascii: the content of a JSON string, without quotes.
func jsonEscape(s string) string {
	var sb strings.Builder
	for _, c := range s {
		switch {
		case c == '"':
			sb.WriteString(`\"`)
		case c == '\\':
			sb.WriteString(`\\`)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c == '\t':
			sb.WriteString(`\t`)
		case c == '\b':
			sb.WriteString(`\b`)
		case c == '\f':
			sb.WriteString(`\f`)
		case c >= 0x20 && c < 0x7f:
			sb.WriteRune(c)
		case c > 0xffff:
			r1, r2 := utf16.EncodeRune(c)
			fmt.Fprintf(&sb, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&sb, `\u%04x`, c)
		}
	}
	return sb.String()
}

// pyEscape escapes ASCII s as Python's repr does inside single quotes,
// the quotes repr picks for JSON text (which always holds a '"').
func pyEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}
