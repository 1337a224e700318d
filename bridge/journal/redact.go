package journal

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sort"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Mask replaces each secret in what the journal returns.
const Mask = "********"

// A Redactor replaces registered secrets with Mask. The zero value is
// ready to use and has no secrets; it is safe for concurrent use.
//
// It does not keep the secrets: only, for each form of each secret, its
// length, 32 bits of a rolling hash with a random base (to find
// candidates in one pass) and an HMAC-SHA256 under a random key (to
// confirm them). Both keys are the daemon's own and never leave it.
type Redactor struct {
	mu     sync.RWMutex
	key    []byte // the HMAC key, made on the first Add
	base   uint64 // the rolling hash's base (odd), made with key
	byLen  map[int]*lenSet
	lens   []int // the keys of byLen, longest first
	maxLen int
	gen    uint64 // bumped when a form is added
}

// lenSet holds the forms of one length.
type lenSet struct {
	pow  uint64                // base^n, to drop a byte from the rolling hash
	sums map[uint32][][32]byte // rolling hash's top bits → HMACs
}

// Add registers a secret. Empty ones are ignored. Besides the secret
// itself, Add registers the forms it takes inside JSON strings (as
// Python's json.dumps writes them) and inside a Python string literal
// holding such JSON (an AnsiballZ wrapper's ANSIBALLZ_PARAMS). The
// Redactor keeps no copy: the caller may overwrite secret afterwards.
func (r *Redactor) Add(secret []byte) {
	if len(secret) == 0 {
		return
	}
	js := jsonEscape(secret)
	py := pyEscape(js)
	defer wipe(js)
	defer wipe(py)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.key == nil {
		r.key = make([]byte, 32)
		_, _ = rand.Read(r.key)
		var b [8]byte
		_, _ = rand.Read(b[:])
		r.base = binary.LittleEndian.Uint64(b[:]) | 1
		r.byLen = map[int]*lenSet{}
	}
	for _, form := range [][]byte{secret, js, py} {
		r.addForm(form)
	}
}

// addForm registers one form; r.mu is held.
func (r *Redactor) addForm(form []byte) {
	n := len(form)
	set := r.byLen[n]
	if set == nil {
		set = &lenSet{pow: 1, sums: map[uint32][][32]byte{}}
		for range n {
			set.pow *= r.base
		}
		r.byLen[n] = set
		r.lens = append(r.lens, n)
		sort.Sort(sort.Reverse(sort.IntSlice(r.lens)))
		r.maxLen = max(r.maxLen, n)
	}
	h := rollTop(r.roll(form))
	sum := r.mac(form)
	for _, s := range set.sums[h] {
		if s == sum {
			return
		}
	}
	set.sums[h] = append(set.sums[h], sum)
	r.gen++
}

func (r *Redactor) roll(b []byte) uint64 {
	var h uint64
	for _, c := range b {
		h = h*r.base + uint64(c)
	}
	return h
}

// rollTop keeps 32 bits of a rolling hash: enough to skip almost every
// window, too few to tell a secret from the many strings sharing them.
func rollTop(h uint64) uint32 { return uint32(h >> 32) }

func (r *Redactor) mac(b []byte) [32]byte {
	m := hmac.New(sha256.New, r.key)
	m.Write(b)
	var sum [32]byte
	m.Sum(sum[:0])
	// The hash keeps b's last block until it is collected: a block of
	// zeros overwrites it now.
	m.Write(zeroBlock[:])
	return sum
}

var zeroBlock [sha256.BlockSize]byte

// reset forgets every secret and the keys, as the zero value.
func (r *Redactor) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.key)
	for _, set := range r.byLen {
		for h, sums := range set.sums {
			clear(sums)
			delete(set.sums, h)
		}
	}
	r.key, r.base, r.byLen, r.lens, r.maxLen = nil, 0, nil, nil, 0
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
	n := len(r.lens)
	r.mu.RUnlock()
	if n == 0 {
		return s
	}
	return string(r.redact([]byte(s), false))
}

type span struct{ from, to int }

// redact masks secrets in b; with cut set, b was cut short and its last
// bytes, which could begin a secret, are left out (the Redactor cannot
// tell a secret's beginning: it keeps no secret).
func (r *Redactor) redact(b []byte, cut bool) []byte {
	if r == nil || len(b) == 0 {
		return b
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.lens) == 0 {
		return b
	}
	if cut {
		b = b[:max(0, len(b)-(r.maxLen-1))]
	}
	var spans []span
	for _, n := range r.lens {
		spans = r.find(b, n, r.byLen[n], spans)
	}
	return maskSpans(b, spans)
}

// find appends the spans of b that are forms of length n; r.mu is held.
func (r *Redactor) find(b []byte, n int, set *lenSet, spans []span) []span {
	if len(b) < n {
		return spans
	}
	h := r.roll(b[:n])
	for i := 0; ; i++ {
		if sums, ok := set.sums[rollTop(h)]; ok {
			sum := r.mac(b[i : i+n])
			for _, s := range sums {
				if hmac.Equal(s[:], sum[:]) {
					spans = append(spans, span{i, i + n})
					break
				}
			}
		}
		if i+n == len(b) {
			return spans
		}
		h = h*r.base + uint64(b[i+n]) - uint64(b[i])*set.pow
	}
}

// maskSpans replaces the spans of b by Mask, merging those that overlap
// or touch; b itself when there are none.
func maskSpans(b []byte, spans []span) []byte {
	if len(spans) == 0 {
		return b
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	out := make([]byte, 0, len(b))
	pos := 0
	for i := 0; i < len(spans); {
		from, to := spans[i].from, spans[i].to
		if from == to {
			i++
			continue
		}
		for i++; i < len(spans) && spans[i].from <= to; i++ {
			to = max(to, spans[i].to)
		}
		out = append(out, b[pos:from]...)
		out = append(out, Mask...)
		pos = to
	}
	return append(out, b[pos:]...)
}

// wipe overwrites b, a copy of a secret about to be dropped.
func wipe(b []byte) {
	clear(b)
}

// jsonEscape escapes s as Python's json.dumps does with its default
// ensure_ascii: the content of a JSON string, without quotes. Invalid
// UTF-8 is escaped as U+FFFD, as Python would not have produced it.
func jsonEscape(s []byte) []byte {
	// Sized for the worst case: no reallocation leaves a copy behind.
	out := make([]byte, 0, 6*len(s))
	for len(s) > 0 {
		c, size := utf8.DecodeRune(s)
		s = s[size:]
		switch {
		case c == '"':
			out = append(out, `\"`...)
		case c == '\\':
			out = append(out, `\\`...)
		case c == '\n':
			out = append(out, `\n`...)
		case c == '\r':
			out = append(out, `\r`...)
		case c == '\t':
			out = append(out, `\t`...)
		case c == '\b':
			out = append(out, `\b`...)
		case c == '\f':
			out = append(out, `\f`...)
		case c >= 0x20 && c < 0x7f:
			out = append(out, byte(c))
		case c > 0xffff:
			r1, r2 := utf16.EncodeRune(c)
			out = appendU(appendU(out, r1), r2)
		default:
			out = appendU(out, c)
		}
	}
	return out
}

// appendU appends \uXXXX (lower-case hex, as Python writes it).
func appendU(out []byte, c rune) []byte {
	const hex = "0123456789abcdef"
	return append(out, '\\', 'u', hex[c>>12&0xf], hex[c>>8&0xf], hex[c>>4&0xf], hex[c&0xf])
}

// pyEscape escapes ASCII s as Python's repr does inside single quotes,
// the quotes repr picks for JSON text (which always holds a '"').
func pyEscape(s []byte) []byte {
	out := make([]byte, 0, 2*len(s))
	for _, c := range s {
		if c == '\\' || c == '\'' {
			out = append(out, '\\')
		}
		out = append(out, c)
	}
	return out
}
