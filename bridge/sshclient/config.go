package sshclient

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh/sshconf"
)

// maxIncludeDepth is OpenSSH's READCONF_MAX_DEPTH.
const maxIncludeDepth = 16

// source names where an option came from, for OpenSSH-style messages.
type source struct {
	file string // "command-line" for -o options
	line int
}

// block is one Host or Match line of a config file.
type block struct {
	match     bool
	args      string   // Match criteria, verbatim
	pats      []string // Host patterns
	badQuotes bool     // a Host line argv_split refuses
	line      int
}

// parsedFile is a config file split into its blocks: the implicit one
// at the top (blk nil), then one per Host or Match line. Keywords and
// values are kept verbatim (OpenSSH's tokenising is applied per keyword
// when the value is used).
type parsedFile struct {
	sections []section
}

// section is one block of a config file and its keyword lines.
type section struct {
	blk   *block
	lines []configLine
}

// configLine is one keyword line: its number, lower-case keyword and raw
// value after the keyword.
type configLine struct {
	no      int
	keyword string
	value   string
}

// parsedFiles memoises preprocess: every invocation reads the same few
// config files, and parsing them costs more than the rest of resolving.
var parsedFiles struct {
	sync.Mutex
	byContent map[string]*parsedFile
}

// maxParsedFiles bounds parsedFiles; beyond it the cache starts afresh.
const maxParsedFiles = 64

// preprocessCached is preprocess, answered from parsedFiles when a file
// with the same contents was parsed before. A parsedFile is never
// modified once made, so callers may share it.
func preprocessCached(data []byte) (*parsedFile, error) {
	parsedFiles.Lock()
	pf := parsedFiles.byContent[string(data)]
	parsedFiles.Unlock()
	if pf != nil {
		return pf, nil
	}
	pf, err := preprocess(data)
	if err != nil {
		return nil, err
	}
	parsedFiles.Lock()
	if len(parsedFiles.byContent) >= maxParsedFiles || parsedFiles.byContent == nil {
		parsedFiles.byContent = map[string]*parsedFile{}
	}
	parsedFiles.byContent[string(data)] = pf
	parsedFiles.Unlock()
	return pf, nil
}

// preprocess splits a config file into its Host and Match blocks (whose
// criteria are evaluated per invocation) and keyword lines. Include is
// handled when the file is applied, relative to the shim's home.
func preprocess(data []byte) (*parsedFile, error) {
	pf := &parsedFile{sections: []section{{}}}
	for i, ln := range strings.Split(string(data), "\n") {
		no := i + 1
		kw, rest := splitKeyword(ln)
		if kw == "" || strings.HasPrefix(kw, "#") {
			continue
		}
		switch lkw := strings.ToLower(kw); lkw {
		case "host":
			args, ok := sshconf.Split(rest)
			pf.sections = append(pf.sections, section{blk: &block{pats: args, badQuotes: !ok, line: no}})
		case "match":
			pf.sections = append(pf.sections, section{blk: &block{match: true, args: rest, line: no}})
		default:
			cur := &pf.sections[len(pf.sections)-1]
			cur.lines = append(cur.lines, configLine{no: no, keyword: lkw, value: rest})
		}
	}
	return pf, nil
}

// splitKeyword splits a config line like OpenSSH's strdelim: the keyword
// ends at whitespace or '='; the rest skips whitespace and one '='.
// Trailing whitespace (and form feeds) are removed.
func splitKeyword(ln string) (kw, rest string) {
	ln = strings.TrimRight(ln, " \t\r\n\f")
	ln = strings.TrimLeft(ln, " \t")
	end := strings.IndexAny(ln, " \t=")
	if end < 0 {
		return ln, ""
	}
	kw, rest = ln[:end], ln[end:]
	rest = strings.TrimLeft(rest, " \t")
	if strings.HasPrefix(rest, "=") {
		rest = strings.TrimLeft(rest[1:], " \t")
	}
	return kw, rest
}

// readConfigFile reads one config file (and its Includes) into r.
// userConf selects how relative Include paths resolve (~/.ssh vs /etc/ssh).
func (r *resolver) readConfigFile(path string, userConf, checkPerm, mustExist bool, depth int) error {
	if depth > maxIncludeDepth {
		return failure(r.cmdLevel, errors.New("include depth"), fatalLine("Too many recursive configuration includes"))
	}
	abs := r.env.abs(path)
	if processOwn(abs) {
		r.noteProcessOwn(path)
		return nil
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		if mustExist {
			return failure(r.cmdLevel, err, fatalLine(fmt.Sprintf("Can't open user config file %.100s: %.100s", path, strerror(err))))
		}
		return nil
	}
	if checkPerm {
		if st, err := os.Stat(abs); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				if !securePermissions(sys, os.Getuid()) {
					return failure(r.cmdLevel, errors.New("bad config permissions"), fatalLine(fmt.Sprintf("Bad owner or permissions on %s", path)))
				}
			}
		}
	}
	pf, err := preprocessCached(data)
	if err != nil {
		return &ConnError{Msg: fmt.Sprintf("%s: %v", path, err), Err: err}
	}
	var bad []string
	for _, sec := range pf.sections {
		active := true // the implicit block at the top of every file
		if b := sec.blk; b != nil {
			kw := "host"
			if b.match {
				kw = "match"
			}
			switch {
			case b.match && strings.TrimSpace(b.args) == "" || !b.match && len(b.pats) == 0 && !b.badQuotes:
				// readconf.c's check of every line, before the keyword's.
				bad = append(bad, fmt.Sprintf("%s line %d: no argument after keyword \"%s\"", path, b.line, kw))
				active = false
			case b.badQuotes:
				bad = append(bad, fmt.Sprintf("%s line %d: invalid quotes", path, b.line))
				active = false
			case b.match:
				m, err := r.evalMatch(b.args, source{path, b.line})
				if err != nil {
					bad = append(bad, err.Error())
				}
				active = m
			default:
				active = hostLineMatches(r.hostArg, b.pats)
			}
		}
		for _, l := range sec.lines {
			src := source{path, l.no}
			if l.keyword == "include" {
				if !active {
					continue
				}
				if err := r.include(l.value, userConf, depth, src); err != nil {
					return err
				}
				continue
			}
			if msg := r.apply(l.keyword, l.value, src, active); msg != "" {
				bad = append(bad, msg)
			}
		}
	}
	if len(bad) > 0 {
		// error() for each line, fatal() to end, at the command line's
		// LogLevel: ssh has not read the file's yet.
		var lines []msgLine
		for _, b := range bad {
			for _, l := range strings.Split(b, "\r\n") {
				lines = append(lines, errorLine(l))
			}
		}
		lines = append(lines, fatalLine(fmt.Sprintf("%s: terminating, %d bad configuration options", path, len(bad))))
		return failure(r.cmdLevel, errors.New("bad configuration options"), lines...)
	}
	return nil
}

// include processes an Include line: tilde expansion, relative paths from
// ~/.ssh (user config) or /etc/ssh (system config), glob in sorted order.
func (r *resolver) include(val string, userConf bool, depth int, src source) error {
	args, ok := sshconf.Split(val)
	if !ok {
		msg := fmt.Sprintf("%s line %d: invalid quotes", src.file, src.line)
		return &ConnError{Msg: msg, Err: errors.New(msg)}
	}
	for _, a := range args {
		p, err := expandTilde(a, r.env.Home)
		if err != nil {
			return expandFailure(r.cmdLevel, err)
		}
		if !filepath.IsAbs(p) {
			if userConf {
				p = filepath.Join(r.env.Home, ".ssh", p)
			} else {
				p = filepath.Join("/etc/ssh", p)
			}
		}
		matches, err := filepath.Glob(p)
		if err != nil {
			return &ConnError{Msg: fmt.Sprintf("%s line %d: include %s glob failed", src.file, src.line, p), Err: err}
		}
		sort.Strings(matches)
		for _, m := range matches {
			if st, err := os.Stat(m); err == nil && st.IsDir() {
				continue
			}
			// ssh checks every included file as it checks ~/.ssh/config
			// (readconf.c: SSHCONF_CHECKPERM), whoever includes it.
			if err := r.readConfigFile(m, userConf, true, false, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// evalMatch evaluates a Match line like OpenSSH 9.2's match_cfg_line.
// exec is not run: the block is skipped and recorded as unsupported. An
// error is the lines ssh prints for a bad line.
func (r *resolver) evalMatch(args string, src source) (bool, error) {
	words, ok := sshconf.Split(args)
	if !ok {
		return false, fmt.Errorf("%s line %d: invalid quotes", src.file, src.line)
	}
	bad := func(msg string) error {
		return fmt.Errorf("%s\r\n%.200s line %d: Bad Match condition", msg, src.file, src.line)
	}
	result, attributes := true, 0
	for i := 0; i < len(words); i++ {
		attr := words[i]
		if strings.HasPrefix(attr, "#") {
			break
		}
		neg := strings.HasPrefix(attr, "!")
		if neg {
			attr = attr[1:]
		}
		la := strings.ToLower(attr)
		switch la {
		case "all":
			// It must come alone (match_cfg_line's check lets one
			// criterion before it pass) and ends the line.
			if attributes > 1 || i+1 < len(words) && !strings.HasPrefix(words[i+1], "#") {
				return false, bad(fmt.Sprintf("%.200s line %d: '%s' cannot be combined with other Match attributes", src.file, src.line, words[i]))
			}
			return result && !neg, nil
		case "canonical", "final":
			attributes++
			if la == "final" {
				r.wantFinal = true
			}
			m := r.final
			if m == neg {
				result = false
			}
			continue
		}
		attributes++
		if i+1 >= len(words) || strings.HasPrefix(words[i+1], "#") {
			return false, bad("Missing Match criteria for " + attr)
		}
		i++
		arg := words[i]
		var m bool
		switch la {
		case "host":
			m = matchPatternList(r.matchHost(), arg, true) == 1
		case "originalhost":
			m = matchPatternList(r.hostArg, arg, true) == 1
		case "user":
			m = matchPatternList(r.matchUser(), arg, false) == 1
		case "localuser":
			m = matchPatternList(r.env.User, arg, false) == 1
		case "exec":
			r.note(fmt.Sprintf("%s line %d: Match exec is not supported; block skipped", src.file, src.line))
			m = neg // never matches, whatever the negation
		default:
			return false, bad("Unsupported Match attribute " + attr)
		}
		if m == neg {
			result = false
		}
	}
	if attributes == 0 {
		return false, bad("One or more attributes required for Match")
	}
	return result, nil
}

// matchHost is the host "Match host" compares: HostName so far with %h
// expanded, else the host from the command line.
func (r *resolver) matchHost() string {
	if hn, ok := r.vals["hostname"]; ok {
		return strings.ReplaceAll(hn, "%h", r.hostArg)
	}
	return r.hostArg
}

func (r *resolver) matchUser() string {
	if u, ok := r.vals["user"]; ok {
		return u
	}
	return r.env.User
}

// noteProcessOwn notes a local path the daemon must not open for ssh
// (processOwn).
func (r *resolver) noteProcessOwn(p string) {
	r.note(p + " names the opener's own descriptors, terminal or process: ssh's, not the daemon's")
}

func (r *resolver) note(s string) {
	for _, u := range r.unsupported {
		if u == s {
			return
		}
	}
	r.unsupported = append(r.unsupported, s)
}

// sessionDefault tells whether v, for a session keyword, is what ssh
// does with the keyword unset.
func sessionDefault(kw, v string) bool {
	v = strings.ToLower(v)
	switch kw {
	case "remotecommand":
		return v == "none"
	case "requesttty":
		return v == "auto"
	case "sessiontype":
		return v == "default"
	}
	return v == "no" || v == "false"
}

const (
	// EscapeNone is EscapeChar none.
	EscapeNone    = -1
	escapeInvalid = -2
)

// escapeChar is readconf.c's EscapeChar: one character, ^X for a control
// character, or none.
func escapeChar(s string) int {
	switch {
	case s == "none":
		return EscapeNone
	case len(s) == 1:
		return int(s[0])
	case len(s) == 2 && s[0] == '^' && s[1] >= 64 && s[1] < 128:
		return int(s[1] & 31)
	}
	return escapeInvalid
}

// Keywords whose argument is a yes/no flag.
var flagKeys = map[string]bool{
	"batchmode": true, "identitiesonly": true, "passwordauthentication": true,
	"kbdinteractiveauthentication": true, "hashknownhosts": true,
	"checkhostip": true, "compression": true, "tcpkeepalive": true, "nohostauthenticationforlocalhost": true,
	"clearallforwardings": true, "gatewayports": true, "streamlocalbindunlink": true,
}

// opensshKeywords are the keywords OpenSSH 9.2's readconf.c knows
// (Debian's build, with GSSAPI and PKCS#11), Host, Match and Include
// aside: any other is a "Bad configuration option".
var opensshKeywords = map[string]bool{
	"addkeystoagent": true, "addressfamily": true, "afstokenpassing": true, "batchmode": true, "bindaddress": true, "bindinterface": true,
	"canonicaldomains": true, "canonicalizefallbacklocal": true, "canonicalizehostname": true, "canonicalizemaxdots": true,
	"canonicalizepermittedcnames": true, "casignaturealgorithms": true, "certificatefile": true,
	"challengeresponseauthentication": true, "checkhostip": true, "cipher": true, "ciphers": true, "clearallforwardings": true,
	"compression": true, "compressionlevel": true, "connectionattempts": true, "connecttimeout": true, "controlmaster": true,
	"controlpath": true, "controlpersist": true, "dsaauthentication": true, "dynamicforward": true, "enableescapecommandline": true,
	"enablesshkeysign": true, "escapechar": true, "exitonforwardfailure": true, "fallbacktorsh": true, "fingerprinthash": true,
	"forkafterauthentication": true, "forwardagent": true, "forwardx11": true, "forwardx11timeout": true, "forwardx11trusted": true,
	"gatewayports": true, "globalknownhostsfile": true, "globalknownhostsfile2": true, "gssapiauthentication": true,
	"gssapidelegatecredentials": true, "hashknownhosts": true, "hostbasedacceptedalgorithms": true,
	"hostbasedauthentication": true, "hostbasedkeytypes": true, "hostkeyalgorithms": true, "hostkeyalias": true, "hostname": true,
	"identitiesonly": true, "identityagent": true, "identityfile": true, "identityfile2": true, "ignoreunknown": true, "ipqos": true,
	"kbdinteractiveauthentication": true, "kbdinteractivedevices": true, "keepalive": true, "kerberosauthentication": true,
	"kerberostgtpassing": true, "kexalgorithms": true, "knownhostscommand": true, "localcommand": true, "localforward": true,
	"loglevel": true, "logverbose": true, "macs": true, "nohostauthenticationforlocalhost": true, "numberofpasswordprompts": true,
	"passwordauthentication": true, "permitlocalcommand": true, "permitremoteopen": true, "pkcs11provider": true, "port": true,
	"preferredauthentications": true, "protocol": true, "proxycommand": true, "proxyjump": true, "proxyusefdpass": true,
	"pubkeyacceptedalgorithms": true, "pubkeyacceptedkeytypes": true, "pubkeyauthentication": true, "rekeylimit": true,
	"remotecommand": true, "remoteforward": true, "requesttty": true, "requiredrsasize": true, "revokedhostkeys": true,
	"rhostsauthentication": true, "rhostsrsaauthentication": true, "rsaauthentication": true, "securitykeyprovider": true,
	"sendenv": true, "serveralivecountmax": true, "serveraliveinterval": true, "sessiontype": true, "setenv": true,
	"skeyauthentication": true, "smartcarddevice": true, "stdinnull": true, "streamlocalbindmask": true,
	"streamlocalbindunlink": true, "stricthostkeychecking": true, "syslogfacility": true, "tcpkeepalive": true,
	"tisauthentication": true, "tunnel": true, "tunneldevice": true, "updatehostkeys": true, "useprivilegedport": true, "user": true,
	"userknownhostsfile": true, "userknownhostsfile2": true, "useroaming": true, "usersh": true, "verifyhostkeydns": true,
	"visualhostkey": true, "xauthlocation": true,
}

// unsupportedKeywords are those Debian's ssh 9.2 knows but does not
// implement: it says "Unsupported option" (at ERROR) and goes on.
var unsupportedKeywords = map[string]bool{
	"afstokenpassing": true, "kerberosauthentication": true, "kerberostgtpassing": true,
	"rsaauthentication": true, "rhostsrsaauthentication": true, "compressionlevel": true,
}

// apply processes one keyword/value, first value wins (identity and
// certificate files accumulate). It returns an OpenSSH-style message for
// an invalid value, or "".
func (r *resolver) apply(kw, raw string, src source, active bool) string {
	bad := func(format string, a ...any) string {
		return fmt.Sprintf("%s line %d: ", src.file, src.line) + fmt.Sprintf(format, a...)
	}
	if a, ok := sshconf.Aliases[kw]; ok {
		kw = a
	}
	if strings.TrimSpace(raw) == "" {
		return fmt.Sprintf("%s line %d: no argument after keyword \"%s\"", src.file, src.line, kw)
	}
	args, ok := sshconf.Split(raw)
	if src.file != "command-line" && !opensshKeywords[kw] {
		// readconf.c's parse_token; the shim's parser has refused the
		// command line's unknown keywords.
		if ign, set := r.vals["ignoreunknown"]; set && matchPatternList(kw, ign, true) == 1 {
			return ""
		}
		msg := fmt.Sprintf("%s: line %d: Bad configuration option: %s", src.file, src.line, kw)
		if !ok {
			msg += "\r\n" + bad("invalid quotes")
		}
		return msg
	}
	if !ok {
		return bad("invalid quotes")
	}
	if unsupportedKeywords[kw] {
		r.note(fmt.Sprintf("%s (from %s line %d) is not supported", kw, src.file, src.line))
		return ""
	}
	return r.applyArgs(kw, raw, args, src, active)
}

// applyArgs applies one keyword line split into its words, args (raw is
// the line's value as written, which ProxyCommand takes whole).
func (r *resolver) applyArgs(kw, raw string, args []string, src source, active bool) string {
	bad := func(format string, a ...any) string {
		return fmt.Sprintf("%s line %d: ", src.file, src.line) + fmt.Sprintf(format, a...)
	}
	if a, ok := sshconf.Aliases[kw]; ok {
		kw = a
	}
	if len(args) == 0 {
		return fmt.Sprintf("%s line %d: no argument after keyword \"%s\"", src.file, src.line, kw)
	}
	arg := args[0]
	set := func(v string) {
		if !active {
			return
		}
		if _, ok := r.vals[kw]; !ok {
			r.vals[kw] = v
		}
	}
	switch kw {
	case "port":
		n, err := strconv.Atoi(arg)
		if err != nil || n <= 0 || n > 65535 {
			return bad("Bad port '%s'.", arg)
		}
		set(arg)
	case "hostname", "user", "hostkeyalias", "identityagent", "preferredauthentications",
		"ciphers", "macs", "kexalgorithms", "hostkeyalgorithms",
		"pubkeyacceptedalgorithms", "casignaturealgorithms", "kbdinteractivedevices":
		set(arg)
	case "identityfile", "certificatefile":
		if !active {
			return ""
		}
		list := &r.identityFiles
		if kw == "certificatefile" {
			list = &r.certFiles
		}
		for _, f := range *list {
			if f == arg {
				return ""
			}
		}
		*list = append(*list, arg)
	case "userknownhostsfile", "globalknownhostsfile":
		if active {
			if _, ok := r.lists[kw]; !ok {
				r.lists[kw] = args
			}
		}
	case "sendenv":
		// SendEnv accumulates across sources; "-pattern" removes.
		if active {
			r.lists[kw] = sendEnvEdit(r.lists[kw], args)
		}
	case "stricthostkeychecking":
		switch strings.ToLower(arg) {
		case "yes", "true":
			set("yes")
		case "no", "false", "off":
			set("no")
		case "ask":
			set("ask")
		case "accept-new":
			set("accept-new")
		default:
			return bad("unsupported option \"%s\".", arg)
		}
	case "pubkeyauthentication":
		switch strings.ToLower(arg) {
		case "yes", "true", "unbound", "host-bound":
			set("yes")
		case "no", "false":
			set("no")
		default:
			return bad("unsupported option \"%s\".", arg)
		}
	case "connecttimeout", "serveraliveinterval":
		if _, err := convtime(arg); err != nil && arg != "none" {
			return bad("invalid time value.")
		}
		set(arg)
	case "controlpersist":
		// yes, no or a time (the shim has checked the value).
		set(strings.ToLower(arg))
	case "controlpath", "ignoreunknown":
		set(arg)
	case "controlmaster":
		// The shim has checked the value; true and false are aliases.
		switch v := strings.ToLower(arg); v {
		case "true":
			set("yes")
		case "false":
			set("no")
		default:
			set(v)
		}
	case "serveralivecountmax", "numberofpasswordprompts", "connectionattempts":
		n, err := strconv.ParseInt(arg, 0, 64)
		switch {
		case err != nil && errors.Is(err, strconv.ErrRange) && strings.HasPrefix(arg, "-"):
			return bad("integer value too small.")
		case err != nil && errors.Is(err, strconv.ErrRange):
			return bad("integer value too large.")
		case err != nil:
			return bad("integer value invalid.")
		case n < 0:
			return bad("integer value too small.")
		case n > 1<<31-1:
			return bad("integer value too large.")
		}
		set(strconv.FormatInt(n, 10))
	case "loglevel":
		if _, ok := logLevels[strings.ToUpper(arg)]; !ok {
			return bad("unsupported log level '%s'", arg)
		}
		set(strings.ToUpper(arg))
	case "updatehostkeys", "verifyhostkeydns":
		switch strings.ToLower(arg) {
		case "yes", "true":
			set("yes")
		case "ask":
			set("ask")
		case "no", "false":
			set("no")
		default:
			return bad("unsupported option \"%s\".", arg)
		}
	case "addkeystoagent":
		// readconf.c: yes, no, ask or confirm, "confirm TIME", or a
		// TIME alone (yes with that lifespan); kept as "STATE SECONDS".
		state, ok := sshconf.Multistate(arg, []string{"yes", "no", "true", "false", "ask", "confirm"})
		life := int64(0)
		switch {
		case arg == "":
			return bad("missing argument.") + "\r\n" + bad("unsupported option")
		case ok && state == "confirm" && len(args) > 1:
			if life = sshconf.ConvTime(args[1]); life < 0 {
				return bad("invalid time value.")
			}
		case !ok && len(args) == 1:
			if life = sshconf.ConvTime(arg); life < 0 {
				return bad("unsupported option")
			}
			state = "yes"
		case !ok || len(args) > 1:
			return bad("unsupported option")
		}
		set(fmt.Sprintf("%s %d", state, life))
	case "addressfamily":
		switch strings.ToLower(arg) {
		case "any", "inet", "inet6":
			set(strings.ToLower(arg))
		default:
			return bad("unsupported option \"%s\".", arg)
		}
	case "proxycommand":
		// OpenSSH keeps the rest of the line verbatim.
		if !active || r.proxySet || (r.jump != "" && r.jump != "none") {
			return ""
		}
		r.proxyCommand = raw
		r.proxySet = true
	case "proxyjump":
		if !active || r.proxySet || r.jump != "" {
			return ""
		}
		r.jump = arg // "none" blocks later ProxyJump but not ProxyCommand
	case "knownhostscommand", "revokedhostkeys", "pkcs11provider", "securitykeyprovider":
		if active && !strings.EqualFold(arg, "none") {
			r.note(fmt.Sprintf("%s %s (from %s line %d) is not supported", kw, arg, src.file, src.line))
		}
	case "canonicalizehostname", "proxyusefdpass":
		if active && !strings.EqualFold(arg, "no") && !strings.EqualFold(arg, "false") {
			r.note(fmt.Sprintf("%s %s (from %s line %d) is not supported", kw, arg, src.file, src.line))
		}
	case "remotecommand", "requesttty", "sessiontype", "stdinnull", "setenv", "forwardagent",
		"forwardx11", "permitlocalcommand", "tunnel", "forkafterauthentication":
		// They shape the session. The shim's parser honours or refuses
		// the command line's (which come first and win); a file's the
		// daemon would ignore, so the real ssh runs with it.
		if kw == "setenv" {
			for _, a := range args {
				if !strings.Contains(a, "=") {
					return bad("Invalid SetEnv.")
				}
			}
		}
		if _, ok := r.vals[kw]; ok || !active {
			return ""
		}
		set(arg)
		if src.file != "command-line" && !sessionDefault(kw, arg) {
			if kw == "setenv" || kw == "remotecommand" {
				raw = "..." // perhaps a secret: the reason is logged and shown in status
			}
			r.note(fmt.Sprintf("%s %s (from %s line %d) is not served", kw, raw, src.file, src.line))
		}
	case "streamlocalbindmask":
		// Read from files for a master's forwards (-o with it makes the
		// shim fall back: it is not in the keyword table).
		if m, err := strconv.ParseUint(arg, 8, 32); err != nil || m > 0o777 {
			return bad("Bad mask.")
		}
		set(arg)
	case "escapechar":
		if escapeChar(arg) == escapeInvalid {
			return bad("Bad escape character.")
		}
		set(arg)
	case "localforward", "remoteforward", "dynamicforward":
		// They accumulate, and a mux client asks its master for them;
		// ClearAllForwardings yes (which scp and sftp pass) drops them.
		if active && src.file != "command-line" && r.forwarding == "" {
			r.forwarding = fmt.Sprintf("%s %s (from %s line %d) is not served", kw, raw, src.file, src.line)
		}
	default:
		if flagKeys[kw] {
			switch strings.ToLower(arg) {
			case "yes", "true":
				set("yes")
			case "no", "false":
				set("no")
			default:
				return bad("unsupported option \"%s\".", arg)
			}
		}
		// Every other keyword is accepted and ignored here: the shim's
		// parser decides which options the bridge cannot honour.
	}
	return ""
}

// convtime parses an OpenSSH time value: digits with optional s/m/h/d/w
// suffixes, concatenated ("1m30s").
func convtime(s string) (time.Duration, error) {
	n := sshconf.ConvTime(s)
	if n < 0 {
		return 0, errors.New("bad time")
	}
	return time.Duration(n) * time.Second, nil
}

// strerror renders an error like C's strerror for the common cases.
// Strerror is C's strerror for err's errno (ssh's wording), else err's
// own text.
func Strerror(err error) string { return strerror(err) }

func strerror(err error) string {
	var errno syscall.Errno
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, fs.ErrPermission):
		return "Permission denied"
	case errors.As(err, &errno):
		return errnoText(errno)
	}
	return err.Error()
}

// errnoText is glibc's strerror text for errno values a connection meets.
func errnoText(e syscall.Errno) string {
	switch e {
	case syscall.ECONNREFUSED:
		return "Connection refused"
	case syscall.ETIMEDOUT:
		return "Connection timed out"
	case syscall.ENETUNREACH:
		return "Network is unreachable"
	case syscall.EHOSTUNREACH:
		return "No route to host"
	case syscall.ECONNRESET:
		return "Connection reset by peer"
	case syscall.EPIPE:
		return "Broken pipe"
	case syscall.EADDRNOTAVAIL:
		return "Cannot assign requested address"
	case syscall.EAFNOSUPPORT:
		return "Address family not supported by protocol"
	case syscall.EACCES:
		return "Permission denied"
	case syscall.EPERM:
		return "Operation not permitted"
	case syscall.EHOSTDOWN:
		return "Host is down"
	case syscall.ENOENT:
		return "No such file or directory"
	}
	s := e.Error()
	if s != "" {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}

// sendEnvEdit applies one SendEnv line: patterns are added, "-pattern"
// removes the patterns it matches, as OpenSSH does.
func sendEnvEdit(list, args []string) []string {
	for _, a := range args {
		if rm, ok := strings.CutPrefix(a, "-"); ok {
			kept := list[:0:0]
			for _, p := range list {
				if !matchPattern(p, rm) {
					kept = append(kept, p)
				}
			}
			list = kept
			continue
		}
		list = append(list, a)
	}
	return list
}
