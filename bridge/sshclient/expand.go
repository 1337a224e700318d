package sshclient

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
)

// expandTilde replaces a leading "~" or "~user" like OpenSSH's
// tilde_expand_filename.
func expandTilde(p, home string) (string, error) {
	if !strings.HasPrefix(p, "~") {
		return p, nil
	}
	rest := p[1:]
	name, tail, _ := strings.Cut(rest, "/")
	dir := home
	if name != "" {
		u, err := user.Lookup(name)
		if err != nil {
			// error_f, then cleanup_exit(255): no fatal line.
			return "", &expandError{[]msgLine{errorLine("tilde_expand: No such user " + name)}}
		}
		dir = u.HomeDir
	}
	if tail == "" && !strings.Contains(rest, "/") {
		return dir, nil
	}
	return strings.TrimSuffix(dir, "/") + "/" + tail, nil
}

// tokens holds the values of OpenSSH's percent tokens for one connection.
type tokens map[byte]string

// expandError is a failed expansion: the lines ssh prints for it, each
// at its level (vdollar_percent_expand's error()s, then its caller's
// fatal()).
type expandError struct{ lines []msgLine }

func (e *expandError) Error() string {
	texts := make([]string, len(e.lines))
	for i, l := range e.lines {
		texts[i] = l.text
	}
	return strings.Join(texts, "\r\n")
}

// percentExpand expands %x tokens (only those in allowed) and, when
// dollar is set, ${VAR} references using env, as OpenSSH's
// vdollar_percent_expand: an unset variable is reported and expansion
// goes on (ssh.c's default_client_percent_dollar_expand then fails with
// "invalid environment variable expansion"); any other error ends it,
// and percent_expand or percent_dollar_expand fails. The error is an
// *expandError.
func percentExpand(s string, t tokens, allowed string, dollar bool, env func(string) (string, bool)) (string, error) {
	var b strings.Builder
	var lines []msgLine
	fail := func(msg string) error {
		caller := "percent_expand"
		if dollar {
			caller = "percent_dollar_expand"
		}
		return &expandError{append(lines, errorLine("vdollar_percent_expand: "+msg), fatalLine(caller+": failed"))}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if dollar && c == '$' && i+1 < len(s) && s[i+1] == '{' {
			rest := s[i+2:]
			end := strings.IndexByte(rest, '}')
			switch {
			case end < 0:
				return "", fail("environment variable '" + rest + "' missing closing '}'")
			case end == 0:
				return "", fail("zero-length environment variable")
			}
			name := rest[:end]
			if v, ok := env(name); ok {
				b.WriteString(v)
			} else {
				lines = append(lines, errorLine("vdollar_percent_expand: env var ${"+name+"} has no value"))
			}
			i += 2 + end
			continue
		}
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(s) {
			return "", fail("invalid format")
		}
		i++
		k := s[i]
		if k == '%' {
			b.WriteByte('%')
			continue
		}
		v, ok := t[k]
		if !ok || !strings.ContainsRune(allowed, rune(k)) {
			return "", fail(fmt.Sprintf("unknown key %%%c", k))
		}
		b.WriteString(v)
	}
	if lines != nil {
		return "", &expandError{append(lines, fatalLine("invalid environment variable expansion"))}
	}
	return b.String(), nil
}

// Token sets OpenSSH 9.2 accepts per keyword.
const (
	allTokens      = "CdhikLlnpru"
	proxyTokens    = "hnpr"
	hostnameTokens = "h"
)

// connTokens builds the token table for a resolved connection.
func connTokens(s *Settings) tokens {
	long, _ := os.Hostname()
	short, _, _ := strings.Cut(long, ".")
	port := fmt.Sprint(s.Port)
	sum := sha1.Sum([]byte(long + s.HostName + port + s.User))
	k := s.HostKeyAlias
	if k == "" {
		k = s.HostArg
	}
	return tokens{
		'C': hex.EncodeToString(sum[:]),
		'd': s.Env.Home,
		'h': s.HostName,
		'i': fmt.Sprint(os.Getuid()),
		'k': k,
		'L': short,
		'l': long,
		'n': s.HostArg,
		'p': port,
		'r': s.User,
		'u': s.Env.User,
	}
}

// lookup resolves ${VAR} over the shim's environment, or the
// daemon's own when the shim did not send one.
func (e Env) lookup(name string) (string, bool) {
	if e.Environ == nil {
		return os.LookupEnv(name)
	}
	for i := len(e.Environ) - 1; i >= 0; i-- {
		k, v, ok := strings.Cut(e.Environ[i], "=")
		if ok && k == name {
			return v, true
		}
	}
	return "", false
}

// abs resolves p against the shim's working directory, as OpenSSH opens
// relative paths from its own cwd.
func (e Env) abs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if e.Cwd == "" {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	return filepath.Join(e.Cwd, p)
}

// processOwn reports whether the local path p names the opening
// process's own descriptors, terminal or process (/dev/stdin, /dev/fd/N,
// /dev/tty, /proc/self, or a symlink to one): ssh opens its own, having
// closed every descriptor above stderr; the daemon would open its own.
// Symlinks are followed one at a time, never through /proc's, which
// would name the daemon's descriptors.
func processOwn(p string) bool {
	p = filepath.Clean(p)
	for range 40 {
		switch {
		case p == "/proc", strings.HasPrefix(p, "/proc/"), p == "/dev/fd", strings.HasPrefix(p, "/dev/fd/"),
			p == "/dev/tty", p == "/dev/stdin", p == "/dev/stdout", p == "/dev/stderr":
			return true
		}
		next, ok := firstLink(p)
		if !ok {
			return false
		}
		p = next
	}
	return true // a symlink loop: the real ssh's to report
}

// firstLink resolves the first symlink among the absolute path p's
// components, or reports that there is none (or p cannot be read).
func firstLink(p string) (string, bool) {
	parts := strings.Split(p, "/")[1:]
	cur := "/"
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", false
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		t, err := os.Readlink(cur)
		if err != nil {
			return "", false
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(cur), t)
		}
		return filepath.Join(append([]string{t}, parts[i+1:]...)...), true
	}
	return "", false
}
