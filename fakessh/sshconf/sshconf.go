package sshconf

import "strings"

// Space is the white space that separates words in a config line.
const Space = " \t\r\n"

// Kind is how a keyword's value is checked, the way readconf.c checks it.
type Kind int

const (
	String       Kind = iota // one argument
	List                     // any number of arguments, first line wins
	Multi                    // one of kw.states, case-insensitive
	Int                      // 0..INT_MAX
	Time                     // sshd_config(5) time format, or "none"
	Port                     // number or service name
	Command                  // the rest of the line, quotes and all
	Jump                     // ProxyJump
	LogLevel                 // LogLevel
	Persist                  // ControlPersist: yes, no or a time
	Escape                   // EscapeChar
	SendEnv                  // SendEnv names
	SetEnv                   // SetEnv NAME=VALUE pairs
	ForwardAgent             // yes, no or a socket path
	AnyArgs                  // one or two arguments, not checked
	AddKeys                  // AddKeysToAgent: a state, "confirm TIME" or a TIME
)

// Keyword is how one ssh_config keyword is read and served.
type Keyword struct {
	Kind   Kind
	States []string // for Multi: the values readconf.c accepts
	// Accumulate: every line adds (IdentityFile, SendEnv, ...).
	Accumulate bool
	// Served: the daemon's SSH client (package bridge/sshclient) applies
	// the value. Otherwise the keyword is accepted and makes no difference
	// to a session the bridge runs, or the shim falls back to the real
	// binary for the values it cannot honour (ForwardAgent yes, ...):
	// Reason says which.
	Served bool
	Reason string
}

// FlagStates are the values of a yes/no keyword.
var (
	FlagStates        = []string{"yes", "no", "true", "false"}
	strictHostStates  = []string{"yes", "no", "true", "false", "ask", "off", "accept-new"}
	controlStates     = []string{"yes", "no", "true", "false", "auto", "ask", "autoask"}
	requestTTYStates  = []string{"yes", "no", "true", "false", "force", "auto"}
	addrFamilyStates  = []string{"inet", "inet6", "any"}
	compressionStates = []string{"yes", "no"}
	pubkeyStates      = []string{"yes", "no", "true", "false", "unbound", "host-bound"}
	askFlagStates     = []string{"yes", "no", "true", "false", "ask"}
	tunnelStates      = []string{"yes", "no", "true", "false", "point-to-point", "ethernet"}
	sessionStates     = []string{"none", "subsystem", "default"}
)

func flag() Keyword { return Keyword{Kind: Multi, States: FlagStates} }

// Keywords lists the ssh_config keywords the bridge understands, by
// lower-case name. Any other keyword, valid for OpenSSH or not, makes the
// shim run the real binary, which accepts it or prints its own error. To
// serve a new option: add it here, list it in served, apply it in
// bridge/sshclient (resolver.apply and Settings); sshclient's
// TestKeywordTable checks that the two agree.
var Keywords = withHandling(map[string]Keyword{
	"port":                             {Kind: Port},
	"user":                             {Kind: String},
	"hostname":                         {Kind: String},
	"identityfile":                     {Kind: String, Accumulate: true},
	"certificatefile":                  {Kind: String, Accumulate: true},
	"identitiesonly":                   flag(),
	"identityagent":                    {Kind: String},
	"addkeystoagent":                   {Kind: AddKeys},
	"proxyjump":                        {Kind: Jump},
	"proxycommand":                     {Kind: Command},
	"localcommand":                     {Kind: Command},
	"remotecommand":                    {Kind: Command},
	"permitlocalcommand":               flag(),
	"stricthostkeychecking":            {Kind: Multi, States: strictHostStates},
	"userknownhostsfile":               {Kind: List},
	"globalknownhostsfile":             {Kind: List},
	"connecttimeout":                   {Kind: Time},
	"serveraliveinterval":              {Kind: Time},
	"serveralivecountmax":              {Kind: Int},
	"connectionattempts":               {Kind: Int},
	"numberofpasswordprompts":          {Kind: Int},
	"passwordauthentication":           flag(),
	"kbdinteractiveauthentication":     flag(),
	"challengeresponseauthentication":  flag(),
	"pubkeyauthentication":             {Kind: Multi, States: pubkeyStates},
	"hostbasedauthentication":          flag(),
	"gssapiauthentication":             flag(),
	"gssapidelegatecredentials":        flag(),
	"preferredauthentications":         {Kind: String},
	"kbdinteractivedevices":            {Kind: String},
	"batchmode":                        flag(),
	"loglevel":                         {Kind: LogLevel},
	"hostkeyalias":                     {Kind: String},
	"checkhostip":                      flag(),
	"hashknownhosts":                   flag(),
	"nohostauthenticationforlocalhost": flag(),
	"updatehostkeys":                   {Kind: Multi, States: askFlagStates},
	"verifyhostkeydns":                 {Kind: Multi, States: askFlagStates},
	"visualhostkey":                    flag(),
	"controlmaster":                    {Kind: Multi, States: controlStates},
	"controlpath":                      {Kind: String},
	"controlpersist":                   {Kind: Persist},
	"compression":                      {Kind: Multi, States: compressionStates},
	"tcpkeepalive":                     flag(),
	"addressfamily":                    {Kind: Multi, States: addrFamilyStates},
	"forwardagent":                     {Kind: ForwardAgent},
	"forwardx11":                       flag(),
	"forwardx11trusted":                flag(),
	"gatewayports":                     flag(),
	"clearallforwardings":              flag(),
	"exitonforwardfailure":             flag(),
	"streamlocalbindunlink":            flag(),
	"enableescapecommandline":          flag(),
	"tunnel":                           {Kind: Multi, States: tunnelStates},
	"proxyusefdpass":                   flag(),
	"forkafterauthentication":          flag(),
	"stdinnull":                        flag(),
	"sessiontype":                      {Kind: Multi, States: sessionStates},
	"requesttty":                       {Kind: Multi, States: requestTTYStates},
	"sendenv":                          {Kind: SendEnv, Accumulate: true},
	"setenv":                           {Kind: SetEnv},
	"escapechar":                       {Kind: Escape},
	"ciphers":                          {Kind: String},
	"macs":                             {Kind: String},
	"kexalgorithms":                    {Kind: String},
	"hostkeyalgorithms":                {Kind: String},
	"pubkeyacceptedalgorithms":         {Kind: String},
	"pubkeyacceptedkeytypes":           {Kind: String},
	"hostbasedacceptedalgorithms":      {Kind: String},
	"casignaturealgorithms":            {Kind: String},
	"fingerprinthash":                  {Kind: String},
	"ipqos":                            {Kind: AnyArgs},
	"rekeylimit":                       {Kind: AnyArgs},
})

// Aliases maps the old names OpenSSH still accepts to the option
// they set, so that the first value given under either name wins.
var Aliases = map[string]string{
	"challengeresponseauthentication": "kbdinteractiveauthentication",
	"pubkeyacceptedkeytypes":          "pubkeyacceptedalgorithms",
}

// Multistate matches arg case-insensitively against states and returns it
// in lower case, with true/false spelled yes/no.
func Multistate(arg string, states []string) (string, bool) {
	for _, s := range states {
		if strings.EqualFold(arg, s) {
			switch s {
			case "true":
				return "yes", true
			case "false":
				return "no", true
			}
			return s, true
		}
	}
	return "", false
}

// Strdelim is misc.c's Strdelim: it returns the next word of s, split at
// white space or one '=', with double quotes grouping. more is false when
// nothing follows (the C version's NULL rest) and ok is false for an
// unterminated quote.
func Strdelim(s string) (tok, rest string, more, ok bool) {
	i := strings.IndexAny(s, Space+`"=`)
	if i < 0 {
		return s, "", false, true
	}
	if s[i] == '"' {
		j := strings.IndexByte(s[i+1:], '"')
		if j < 0 {
			return "", "", false, false
		}
		j += i + 1
		return s[:i] + s[i+1:j], strings.TrimLeft(s[j+1:], Space), true, true
	}
	equals := s[i] == '='
	tok, rest = s[:i], strings.TrimLeft(s[i+1:], Space)
	if !equals && strings.HasPrefix(rest, "=") {
		rest = strings.TrimLeft(rest[1:], Space)
	}
	return tok, rest, true, true
}

// Split is misc.c's argv_split with comments ending the line: words
// split at spaces and tabs, single and double quotes, and backslash escapes
// of quotes, backslashes and (outside quotes) spaces. ok is false for an
// unterminated quote.
func Split(s string) (args []string, ok bool) {
	i := 0
	for i < len(s) {
		if s[i] == ' ' || s[i] == '\t' {
			i++
			continue
		}
		if s[i] == '#' {
			break
		}
		var arg []byte
		var quote byte
		for ; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '\\':
				if i+1 < len(s) {
					n := s[i+1]
					if n == '\'' || n == '"' || n == '\\' || (quote == 0 && n == ' ') {
						i++
						arg = append(arg, n)
						continue
					}
				}
				arg = append(arg, c)
				continue
			case quote == 0 && (c == ' ' || c == '\t'):
			case quote == 0 && (c == '"' || c == '\''):
				quote = c
				continue
			case quote != 0 && c == quote:
				quote = 0
				continue
			default:
				arg = append(arg, c)
				continue
			}
			break
		}
		if quote != 0 {
			return nil, false
		}
		args = append(args, string(arg))
	}
	return args, true
}

// Strtonum is OpenBSD's Strtonum: a base-10 number with optional leading
// white space and sign. e is "", "invalid", "too small" or "too large".
func Strtonum(s string, min, max int64) (n int64, e string) {
	v, end, overflow := Strtoll(s)
	switch {
	case end == 0 || end != len(s):
		return 0, "invalid"
	case (overflow && v < 0) || v < min:
		return 0, "too small"
	case overflow || v > max:
		return 0, "too large"
	}
	return v, ""
}

// Strtoll parses like C's Strtoll(s, &end, 10); end is 0 when no digits
// were found. Values are clamped well inside int64.
func Strtoll(s string) (v int64, end int, overflow bool) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	const limit = 1 << 62
	for i < len(s) && isDigit(s[i]) {
		if !overflow {
			v = v*10 + int64(s[i]-'0')
			if v > limit {
				overflow = true
			}
		}
		i++
	}
	if i == start {
		return 0, 0, false
	}
	if overflow {
		v = limit
	}
	if neg {
		v = -v
	}
	return v, i, overflow
}

// ConvTime is misc.c's ConvTime: a sequence of numbers with optional
// s/m/h/d/w suffixes. It returns -1 for a bad or too large value.
func ConvTime(s string) int64 {
	const intMax = 1<<31 - 1
	if s == "" {
		return -1
	}
	var total int64
	for s != "" {
		secs, end, overflow := Strtoll(s)
		if end == 0 || overflow || secs < 0 || secs > intMax {
			return -1
		}
		s = s[end:]
		mult := int64(1)
		if s != "" {
			switch s[0] {
			case 's', 'S':
			case 'm', 'M':
				mult = 60
			case 'h', 'H':
				mult = 60 * 60
			case 'd', 'D':
				mult = 24 * 60 * 60
			case 'w', 'W':
				mult = 7 * 24 * 60 * 60
			default:
				return -1
			}
			s = s[1:]
		}
		if secs > intMax/mult {
			return -1
		}
		secs *= mult
		if total > intMax-secs {
			return -1
		}
		total += secs
	}
	return total
}

func LowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// Lower lower-cases ASCII letters only, as C's tolower in the C locale.
func Lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = LowerByte(c)
	}
	return string(b)
}

// served are the keywords the daemon's SSH client applies.
var served = map[string]bool{
	"addressfamily":                   true,
	"batchmode":                       true,
	"certificatefile":                 true,
	"challengeresponseauthentication": true,
	"ciphers":                         true,
	"connectionattempts":              true,
	"connecttimeout":                  true,
	"controlmaster":                   true,
	"controlpath":                     true,
	"controlpersist":                  true,
	"globalknownhostsfile":            true,
	"hashknownhosts":                  true,
	"hostkeyalgorithms":               true,
	"hostkeyalias":                    true,
	"hostname":                        true,
	"identitiesonly":                  true,
	"addkeystoagent":                  true,
	"identityagent":                   true,
	"identityfile":                    true,
	"kbdinteractiveauthentication":    true,
	"kexalgorithms":                   true,
	"loglevel":                        true,
	"macs":                            true,
	"numberofpasswordprompts":         true,
	"passwordauthentication":          true,
	"port":                            true,
	"preferredauthentications":        true,
	"proxycommand":                    true,
	"proxyjump":                       true,
	"pubkeyauthentication":            true,
	"sendenv":                         true,
	// A served -tt session's escapes (a mux client's, filtered by the
	// daemon as ssh's master filters them).
	"escapechar": true,
	// The master's, for the forwards its mux clients ask for.
	"gatewayports":          true,
	"streamlocalbindunlink": true,
	"serveralivecountmax":   true,
	"serveraliveinterval":   true,
	"stricthostkeychecking": true,
	"tcpkeepalive":          true,
	"updatehostkeys":        true,
	// Only as it turns UpdateHostKeys' default off: there is no DNS in
	// the bridge's host key checks (no SSHFP record is OpenSSH's case too).
	"verifyhostkeydns":   true,
	"user":               true,
	"userknownhostsfile": true,
}

// reasons say why an accepted keyword needs nothing of the SSH client.
var reasons = map[string]string{
	"requesttty":                       "the shim asks for a terminal as ssh would, and falls back for what it cannot (from a file: falls back unless auto)",
	"sessiontype":                      "the shim runs the command or subsystem itself (from a file: falls back unless default)",
	"setenv":                           "makes the shim fall back: the master's is sent with each session",
	"remotecommand":                    "makes the shim fall back unless none",
	"localcommand":                     "runs only with PermitLocalCommand yes, which makes the shim fall back",
	"permitlocalcommand":               "yes makes the shim fall back",
	"forwardagent":                     "yes makes the shim fall back",
	"forwardx11":                       "yes makes the shim fall back",
	"forwardx11trusted":                "only matters with ForwardX11",
	"clearallforwardings":              "only matters with forwardings",
	"exitonforwardfailure":             "only matters with forwardings",
	"tunnel":                           "yes makes the shim fall back",
	"proxyusefdpass":                   "yes makes the shim fall back",
	"forkafterauthentication":          "yes makes the shim fall back",
	"stdinnull":                        "the shim reads stdin as ssh -n would (from a file: yes falls back)",
	"enableescapecommandline":          "no escape sequences without an interactive terminal",
	"gssapiauthentication":             "GSSAPI is not offered; the other methods are",
	"gssapidelegatecredentials":        "GSSAPI is not offered",
	"hostbasedauthentication":          "host-based auth is not offered; the other methods are",
	"kbdinteractivedevices":            "makes the bridge fall back (x/crypto asks for the server's default devices)",
	"nohostauthenticationforlocalhost": "yes makes the bridge fall back (it checks the key of every host)",
	"visualhostkey":                    "no host key art is printed",
	"pubkeyacceptedalgorithms":         "only OpenSSH's default list is served; any other makes the bridge fall back",
	"pubkeyacceptedkeytypes":           "only OpenSSH's default list is served; any other makes the bridge fall back",
	"hostbasedacceptedalgorithms":      "host-based auth is not offered",
	"casignaturealgorithms":            "only OpenSSH's default list is served; any other makes the bridge fall back",
	"fingerprinthash":                  "messages use SHA256 fingerprints",
	"checkhostip":                      "yes makes the bridge fall back (it checks host keys by name only, OpenSSH's default)",
	"compression":                      "x/crypto has no compression: accepted and ignored",
	"ipqos":                            "loopback and LAN latency is unaffected",
	"rekeylimit":                       "x/crypto's rekeying defaults",
}

// withHandling fills in Served and Reason.
func withHandling(m map[string]Keyword) map[string]Keyword {
	for name, kw := range m {
		kw.Served = served[name]
		if !kw.Served {
			kw.Reason = reasons[name]
		}
		m[name] = kw
	}
	return m
}

func isSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
