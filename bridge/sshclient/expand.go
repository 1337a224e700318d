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
			return "", fmt.Errorf("tilde_expand: No such user %s", name)
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

// percentExpand expands %x tokens (only those in allowed) and, when
// dollar is set, ${VAR} references using env. Error texts follow
// OpenSSH's vdollar_percent_expand.
func percentExpand(s string, t tokens, allowed string, dollar bool, env func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if dollar && c == '$' && i+1 < len(s) && s[i+1] == '{' {
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("vdollar_percent_expand: unterminated ${\r\ninvalid environment variable expansion")
			}
			name := s[i+2 : i+2+end]
			v, ok := env(name)
			if !ok {
				return "", fmt.Errorf("vdollar_percent_expand: env var ${%s} has no value\r\ninvalid environment variable expansion", name)
			}
			b.WriteString(v)
			i += 2 + end
			continue
		}
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(s) {
			return "", fmt.Errorf("vdollar_percent_expand: invalid format\r\npercent_dollar_expand: failed")
		}
		i++
		k := s[i]
		if k == '%' {
			b.WriteByte('%')
			continue
		}
		v, ok := t[k]
		if !ok || !strings.ContainsRune(allowed, rune(k)) {
			return "", fmt.Errorf("vdollar_percent_expand: unknown key %%%c\r\npercent_dollar_expand: failed", k)
		}
		b.WriteString(v)
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
