package fakessh

import (
	"net"
	"strconv"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/fakessh/sshconf"
)

// UsageError is a command line that the real OpenSSH tool rejects before it
// connects anywhere. The shim writes Msg to stderr as it is and exits with
// Status, so a caller sees the same bytes as from stock OpenSSH 9.2.
type UsageError struct {
	// Msg is exactly what OpenSSH writes to stderr, line endings included:
	// its log functions end a line with "\r\n", its usage text with "\n".
	Msg string
	// Status is the exit status OpenSSH uses: 255 for ssh and for fatal
	// errors, 1 for a scp or sftp usage message.
	Status int
}

// Error returns Msg, so that printing the error reproduces OpenSSH's output.
func (e *UsageError) Error() string { return e.Msg }

// The getopt strings of OpenSSH 9.2. ssh's also has "w:" (tunnel devices):
// the 9.2 binary accepts -w although its man page synopsis is easy to misread.
const (
	sshOptstring = "1246ab:c:e:fgi:kl:m:no:p:qstvxAB:CD:E:F:GI:J:KL:MNO:PQ:R:S:TVw:W:XYy"
)

const sshUsage = `usage: ssh [-46AaCfGgKkMNnqsTtVvXxYy] [-B bind_interface]
           [-b bind_address] [-c cipher_spec] [-D [bind_address:]port]
           [-E log_file] [-e escape_char] [-F configfile] [-I pkcs11]
           [-i identity_file] [-J [user@]host[:port]] [-L address]
           [-l login_name] [-m mac_spec] [-O ctl_cmd] [-o option] [-p port]
           [-Q query_option] [-R address] [-S ctl_path] [-W host:port]
           [-w local_tun[:remote_tun]] destination [command [argument ...]]
`

// ParseSSH parses an ssh(1) command line (argv without argv[0]) the way
// OpenSSH 9.2 does. It returns a *UsageError for a command line that ssh
// itself would refuse. A result with a non-empty Unsupported list must be
// handed to the real ssh: it may also be one the real ssh refuses, since
// parsing stops checking for errors once the bridge is out of the picture.
func ParseSSH(argv []string) (*SSHInvocation, error) {
	inv := &SSHInvocation{}
	p := newOptParser(inv, toolSSH)
	return finishParse(inv, p, p.parseSSH(argv), func() int { return len(inv.Unsupported) })
}

// finishParse ends a Parse function: after an error, a command line with
// something unsupported goes to the real binary all the same (it may fail
// earlier, on what was not checked); otherwise the error stands.
func finishParse[T any](inv *T, p *optParser, err error, unsupported func() int) (*T, error) {
	p.finish()
	if err != nil {
		if unsupported() > 0 {
			return inv, nil
		}
		return nil, err
	}
	return inv, nil
}

func (p *optParser) parseSSH(argv []string) error {
	inv := p.inv
	args := argv
	hostSet := false
	for {
		g := getopt{args: args, opts: sshOptstring}
		for {
			c, optarg, ok, err := g.nextOption("", sshUsageError)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if err := p.sshOption(c, optarg); err != nil {
				return err
			}
			if p.stop {
				return nil
			}
		}
		// As ssh.c: an option argument spelled "--" also ends option
		// processing after the destination.
		terminated := g.ind > 0 && args[g.ind-1] == "--"
		args = args[g.ind:]
		if len(args) > 0 && !hostSet {
			if err := p.destination(args[0]); err != nil {
				return err
			}
			hostSet = true
			rest := args[1:]
			if len(rest) > 0 && !terminated {
				// ssh restarts getopt after the destination, so
				// options may follow it ("ssh host -p 22 cmd").
				args = rest
				continue
			}
			args = rest
		}
		break
	}
	if !hostSet {
		return sshUsageError("")
	}
	if p.userSet && !validRuser(inv.User) {
		return fatalError("remote username contains invalid characters")
	}
	if !validHostname(inv.Host) {
		return fatalError("hostname contains invalid characters")
	}
	inv.Command = args
	if len(args) == 0 && p.sessionType == "subsystem" {
		return sshUsageError("You must specify a subsystem to invoke.\n")
	}
	if inv.Host == "" {
		// "user@" parses, then fails to resolve: let ssh say so.
		p.unsupported("empty host name")
	}
	return nil
}

// destination applies ssh's destination argument: an ssh:// URI or
// [user@]host, where the user may contain '@' (split at the last one).
func (p *optParser) destination(d string) error {
	u, r := parseURI("ssh", d)
	if r == 0 && u.hasPath {
		r = -1 // ssh:// URIs may not carry a path
	}
	switch r {
	case -1:
		return sshUsageError("")
	case 0:
		if u.user != "" {
			p.setUser(u.user)
		}
		if u.port > 0 {
			p.setPort(u.port)
		}
		p.inv.Host = u.host
		return nil
	}
	i := strings.LastIndexByte(d, '@')
	if i == 0 {
		return sshUsageError("")
	}
	if i > 0 {
		p.setUser(d[:i])
		d = d[i+1:]
	}
	p.inv.Host = d
	return nil
}

// sshOption applies one ssh flag, as the switch in ssh.c main does.
func (p *optParser) sshOption(c byte, arg string) error {
	inv := p.inv
	switch c {
	case '1':
		return fatalError("SSH protocol v.1 is no longer supported")
	case '2', 'P':
		// -2 is ignored; -P is a deprecated no-op in 9.2.
	case '4':
		p.force("addressfamily", "inet")
	case '6':
		p.force("addressfamily", "inet6")
	case 'n':
		p.force("stdinnull", "yes")
	case 'x':
		p.force("forwardx11", "no")
	case 'a':
		p.force("forwardagent", "no")
	case 'k':
		p.force("gssapidelegatecredentials", "no")
	case 'g':
		// Gateway ports only matter with forwardings, which are unsupported.
		p.force("gatewayports", "yes")
	case 'C':
		p.force("compression", "yes")
	case 'q':
		p.logLevel = logQuiet
		p.force("loglevel", logLevelNames[p.logLevel])
		inv.Quiet = true
	case 'v':
		if p.debugFlag == 0 {
			p.debugFlag = 1
			p.logLevel = logDebug1
		} else if p.logLevel < logDebug3 {
			p.debugFlag++
			p.logLevel++
		}
		inv.Verbose = p.debugFlag
		p.force("loglevel", logLevelNames[p.logLevel])
	case 't':
		if p.tty == "yes" {
			p.tty = "force"
		} else {
			p.tty = "yes"
		}
		p.force("requesttty", p.tty)
	case 'T':
		p.tty = "no"
		p.force("requesttty", p.tty)
	case 'e':
		if !validEscapeChar(arg) {
			return &UsageError{Msg: "Bad escape character '" + arg + "'.\n", Status: ExitSSHError}
		}
		p.force("escapechar", arg)
	case 'O':
		if p.control != "" {
			return fatalError("Multiplexing command already specified")
		}
		switch arg {
		case "check", "exit", "stop":
		case "forward", "cancel", "proxy":
			p.unsupported("-O " + arg)
		default:
			return fatalError("Invalid multiplex command.")
		}
		p.control = arg
		inv.Control = arg
	case 'i':
		// ssh warns and skips an -i file it cannot stat; that check
		// needs the file system and is left to the caller.
		p.inv.Options = append(p.inv.Options, Option{Key: "identityfile", Value: arg, Flag: "-i"})
	case 'J':
		if p.jumpSet {
			return fatalError("Only a single -J option is permitted (use commas to separate multiple jump hops)")
		}
		if p.proxyCmdSet {
			return fatalError("Cannot specify -J with ProxyCommand")
		}
		spec, why, ok := parseJump(arg)
		if !ok {
			return &UsageError{Msg: why + "Invalid -J argument\r\n", Status: ExitSSHError}
		}
		// -J always sets ProxyCommand to "none", even for "-J none".
		p.jumpSet, p.proxyCmdSet = true, true
		p.add("proxyjump", spec)
	case 'p':
		if !p.portSet {
			port := a2port(arg)
			if port <= 0 {
				return &UsageError{Msg: "Bad port '" + arg + "'\n", Status: ExitSSHError}
			}
			p.setPort(port)
		}
	case 'l':
		p.setUser(arg)
	case 'o':
		return p.configLine(arg)
	case 's':
		if p.sessionType != "" && p.sessionType != "subsystem" {
			return fatalError("Cannot specify -s with -N/SessionType")
		}
		p.sessionType = "subsystem"
	case 'F':
		inv.ConfigFile = arg
	case 'V', 'Q':
		// ssh prints its version or a list and exits at once: only the
		// real binary knows what to print.
		p.unsupported("-" + string([]byte{c}))
		p.stop = true
	default:
		// Flags the bridge cannot honour: forwardings, tunnels,
		// backgrounding, master mode, X11 and agent forwarding, log
		// redirection, bind addresses, cipher and MAC choice, PKCS#11,
		// GSSAPI delegation, control sockets, config dumps.
		p.unsupported("-" + string([]byte{c}))
	}
	return nil
}

func sshUsageError(prefix string) *UsageError {
	return &UsageError{Msg: prefix + sshUsage, Status: ExitSSHError}
}

// fatalError is ssh's fatal(): one log line and exit status 255.
func fatalError(msg string) *UsageError {
	return &UsageError{Msg: msg + "\r\n", Status: ExitSSHError}
}

type tool int

const (
	toolSSH tool = iota
	toolSCP
	toolSFTP
)

// optParser holds the ssh option state that decides which of several
// settings wins, following OpenSSH: most -o settings and -p/-l keep the first
// value given, while most flags overwrite. Options keeps only the settings in
// effect, so SSHInvocation.Get returns what ssh would use.
type optParser struct {
	inv  *SSHInvocation
	tool tool

	userSet, portSet     bool
	jumpSet, proxyCmdSet bool
	tty                  string // "" (unset), "no", "yes", "force", "auto"
	sessionType          string // "" (unset), "default", "none", "subsystem"
	logLevel             int
	debugFlag            int
	control              string
	stop                 bool
}

func newOptParser(inv *SSHInvocation, t tool) *optParser {
	return &optParser{inv: inv, tool: t, logLevel: -1}
}

func (p *optParser) unsupported(what string) {
	for _, u := range p.inv.Unsupported {
		if u == what {
			return
		}
	}
	p.inv.Unsupported = append(p.inv.Unsupported, what)
}

func (p *optParser) has(key string) bool {
	_, ok := p.inv.Get(key)
	return ok
}

func (p *optParser) add(key, value string) {
	p.inv.Options = append(p.inv.Options, Option{Key: key, Value: value})
}

// addFirst records a single-valued setting unless one is already in effect.
func (p *optParser) addFirst(key, value string) bool {
	if p.has(key) {
		return false
	}
	p.add(key, value)
	return true
}

// force records a setting made by a flag, which overwrites any earlier value.
func (p *optParser) force(key, value string) {
	opts := p.inv.Options[:0]
	for _, o := range p.inv.Options {
		if o.Key != key {
			opts = append(opts, o)
		}
	}
	p.inv.Options = append(opts, Option{Key: key, Value: value})
}

func (p *optParser) setUser(u string) {
	if p.userSet {
		return
	}
	p.userSet = true
	p.inv.User = u
	p.add("user", u)
}

func (p *optParser) setPort(port int) {
	if p.portSet {
		return
	}
	p.portSet = true
	p.inv.Port = strconv.Itoa(port)
	p.add("port", p.inv.Port)
}

// finish derives the summary fields from the settings in effect and lists
// the settings the bridge cannot honour.
func (p *optParser) finish() {
	inv := p.inv
	switch p.tty {
	case "no":
		inv.TTY = -1
	case "yes":
		inv.TTY = 1
	case "force":
		inv.TTY = 2
	default:
		inv.TTY = 0
	}
	if v, _ := inv.Get("stdinnull"); v == "yes" {
		inv.NoStdin = true
	}
	if _, ok := inv.Get("setenv"); ok {
		// ssh sends its master's SetEnv with each session; the daemon
		// sends none.
		p.unsupported("-o SetEnv") // its values may be secrets: the reason is logged
	}
	switch p.sessionType {
	case "subsystem":
		inv.Subsystem = true
	case "none":
		p.unsupported("-o SessionType=none")
	}
	for _, c := range []struct{ key, name, ok string }{
		{"forwardagent", "ForwardAgent", "no"},
		{"forwardx11", "ForwardX11", "no"},
		{"permitlocalcommand", "PermitLocalCommand", "no"},
		{"remotecommand", "RemoteCommand", "none"},
		{"proxyusefdpass", "ProxyUseFdpass", "no"},
		{"tunnel", "Tunnel", "no"},
		{"visualhostkey", "VisualHostKey", "no"},
		{"forkafterauthentication", "ForkAfterAuthentication", "no"},
	} {
		if v, ok := inv.Get(c.key); ok && v != c.ok {
			if c.key == "remotecommand" {
				v = "..." // a command, perhaps with a secret: the reason is logged
			}
			p.unsupported("-o " + c.name + "=" + v)
		}
	}
}

// Log levels in OpenSSH's order; -v steps through them.
const (
	logQuiet = iota
	logFatal
	logError
	logInfo
	logVerbose
	logDebug1
	logDebug2
	logDebug3
)

var logLevelNames = []string{"quiet", "fatal", "error", "info", "verbose", "debug1", "debug2", "debug3"}

// configLine applies one -o argument as readconf.c's process_config_line
// does for a "command-line" source. For scp and sftp the line is only
// passed on to ssh, so there an error makes the invocation unsupported
// instead: the real tool then runs the real ssh, which reports it.
func (p *optParser) configLine(line string) error {
	err := p.configLineSSH(line)
	if err != nil && p.tool != toolSSH {
		// The keyword only: the reason is logged, and a value may be a
		// secret.
		kw, _, _, _ := sshconf.Strdelim(strings.TrimLeft(line, wsChars))
		p.unsupported("-o " + kw + ": " + strings.TrimSuffix(strings.TrimPrefix(err.Error(), "command-line line 0: "), "\r\n"))
		return nil
	}
	return err
}

const wsChars = sshconf.Space

func cfgError(msg string) *UsageError {
	return &UsageError{Msg: "command-line line 0: " + msg + "\r\n", Status: ExitSSHError}
}

func (p *optParser) configLineSSH(line string) error {
	// Strip trailing white space, but never the first character.
	end := len(line)
	for end > 1 && strings.IndexByte(wsChars+"\f", line[end-1]) >= 0 {
		end--
	}
	line = line[:end]
	if line == "" {
		return nil
	}
	keyword, str, more, ok := sshconf.Strdelim(line)
	if !ok {
		return nil
	}
	if keyword == "" {
		if !more {
			return nil
		}
		if keyword, str, more, ok = sshconf.Strdelim(str); !ok {
			return nil
		}
	}
	if keyword == "" || keyword[0] == '\n' || keyword[0] == '#' {
		return nil
	}
	typed := keyword
	keyword = sshconf.Lower(keyword)
	if more {
		str = strings.TrimLeft(str, wsChars)
	}
	if !more || str == "" {
		return cfgError(`no argument after keyword "` + keyword + `"`)
	}
	kw, known := sshconf.Keywords[keyword]
	if !known {
		p.unsupported("-o " + typed)
		return nil
	}
	store := keyword // the key recorded in Options
	if a, ok := sshconf.Aliases[keyword]; ok {
		store = a
	}
	args, ok := sshconf.Split(str)
	if !ok {
		return cfgError("invalid quotes")
	}
	var arg string
	hasArg := len(args) > 0
	if hasArg {
		arg, args = args[0], args[1:]
	}
	switch kw.Kind {
	case sshconf.String:
		if arg == "" {
			return cfgError("Missing argument.")
		}
		switch keyword {
		case "user":
			p.setUser(arg)
		default:
			p.set(store, arg, kw)
		}
	case sshconf.Port:
		if arg == "" {
			return cfgError("Missing argument.")
		}
		port := a2port(arg)
		if port <= 0 {
			return cfgError("Bad port '" + arg + "'.")
		}
		p.setPort(port)
	case sshconf.List:
		all := args
		if hasArg {
			all = append([]string{arg}, args...)
		}
		for i, a := range all {
			if a == "" {
				return cfgError("keyword " + keyword + " empty argument")
			}
			if strings.EqualFold(a, "none") && (i > 0 || i < len(all)-1) {
				return cfgError("keyword " + keyword + ` "none" argument must appear alone.`)
			}
		}
		args = nil
		if len(all) > 0 {
			p.setList(store, all, kw)
		}
	case sshconf.Multi:
		if !hasArg || arg == "" {
			shown := arg
			if !hasArg {
				shown = "(null)"
			}
			return &UsageError{Msg: "command-line line 0: missing argument.\r\n" +
				"command-line line 0: unsupported option \"" + shown + "\".\r\n", Status: ExitSSHError}
		}
		v, ok := sshconf.Multistate(arg, kw.States)
		if !ok {
			return cfgError(`unsupported option "` + arg + `".`)
		}
		p.setMulti(store, v, kw)
	case sshconf.Int:
		e := "missing"
		if arg != "" {
			_, e = sshconf.Strtonum(arg, 0, 1<<31-1)
		}
		if e != "" {
			return cfgError("integer value " + e + ".")
		}
		p.set(store, arg, kw)
	case sshconf.Time:
		if arg == "" {
			return cfgError("missing time value.")
		}
		if arg != "none" && sshconf.ConvTime(arg) < 0 {
			return cfgError("invalid time value.")
		}
		p.set(store, arg, kw)
	case sshconf.Persist:
		if arg == "" {
			return cfgError("Missing ControlPersist argument.")
		}
		if arg != "yes" && arg != "no" && arg != "true" && arg != "false" && sshconf.ConvTime(arg) < 0 {
			return cfgError("Bad ControlPersist argument.")
		}
		p.set(store, arg, kw)
	case sshconf.LogLevel:
		lvl := -1
		if hasArg {
			lvl = logLevelNumber(arg)
		}
		if lvl < 0 {
			shown := arg
			if !hasArg {
				shown = "<NONE>"
			}
			return cfgError("unsupported log level '" + shown + "'")
		}
		if p.logLevel < 0 {
			p.logLevel = lvl
			p.add("loglevel", logLevelNames[lvl])
		}
	case sshconf.Escape:
		if arg == "" {
			return cfgError("Missing argument.")
		}
		if !validEscapeChar(arg) {
			return cfgError("Bad escape character.")
		}
		p.set(store, arg, kw)
	case sshconf.Command:
		// The raw rest of the line: ssh hands it to a shell.
		p.setCommand(store, strings.TrimLeft(str, wsChars+"="))
		args = nil
	case sshconf.Jump:
		spec := strings.TrimLeft(str, wsChars+"=")
		norm, why, ok := parseJump(spec)
		if !ok {
			e := cfgError(`Invalid ProxyJump "` + spec + `"`)
			e.Msg = why + e.Msg
			return e
		}
		if !p.jumpSet && !p.proxyCmdSet {
			p.jumpSet = true
			if !strings.EqualFold(spec, "none") {
				p.proxyCmdSet = true
			}
			p.add("proxyjump", norm)
		}
		args = nil
	case sshconf.SendEnv:
		all := args
		if hasArg {
			all = append([]string{arg}, args...)
		}
		for _, a := range all {
			if a == "" || strings.IndexByte(a, '=') >= 0 {
				return cfgError("Invalid environment name.")
			}
		}
		for _, a := range all {
			p.add(store, a)
		}
		args = nil
	case sshconf.SetEnv:
		all := args
		if hasArg {
			all = append([]string{arg}, args...)
		}
		for _, a := range all {
			if strings.IndexByte(a, '=') < 0 {
				return cfgError("Invalid SetEnv.")
			}
		}
		// Unlike SendEnv, the first SetEnv line wins; within it the
		// first value of a name wins.
		if !p.has(store) {
			seen := map[string]bool{}
			for _, a := range all {
				name := a[:strings.IndexByte(a, '=')]
				if !seen[name] {
					seen[name] = true
					p.add(store, a)
				}
			}
		}
		args = nil
	case sshconf.ForwardAgent:
		if arg == "" {
			return cfgError("missing argument.")
		}
		if v, ok := sshconf.Multistate(arg, sshconf.FlagStates); ok {
			p.set(store, v, kw)
		} else {
			// A socket path: agent forwarding, which is unsupported.
			p.set(store, arg, kw)
		}
	case sshconf.AddKeys:
		// readconf.c: yes, no, ask or confirm, "confirm TIME", or a TIME
		// alone; the value is read again with the files'.
		if arg == "" {
			return &UsageError{Msg: "command-line line 0: missing argument.\r\n" +
				"command-line line 0: unsupported option\r\n", Status: ExitSSHError}
		}
		state, ok := sshconf.Multistate(arg, []string{"yes", "no", "true", "false", "ask", "confirm"})
		v := arg
		switch {
		case ok && state == "confirm" && len(args) > 0:
			if sshconf.ConvTime(args[0]) < 0 {
				return cfgError("invalid time value.")
			}
			v += " " + args[0]
			args = args[1:]
		case !ok && len(args) == 0:
			if sshconf.ConvTime(arg) < 0 {
				return cfgError("unsupported option")
			}
		case !ok || len(args) > 0:
			return cfgError("unsupported option")
		}
		p.set(store, v, kw)
	case sshconf.AnyArgs:
		if arg == "" {
			return cfgError("Missing argument.")
		}
		v := arg
		if len(args) > 0 {
			v += " " + args[0]
			args = args[1:]
		}
		p.set(store, v, kw)
	}
	if len(args) > 0 {
		return cfgError("keyword " + keyword + " extra arguments at end of line")
	}
	return nil
}

// set records a -o setting: accumulating keywords always add, the others
// only when no value is in effect yet.
func (p *optParser) set(key, value string, kw sshconf.Keyword) {
	if kw.Accumulate {
		p.add(key, value)
		return
	}
	p.addFirst(key, value)
}

// setList is set for a keyword that takes a list: the words are kept
// with the value.
func (p *optParser) setList(key string, words []string, kw sshconf.Keyword) {
	n := len(p.inv.Options)
	p.set(key, strings.Join(words, " "), kw)
	if len(p.inv.Options) > n {
		p.inv.Options[n].Words = words
	}
}

func (p *optParser) setMulti(key, value string, kw sshconf.Keyword) {
	switch key {
	case "requesttty":
		if p.tty == "" {
			p.tty = value
			p.add(key, value)
		}
		return
	case "sessiontype":
		if p.sessionType == "" {
			p.sessionType = value
			p.add(key, value)
		}
		return
	}
	p.set(key, value, kw)
}

func (p *optParser) setCommand(key, value string) {
	if key != "proxycommand" {
		p.addFirst(key, value)
		return
	}
	// ProxyCommand and ProxyJump exclude each other: the first wins.
	if p.jumpSet || p.proxyCmdSet {
		return
	}
	p.proxyCmdSet = true
	p.add(key, value)
}

func logLevelNumber(s string) int {
	switch sshconf.Lower(s) {
	case "quiet":
		return logQuiet
	case "fatal":
		return logFatal
	case "error":
		return logError
	case "info":
		return logInfo
	case "verbose":
		return logVerbose
	case "debug", "debug1":
		return logDebug1
	case "debug2":
		return logDebug2
	case "debug3":
		return logDebug3
	}
	return -1
}

// validEscapeChar is ssh's check of -e and EscapeChar: one character,
// ^X or "none".
func validEscapeChar(s string) bool {
	if s == "none" || len(s) == 1 {
		return true
	}
	return len(s) == 2 && s[0] == '^' && s[1] >= 64 && s[1] < 128
}

// uriParts is what misc.c's parse_uri extracts.
type uriParts struct {
	user, host, path string
	port             int
	hasPath          bool
}

// parseURI is misc.c's parse_uri for scheme://[user[;params]@]host[:port][/path].
// r is 0 for a valid URI, 1 when s is not such a URI and -1 when it is a
// broken one.
func parseURI(scheme, s string) (u uriParts, r int) {
	prefix := scheme + "://"
	if !strings.HasPrefix(s, prefix) {
		return u, 1
	}
	tmp := s[len(prefix):]
	if i := strings.IndexByte(tmp, '@'); i >= 0 {
		ui := tmp[:i]
		if j := strings.IndexByte(ui, ';'); j >= 0 {
			ui = ui[:j] // connection parameters are ignored
		}
		if ui == "" {
			return u, -1
		}
		var ok bool
		if u.user, ok = urldecode(ui); !ok {
			return u, -1
		}
		tmp = tmp[i+1:]
	}
	host, rest, delim, hasRest, ok := hpdelim2(tmp)
	if !ok || host == "" {
		return u, -1
	}
	if u.host, ok = validDomain(cleanhostname(host)); !ok {
		return u, -1
	}
	if hasRest && rest != "" {
		if delim == ':' {
			portStr := rest
			rest, hasRest = "", false
			if k := strings.IndexByte(portStr, '/'); k >= 0 {
				portStr, rest, hasRest = portStr[:k], portStr[k+1:], true
			}
			if u.port = a2port(portStr); u.port <= 0 {
				return u, -1
			}
		}
		if hasRest && rest != "" {
			if u.path, ok = urldecode(rest); !ok {
				return u, -1
			}
			u.hasPath = true
		}
	}
	return u, 0
}

// hpdelim2 is misc.c's hpdelim2: it splits "host" or "[host]" from what
// follows a ':' or '/'. hasRest is false when nothing followed.
func hpdelim2(s string) (field, rest string, delim byte, hasRest, ok bool) {
	if s == "" {
		return "", "", 0, false, true
	}
	pos := 0
	if s[0] == '[' {
		k := strings.IndexByte(s, ']')
		if k < 0 {
			return "", "", 0, false, false
		}
		pos = k + 1
	} else if pos = strings.IndexAny(s, ":/"); pos < 0 {
		pos = len(s)
	}
	if pos == len(s) {
		return s, "", 0, false, true
	}
	if s[pos] != ':' && s[pos] != '/' {
		return "", "", 0, false, false
	}
	return s[:pos], s[pos+1:], s[pos], true, true
}

// cleanhostname removes the brackets around an IPv6 address.
func cleanhostname(h string) string {
	if len(h) >= 2 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

// validDomain is misc.c's valid_domain as parse_uri uses it: letters,
// digits, '-', '_' and single dots, starting with a letter or digit; a
// trailing dot is dropped. So URIs cannot name an IPv6 address.
func validDomain(name string) (string, bool) {
	if name == "" || !isAlnum(name[0]) {
		return "", false
	}
	var last byte
	for i := 0; i < len(name); i++ {
		c := sshconf.LowerByte(name[i])
		if last == '.' && c == '.' {
			return "", false
		}
		if c != '.' && c != '-' && c != '_' && !isAlnum(c) {
			return "", false
		}
		last = c
	}
	return strings.TrimSuffix(name, "."), true
}

// urldecode is misc.c's urldecode: '+' is a space, %XX a byte, never NUL.
func urldecode(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '+':
			b.WriteByte(' ')
		case '%':
			if i+2 >= len(s) || !isXdigit(s[i+1]) || !isXdigit(s[i+2]) {
				return "", false
			}
			v, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if v == 0 {
				return "", false
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), true
}

// parseJump checks a ProxyJump / -J value as misc.c's parse_jump does and
// returns the value ssh keeps: cut at a '#' and at the first white space
// after the first character (rtrim's quirk). why is the log line ssh prints
// before its error for a hop with a bad host or user name.
func parseJump(s string) (spec, why string, ok bool) {
	orig := s
	if i := strings.IndexByte(orig, '#'); i >= 0 {
		orig = orig[:i]
	}
	orig = rtrim(orig)
	if strings.EqualFold(s, "none") {
		return "none", "", true
	}
	rest := orig
	for {
		// Hops are checked from the last one back.
		var cp string
		last := false
		if i := strings.LastIndexByte(rest, ','); i < 0 {
			cp, last = rest, true
		} else {
			cp, rest = rest[i+1:], rest[:i]
		}
		u, r := parseURI("ssh", cp)
		user, host := u.user, u.host
		switch {
		case r == -1, r == 0 && u.hasPath:
			return "", "", false
		case r == 1:
			if user, host, ok = parseUserHostPort(cp); !ok {
				return "", "", false
			}
		}
		if !validHostname(host) {
			return "", "parse_jump: invalid hostname \"" + host + "\"\r\n", false
		}
		if user != "" && !validRuser(user) {
			return "", "parse_jump: invalid username \"" + user + "\"\r\n", false
		}
		if last {
			return orig, "", true
		}
	}
}

// rtrim is misc.c's rtrim, which clears every white space character after
// the first one, so the string really ends at the first of them.
func rtrim(s string) string {
	for i := 1; i < len(s); i++ {
		if isSpace(s[i]) {
			return s[:i]
		}
	}
	return s
}

// parseUserHostPort checks [user@]host[:port] as misc.c's
// parse_user_host_port does and returns the user and the host (brackets
// removed). Its hpdelim, unlike hpdelim2, refuses "host/port".
func parseUserHostPort(s string) (user, host string, ok bool) {
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		if i == 0 {
			return "", "", false
		}
		user, s = s[:i], s[i+1:]
	}
	h, rest, delim, hasRest, ok := hpdelim2(s)
	if !ok || h == "" || delim == '/' {
		return "", "", false
	}
	if hasRest && rest != "" && a2port(rest) <= 0 {
		return "", "", false
	}
	return user, cleanhostname(h), true
}

// a2port is misc.c's a2port: a decimal port 0..65535 or a TCP service name
// (0 and failures are then rejected by callers as <= 0).
func a2port(s string) int {
	if n, e := sshconf.Strtonum(s, 0, 65535); e == "" {
		return int(n)
	}
	// glibc's getservbyname is case-sensitive; Go's table lookup is not.
	if s == "" || s != sshconf.Lower(s) || strings.IndexByte(s, 0) >= 0 {
		return -1
	}
	if port, err := net.LookupPort("tcp", s); err == nil && port > 0 {
		return port
	}
	return -1
}

// validHostname is the check OpenSSH added against shell metacharacters in
// host names that end up in ProxyCommand expansions.
func validHostname(s string) bool {
	if s != "" && s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if strings.IndexByte("'`\"$\\;&<>|(){},", c) >= 0 || isSpace(c) || isCntrl(c) {
			return false
		}
	}
	return true
}

// validRuser is the matching check on the remote user name.
func validRuser(s string) bool {
	if s != "" && s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isCntrl(c) || strings.IndexByte("'`\";&<>|(){}", c) >= 0 {
			return false
		}
		if isSpace(c) && i+1 < len(s) && s[i+1] == '-' {
			return false
		}
		if c == '\\' && i+1 == len(s) {
			return false
		}
	}
	return true
}

// C-locale character classes, as OpenSSH sees bytes.
func isSpace(c byte) bool  { return c == ' ' || (c >= '\t' && c <= '\r') }
func isCntrl(c byte) bool  { return c < 32 || c == 127 }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool  { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func isAlnum(c byte) bool  { return isAlpha(c) || isDigit(c) }
func isXdigit(c byte) bool { return isDigit(c) || ((c|0x20) >= 'a' && (c|0x20) <= 'f') }

// getopt is the getopt(3) that OpenSSH builds in (from OpenBSD's
// getopt_long.c): bundled flags, attached or separate arguments, "--" ends
// the options, and parsing stops at the first operand (no permutation).
type getopt struct {
	args  []string
	opts  string
	ind   int    // index of the next argument, as optind
	place string // rest of the current bundle of flags
}

const (
	optDone    = iota // no more options; operands start at ind
	optOK             // an option (with its argument, if it takes one)
	optUnknown        // not in opts
	optMissing        // its argument is missing
)

// nextOption is next for a tool's option loop: ok is false once the
// options end, and an unknown option or a missing argument is the tool's
// usage error, with getopt's message after prefix.
func (g *getopt) nextOption(prefix string, usage func(string) *UsageError) (c byte, arg string, ok bool, err error) {
	c, arg, st := g.next()
	switch st {
	case optDone:
		return 0, "", false, nil
	case optUnknown:
		return c, "", false, usage(prefix + "unknown option -- " + string([]byte{c}) + "\r\n")
	case optMissing:
		return c, "", false, usage(prefix + "option requires an argument -- " + string([]byte{c}) + "\r\n")
	}
	return c, arg, true, nil
}

func (g *getopt) next() (c byte, arg string, st int) {
	if g.place == "" {
		if g.ind >= len(g.args) {
			return 0, "", optDone
		}
		a := g.args[g.ind]
		if len(a) < 2 || a[0] != '-' {
			return 0, "", optDone
		}
		if a == "--" {
			g.ind++
			return 0, "", optDone
		}
		g.place = a[1:]
	}
	c, g.place = g.place[0], g.place[1:]
	i := strings.IndexByte(g.opts, c)
	if c == ':' || c == '-' || i < 0 {
		if c == '-' && g.place == "" {
			// A trailing '-' in a bundle ends the options, leaving
			// the whole word as the first operand (a quirk kept).
			return 0, "", optDone
		}
		if g.place == "" {
			g.ind++
		}
		return c, "", optUnknown
	}
	if i+1 >= len(g.opts) || g.opts[i+1] != ':' {
		if g.place == "" {
			g.ind++
		}
		return c, "", optOK
	}
	if g.place != "" {
		arg = g.place
	} else {
		g.ind++
		if g.ind >= len(g.args) {
			return c, "", optMissing
		}
		arg = g.args[g.ind]
	}
	g.place = ""
	g.ind++
	return c, arg, optOK
}
