package sshclient

import "strings"

// matchPattern is OpenSSH's match_pattern: '*' matches any run of
// characters, '?' exactly one; the match is case-sensitive and whole.
func matchPattern(s, pattern string) bool {
	for {
		if pattern == "" {
			return s == ""
		}
		switch pattern[0] {
		case '*':
			pattern = pattern[1:]
			if pattern == "" {
				return true
			}
			if pattern[0] != '?' && pattern[0] != '*' {
				for i := 0; i < len(s); i++ {
					if s[i] == pattern[0] && matchPattern(s[i+1:], pattern[1:]) {
						return true
					}
				}
				return false
			}
			for i := 0; i <= len(s); i++ {
				if matchPattern(s[i:], pattern) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
		default:
			if s == "" || s[0] != pattern[0] {
				return false
			}
		}
		s, pattern = s[1:], pattern[1:]
	}
}

// matchPatternList is OpenSSH's match_pattern_list over a comma-separated
// list: 1 for a positive match, -1 when a negated pattern ("!pat") matches
// (which wins), 0 otherwise. With fold, string and patterns are compared
// in lower case (match_hostname).
func matchPatternList(s, list string, fold bool) int {
	if fold {
		s = strings.ToLower(s)
		list = strings.ToLower(list)
	}
	got := 0
	for _, p := range strings.Split(list, ",") {
		neg := strings.HasPrefix(p, "!")
		if neg {
			p = p[1:]
		}
		if p == "" {
			continue
		}
		if matchPattern(s, p) {
			if neg {
				return -1
			}
			got = 1
		}
	}
	return got
}

// hostLineMatches evaluates the patterns of a Host line against the host
// given on the command line (case-sensitive, negation wins).
func hostLineMatches(host string, patterns []string) bool {
	found := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		if neg {
			p = p[1:]
		}
		if matchPattern(host, p) {
			if neg {
				return false
			}
			found = true
		}
	}
	return found
}

// MatchAny reports whether s matches any of patterns (ssh_config
// wildcards, '*' and '?'), as a SendEnv list is matched against a
// variable's name.
func MatchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if matchPattern(s, p) {
			return true
		}
	}
	return false
}
