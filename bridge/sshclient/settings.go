package sshclient

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ansible-bridge/ansible-bridge/fakessh"
)

// Env is what the invoking shim saw: its environment and working
// directory.
type Env struct {
	// Home is the local user's home directory (~, %d); User is the local
	// user name (%u, and the default remote user); Cwd is the shim's
	// working directory, against which relative paths (-F, -i, ...)
	// resolve.
	Home, User, Cwd string
	// AuthSock is the shim's SSH_AUTH_SOCK ("" = none).
	AuthSock string
	// Environ is the shim's environment ("NAME=value"), used for ${NAME}
	// in IdentityFile and similar keywords and as the ProxyCommand's
	// environment. nil means the daemon's own environment.
	Environ []string
	// Umask is the shim's: ssh creates known_hosts under it, with 022
	// added (ssh.c main).
	Umask int
}

// Prompter asks the user on the invoking shim's terminal (password:,
// passphrase, keyboard-interactive questions, host key confirmation).
// An error is treated like OpenSSH treats a prompt it cannot show: as an
// empty answer, unless ctx is done, which aborts the connection.
type Prompter interface {
	Prompt(ctx context.Context, prompt string, echo bool) (string, error)
}

// SecretPrompter may be implemented by a Prompter to answer a
// passphrase prompt with bytes the caller overwrites once it has used
// them, as OpenSSH clears a passphrase right after decrypting the key (a
// string answer cannot be overwritten).
type SecretPrompter interface {
	PromptSecret(ctx context.Context, prompt string) ([]byte, error)
}

// ProxyStarter may be implemented by a Prompter whose invoking process
// (the shim) can run the ProxyCommand where ssh does: as its own child,
// with its terminal (a bastion's password prompt), session, umask and
// limits. StartProxy runs shell with "-c" and command, stderr on
// /dev/null when stderrNull, and returns the read end of the proxy's
// stdout, the write end of its stdin, and hangup, which sends it SIGHUP
// and is called once, when the connection ends. ErrProxyHere: the
// daemon is to start it itself.
type ProxyStarter interface {
	StartProxy(ctx context.Context, shell, command string, stderrNull bool) (r, w *os.File, hangup func(), err error)
}

// ErrProxyHere is StartProxy's answer when no shim can start the proxy.
var ErrProxyHere = errors.New("no shim to start the proxy command")

// Notifier may be implemented by a Prompter to receive, as they happen,
// the messages OpenSSH prints on stderr while it connects but which do not
// end the connection ("Warning: Permanently added ...", "Permission denied,
// please try again.", the server's banner, a ProxyCommand's stderr).
// text is exactly what OpenSSH writes, line ending ("\r\n") included, and
// already filtered by LogLevel. Without a Notifier these messages are only
// logged.
type Notifier interface {
	Notify(text string)
}

// Settings are the effective connection settings for one destination,
// resolved like OpenSSH 9.2 from the command line and ssh_config.
type Settings struct {
	// Warnings are what ssh prints as it reads its command line, whatever
	// the LogLevel ("Warning: Identity file ... not accessible: ...").
	Warnings []string
	// HostArg is the destination host as given on the command line (%n).
	HostArg string
	// HostName is the host to connect to: HostName with %h expanded, or
	// HostArg; lower case, as ssh uses it.
	HostName string
	Port     int
	User     string
	// IdentityFiles are tilde/percent/${}-expanded, in the order given
	// (command line first). Relative paths resolve against Env.Cwd. When
	// none is configured, the existing default ~/.ssh/id_* files.
	IdentityFiles []string
	// CertificateFiles are CertificateFile values, expanded likewise.
	CertificateFiles []string
	IdentitiesOnly   bool
	// AgentSock is the ssh-agent socket to use ("" = none): IdentityAgent,
	// else Env.AuthSock.
	AgentSock string
	// AddKeysToAgent: a private key loaded from a file is added to the
	// agent (yes or confirm; "" for no), for AddKeysLifetime seconds
	// (0: no limit). ask makes the invocation fall back.
	AddKeysToAgent  string
	AddKeysLifetime uint32
	// ProxyJump is the ProxyJump value in effect ("" when none) and Jump
	// the resolved settings of its last hop, the one the connection goes
	// through (each hop carries the rest of the chain in its own Jump).
	ProxyJump string
	Jump      *Settings
	// stderrNull is set on a ProxyJump hop whose ssh OpenSSH would run
	// with stderr on /dev/null (proxyStderrNull): it prints nothing.
	stderrNull bool
	// ProxyCommand is the expanded ProxyCommand ("" when none).
	ProxyCommand string
	// StrictHostKeyChecking is "yes", "no", "ask" or "accept-new".
	StrictHostKeyChecking string
	// UserKnownHostsFiles and GlobalKnownHostsFiles are expanded paths.
	UserKnownHostsFiles, GlobalKnownHostsFiles []string
	// HostKeyAlias, lower case, replaces [host]:port in known_hosts.
	HostKeyAlias string
	// HashKnownHosts hashes names of hosts added to known_hosts.
	HashKnownHosts bool
	// ConnectTimeout bounds the TCP connect and the banner exchange
	// (0 = none). ConnectionAttempts is OpenSSH's ConnectionAttempts.
	ConnectTimeout     time.Duration
	ConnectionAttempts int
	// AddressFamily is "any", "inet" or "inet6".
	AddressFamily string
	// ControlPath is the expanded ControlPath ("" for none or unset):
	// the identity of a connection that invocations may share, as ssh
	// multiplexes only through the same control socket. ControlMaster
	// is "no", "yes", "ask", "auto" or "autoask".
	ControlPath, ControlMaster string
	// ControlPersist is how long a master outlives its last client: a
	// time (Ansible passes 60s), PersistForever for yes or 0, or
	// PersistNo (no, or unset): it ends with its last session.
	ControlPersist time.Duration
	// ServerAliveInterval (0 = off in OpenSSH) and ServerAliveCountMax;
	// see KeepAlive.
	ServerAliveInterval time.Duration
	ServerAliveCountMax int
	// TCPKeepAlive sets SO_KEEPALIVE with the kernel's timers, as ssh
	// does (yes by default): a silent link then ends after hours, not
	// after Go's 15-second probes.
	TCPKeepAlive bool

	PasswordAuthentication       bool
	KbdInteractiveAuthentication bool
	PubkeyAuthentication         bool
	BatchMode                    bool
	// PreferredAuthentications in order (default gssapi-with-mic,
	// hostbased, publickey, keyboard-interactive, password; the first two
	// are never attempted by the bridge).
	PreferredAuthentications []string
	NumberOfPasswordPrompts  int
	// LogLevel is OpenSSH's name in upper case (QUIET, FATAL, ERROR, INFO,
	// VERBOSE, DEBUG1, ...). It filters the messages Dial reports.
	LogLevel string
	// SendEnv holds the patterns of local variables to send to the
	// server (accumulated over all sources, "-pattern" removals applied).
	SendEnv []string
	// EscapeChar is the session's escape character, EscapeNone for none.
	EscapeChar int
	// GatewayPorts, StreamLocalBindMask and StreamLocalBindUnlink are
	// the master's, for the forwards its mux clients ask it for.
	GatewayPorts          bool
	StreamLocalBindMask   os.FileMode
	StreamLocalBindUnlink bool
	// Ciphers, MACs and KexAlgorithms are the configured lists as OpenSSH
	// would assemble them, less what x/crypto does not implement; nil
	// when not configured (x/crypto's defaults). HostKeyAlgorithms
	// likewise; nil means OpenSSH's default, ordered by known_hosts.
	Ciphers, MACs, KexAlgorithms, HostKeyAlgorithms []string
	// HostKeyAlgorithmsExplicit: HostKeyAlgorithms was set as a plain
	// list, which ssh uses in that order (not reordered by known_hosts).
	HostKeyAlgorithmsExplicit bool
	// Unsupported lists configuration the bridge could not honour (Match
	// exec blocks, which are skipped, KnownHostsCommand, ...). The caller
	// should log them and may prefer the real ssh when it is not empty.
	Unsupported []string
	// Env is the invoking shim's environment the settings were resolved
	// in; Dial uses Home and Environ from it.
	Env Env
	// Wire, if set, counts the bytes of the connections Dial makes. It is
	// not part of Key.
	Wire *WireCounter

	userKHDisplay   []string // UserKnownHostsFiles as configured (~ kept)
	globalKHDisplay []string
	updateHostKeys  bool
}

// resolver accumulates options, first value wins.
type resolver struct {
	env           Env
	warnings      []string // ssh's command-line warnings (Settings.Warnings)
	hostArg       string
	final         bool
	wantFinal     bool
	vals          map[string]string
	lists         map[string][]string
	identityFiles []string
	certFiles     []string
	proxyCommand  string
	proxySet      bool
	jump          string
	unsupported   []string
	forwarding    string // a forwarding from a file, noted unless cleared
	cmdLevel      string // the command line's LogLevel, what ssh logs at as it reads files
}

// maxJumpDepth bounds ProxyJump chains (including loops through
// ssh_config).
const maxJumpDepth = 8

// Resolve computes the effective settings for inv the way OpenSSH 9.2 does:
// command-line options first, in order, then the user's ~/.ssh/config and
// /etc/ssh/ssh_config (or only the -F file; "-F none" reads nothing), the
// first value obtained for a keyword winning. Errors are *ConnError with
// OpenSSH's message.
func Resolve(inv *fakessh.SSHInvocation, env Env) (*Settings, error) {
	return resolve(inv, env, 0)
}

func resolve(inv *fakessh.SSHInvocation, env Env, depth int) (*Settings, error) {
	if depth > maxJumpDepth {
		return nil, &ConnError{Msg: "ProxyJump: too many hops", Err: errors.New("proxyjump depth exceeded")}
	}
	if env.Cwd == "" {
		env.Cwd, _ = os.Getwd()
	}
	// A [host] destination keeps its brackets, which no name resolves
	// (ssh.c strips them only from an ssh:// URI's host).
	host := inv.Host
	r := &resolver{env: env, hostArg: host, vals: map[string]string{}, lists: map[string][]string{}}
	if err := r.commandLine(inv); err != nil {
		return nil, err
	}
	// ssh logs at the command line's LogLevel (-q, -o LogLevel) until it
	// has read its configuration.
	r.cmdLevel = "INFO"
	if l, ok := r.vals["loglevel"]; ok {
		r.cmdLevel = l
	}
	if err := r.readConfigs(inv.ConfigFile); err != nil {
		return nil, err
	}
	if r.wantFinal {
		// ssh reads its configuration again with HostName set to the
		// host as it now stands (an address canonical): Match host
		// sees it, and no HostName line applies.
		hn, _, err := r.hostName()
		if err != nil {
			return nil, expandFailure(r.cmdLevel, err)
		}
		r.vals["hostname"] = strings.ReplaceAll(hn, "%", "%%")
		r.final = true
		if err := r.readConfigs(inv.ConfigFile); err != nil {
			return nil, err
		}
	}
	return r.settings(inv, depth)
}

// commandLine applies inv.Options (already split and unquoted by the
// shim's parser) and the destination's user and port.
func (r *resolver) commandLine(inv *fakessh.SSHInvocation) error {
	for _, o := range inv.Options {
		if o.Flag == "-i" {
			// ssh.c: an -i file it cannot stat is skipped, with a warning
			// printed whatever the LogLevel.
			p, _ := expandTilde(o.Value, r.env.Home)
			if processOwn(r.env.abs(p)) {
				r.noteProcessOwn(p)
				continue
			}
			if _, err := os.Stat(r.env.abs(p)); err != nil {
				r.warnings = append(r.warnings, fmt.Sprintf("Warning: Identity file %s not accessible: %s.", p, strerror(err)))
				continue
			}
			o.Value = p
		}
		if msg := r.applyCmd(o); msg != "" {
			return &ConnError{Msg: msg, Err: errors.New("bad command-line option")}
		}
	}
	if _, ok := r.vals["user"]; !ok && inv.User != "" {
		r.vals["user"] = inv.User
	}
	if _, ok := r.vals["port"]; !ok && inv.Port != "" {
		if msg := r.applyCmd(fakessh.Option{Key: "port", Value: inv.Port}); msg != "" {
			return &ConnError{Msg: msg, Err: errors.New("bad port")}
		}
	}
	return nil
}

// applyCmd applies one command-line option. The shim's parser has split
// and unquoted its value: its words go to applyArgs as they are.
func (r *resolver) applyCmd(o fakessh.Option) string {
	src := source{"command-line", 0}
	switch o.Key {
	case "proxycommand":
		return r.apply(o.Key, o.Value, src, true)
	case "proxyjump":
		if r.proxySet || r.jump != "" {
			return ""
		}
		r.jump = o.Value
		return ""
	}
	words := o.Words
	switch {
	case words != nil:
	case o.Key == "userknownhostsfile" || o.Key == "globalknownhostsfile":
		words = strings.Fields(o.Value) // an Option made by hand
	case o.Key == "addkeystoagent":
		words = strings.Fields(o.Value) // "confirm TIME", as the shim checked it
	default:
		words = []string{o.Value}
	}
	return r.applyArgs(o.Key, o.Value, words, src, true)
}

// readConfigs reads -F file, or ~/.ssh/config then /etc/ssh/ssh_config.
func (r *resolver) readConfigs(configFile string) error {
	switch {
	case configFile == "none":
		return nil
	case configFile != "":
		p, err := expandTilde(configFile, r.env.Home)
		if err != nil {
			return expandFailure(r.cmdLevel, err)
		}
		return r.readConfigFile(p, true, false, true, 0)
	}
	if r.env.Home != "" {
		if err := r.readConfigFile(filepath.Join(r.env.Home, ".ssh", "config"), true, true, false, 0); err != nil {
			return err
		}
	}
	return r.readConfigFile(systemConfig, false, false, false, 0)
}

// systemConfig is OpenSSH's _PATH_HOST_CONFIG_FILE; a variable for tests.
var systemConfig = "/etc/ssh/ssh_config"

// ControlPersist values that are not a time.
const (
	// PersistNo: the master ends with its last session.
	PersistNo time.Duration = -1
	// PersistForever: the master stays until told to exit.
	PersistForever time.Duration = 1<<63 - 1
)

// controlPersist reads a ControlPersist value as OpenSSH does: "yes" and
// 0 keep the master forever, "no" (and no setting) not past its last
// session, anything else is a time.
func controlPersist(v string) time.Duration {
	switch v {
	case "", "no", "false":
		return PersistNo
	case "yes", "true":
		return PersistForever
	}
	d, err := convtime(v)
	if err != nil {
		return PersistNo
	}
	if d == 0 {
		return PersistForever
	}
	return d
}

// controlMaster is the ControlMaster value in effect, "no" by default.
func controlMaster(v string) string {
	if v == "" {
		return "no"
	}
	return v
}

// Default paths, as in OpenSSH 9.2.
var (
	defaultIdentities = []string{"~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk",
		"~/.ssh/id_ed25519", "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss", "~/.ssh/id_dsa"}
	defaultUserKnownHosts   = []string{"~/.ssh/known_hosts", "~/.ssh/known_hosts2"}
	defaultGlobalKnownHosts = []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}
	defaultPreferredAuth    = []string{"gssapi-with-mic", "hostbased", "publickey", "keyboard-interactive", "password"}
)

// logLevels maps OpenSSH's LogLevel names to their order.
var logLevels = map[string]int{
	"QUIET": -1, "FATAL": 0, "ERROR": 1, "INFO": 2, "VERBOSE": 3,
	"DEBUG": 5, "DEBUG1": 5, "DEBUG2": 6, "DEBUG3": 7,
}

// settings fills defaults and expands tokens, as ssh.c does after reading
// the configuration.
func (r *resolver) settings(inv *fakessh.SSHInvocation, depth int) (*Settings, error) {
	v := r.vals
	flag := func(k string, def bool) bool {
		if s, ok := v[k]; ok {
			return s == "yes"
		}
		return def
	}
	num := func(k string, def int) int {
		if s, ok := v[k]; ok {
			if n, err := strconv.Atoi(s); err == nil {
				return n
			}
		}
		return def
	}
	dur := func(k string) time.Duration {
		if s, ok := v[k]; ok && s != "none" {
			d, _ := convtime(s)
			return d
		}
		return 0
	}
	if r.forwarding != "" && v["clearallforwardings"] != "yes" {
		r.note(r.forwarding)
	}
	// Authentication and host key policy the bridge does not reproduce:
	// the real ssh serves it, so that no login is looser or stricter.
	for _, k := range []*algoKind{&algoPubkey, &algoCASig} {
		if spec, ok := v[k.keyword]; ok && !k.policyServed(spec) {
			r.note(fmt.Sprintf("%s %s is not served", k.name, spec))
		}
	}
	// ssh sends it as keyboard-interactive's submethods, which
	// x/crypto leaves empty.
	if d, ok := v["kbdinteractivedevices"]; ok {
		r.note("KbdInteractiveDevices " + d + " is not served")
	}
	// ssh takes any host key for a loopback address (unless
	// HostKeyAlias); the bridge checks every one.
	if v["nohostauthenticationforlocalhost"] == "yes" {
		r.note("NoHostAuthenticationForLocalhost yes is not served")
	}
	// ssh checks the address's key too, records it and warns of DNS
	// spoofing; the bridge checks the name's only.
	if v["checkhostip"] == "yes" {
		r.note("CheckHostIP yes is not served")
	}
	// ssh asks through askpass before it adds a key.
	addKeys, addKeysLife, _ := strings.Cut(v["addkeystoagent"], " ")
	if addKeys == "ask" {
		r.note("AddKeysToAgent ask is not served")
	}
	// ssh asks on its terminal before it rewrites known_hosts.
	if v["updatehostkeys"] == "ask" {
		r.note("UpdateHostKeys ask is not served")
	}
	s := &Settings{
		Warnings:                     r.warnings,
		HostArg:                      r.hostArg,
		Port:                         num("port", 22),
		User:                         r.env.User,
		IdentitiesOnly:               flag("identitiesonly", false),
		StrictHostKeyChecking:        "ask",
		HashKnownHosts:               flag("hashknownhosts", false),
		ConnectTimeout:               dur("connecttimeout"),
		ConnectionAttempts:           num("connectionattempts", 1),
		AddressFamily:                "any",
		ServerAliveInterval:          dur("serveraliveinterval"),
		ControlPersist:               controlPersist(v["controlpersist"]),
		ControlMaster:                controlMaster(v["controlmaster"]),
		ServerAliveCountMax:          num("serveralivecountmax", 3),
		TCPKeepAlive:                 flag("tcpkeepalive", true),
		PasswordAuthentication:       flag("passwordauthentication", true),
		KbdInteractiveAuthentication: flag("kbdinteractiveauthentication", true),
		PubkeyAuthentication:         flag("pubkeyauthentication", true),
		BatchMode:                    flag("batchmode", false),
		PreferredAuthentications:     defaultPreferredAuth,
		NumberOfPasswordPrompts:      num("numberofpasswordprompts", 3),
		LogLevel:                     "INFO",
		Env:                          r.env,
		Unsupported:                  r.unsupported,
	}
	if u, ok := v["user"]; ok {
		s.User = u
	}
	for _, a := range []struct {
		kind *algoKind
		dst  *[]string
	}{{&algoCiphers, &s.Ciphers}, {&algoMACs, &s.MACs}, {&algoKex, &s.KexAlgorithms}, {&algoHostKeys, &s.HostKeyAlgorithms}} {
		spec, ok := v[a.kind.keyword]
		names, note := a.kind.algorithms(spec, ok)
		if note != "" {
			r.note(note)
			s.Unsupported = r.unsupported
		}
		*a.dst = names
	}
	if x, ok := v["hostkeyalgorithms"]; ok && x != "" && !strings.ContainsAny(x[:1], "+-^") {
		s.HostKeyAlgorithmsExplicit = true
	}
	if x, ok := v["stricthostkeychecking"]; ok {
		s.StrictHostKeyChecking = x
	}
	if x, ok := v["addressfamily"]; ok {
		s.AddressFamily = x
	}
	if x, ok := v["loglevel"]; ok {
		s.LogLevel = strings.ToUpper(x)
		if s.LogLevel == "DEBUG" {
			s.LogLevel = "DEBUG1"
		}
	}
	if x, ok := v["preferredauthentications"]; ok {
		s.PreferredAuthentications = strings.Split(x, ",")
	}
	if x, ok := v["hostkeyalias"]; ok {
		s.HostKeyAlias = strings.ToLower(x)
	}
	// HostName: %h (and %%) expanded, then lower case or, an address,
	// canonical.
	hn, scoped, err := r.hostName()
	if err != nil {
		return nil, expandFailure(r.cmdLevel, err)
	}
	if scoped {
		r.note("HostName " + hn + " (a scoped address) is not served")
		s.Unsupported = r.unsupported
	}
	s.HostName = hn
	if s.HostName == "" {
		return nil, &ConnError{Msg: "ssh: no destination host", Err: errors.New("no destination host")}
	}
	// ssh.c checks for a ProxyJump loop before it expands any path.
	// A failure after configuration the bridge does not serve is the
	// real ssh's to report: it may say more first ("Unsupported option",
	// what a Match exec prints).
	unserved := func() bool {
		s.Unsupported = r.unsupported
		return len(s.Unsupported) > 0
	}
	jump := r.jump != "" && !strings.EqualFold(r.jump, "none") && !(r.proxySet && !strings.EqualFold(r.proxyCommand, "none"))
	if jump {
		if err := r.jumpLoop(s); err != nil {
			if unserved() {
				return s, nil
			}
			return nil, err
		}
	}
	t := connTokens(s)
	expandPath := func(p string) (string, error) {
		p, err := expandTilde(p, r.env.Home)
		if err != nil {
			return "", err
		}
		return percentExpand(p, t, allTokens, true, r.env.lookup)
	}
	// The paths' errors are fatal() and error() lines after ssh has set
	// its log level from the configuration.
	fail := func(err error) (*Settings, error) {
		if unserved() {
			return s, nil
		}
		return nil, expandFailure(s.LogLevel, err)
	}

	// In ssh.c's order: ControlPath, IdentityAgent and UserKnownHostsFile
	// before ssh looks for a master; ProxyCommand as it connects, then
	// IdentityFile and CertificateFile.
	if cp, ok := v["controlpath"]; ok && !strings.EqualFold(cp, "none") {
		// As ssh.c: tilde, then the percent tokens and ${VAR}.
		p, err := expandPath(cp)
		if err != nil {
			return fail(err)
		}
		s.ControlPath = p
	}

	// Agent.
	s.AgentSock = r.env.AuthSock
	if a, ok := v["identityagent"]; ok {
		switch {
		case strings.EqualFold(a, "none"):
			s.AgentSock = ""
		case a == "SSH_AUTH_SOCK":
			s.AgentSock = r.env.AuthSock
		default:
			var p string
			var err error
			if strings.HasPrefix(a, "$") && !strings.HasPrefix(a, "${") {
				p, _ = r.env.lookup(a[1:])
			} else if p, err = expandPath(a); err != nil {
				return fail(err)
			}
			s.AgentSock = p
		}
	}

	// Known hosts files.
	user, userSet := r.lists["userknownhostsfile"]
	if !userSet {
		user = defaultUserKnownHosts
	}
	global, ok := r.lists["globalknownhostsfile"]
	if !ok {
		global = defaultGlobalKnownHosts
	}
	for _, set := range []struct {
		in      []string
		out     *[]string
		display *[]string
	}{{user, &s.UserKnownHostsFiles, &s.userKHDisplay}, {global, &s.GlobalKnownHostsFiles, &s.globalKHDisplay}} {
		for _, f := range set.in {
			if strings.EqualFold(f, "none") {
				continue
			}
			disp, err := percentExpand(f, t, allTokens, true, r.env.lookup)
			if err != nil {
				return fail(err)
			}
			p, err := expandTilde(disp, r.env.Home)
			if err != nil {
				return fail(err)
			}
			*set.out = append(*set.out, p)
			*set.display = append(*set.display, disp)
		}
	}
	// UpdateHostKeys defaults on only with the default user known_hosts
	// (as written) and VerifyHostKeyDNS off (readconf.c).
	s.updateHostKeys = (!userSet || len(user) == 1 && user[0] == "~/.ssh/known_hosts") &&
		(v["verifyhostkeydns"] == "" || v["verifyhostkeydns"] == "no")
	if x, ok := v["updatehostkeys"]; ok {
		s.updateHostKeys = x != "no"
	}

	s.SendEnv = r.lists["sendenv"]
	s.EscapeChar = '~'
	if e, ok := v["escapechar"]; ok {
		s.EscapeChar = escapeChar(e)
	}
	s.GatewayPorts = v["gatewayports"] == "yes"
	s.StreamLocalBindUnlink = v["streamlocalbindunlink"] == "yes"
	s.StreamLocalBindMask = 0o177
	if m, ok := v["streamlocalbindmask"]; ok {
		mask, _ := strconv.ParseUint(m, 8, 32) // checked as read
		s.StreamLocalBindMask = os.FileMode(mask)
	}

	// Proxies.
	if r.proxySet && !strings.EqualFold(r.proxyCommand, "none") {
		pc, err := percentExpand(r.proxyCommand, t, proxyTokens, false, nil)
		if err != nil {
			return fail(err)
		}
		s.ProxyCommand = pc
	}
	if jump {
		s.ProxyJump = r.jump
		jump, err := r.resolveJump(inv, s, depth)
		if err != nil {
			return nil, err
		}
		s.Jump = jump
	}

	// Identities: defaults only when none is configured, and only those
	// that exist (OpenSSH skips missing defaults silently).
	if len(r.identityFiles) == 0 {
		for _, d := range defaultIdentities {
			p, _ := expandTilde(d, r.env.Home)
			if _, err := os.Stat(p); err == nil {
				s.IdentityFiles = append(s.IdentityFiles, p)
			}
		}
	}
	for _, f := range r.identityFiles {
		if strings.EqualFold(f, "none") {
			// Skipped by load_public_identity_files, but it counts as
			// configured: no default identities either.
			continue
		}
		p, err := expandPath(f)
		if err != nil {
			return fail(err)
		}
		s.IdentityFiles = append(s.IdentityFiles, p)
	}
	for _, f := range r.certFiles {
		p, err := expandPath(f)
		if err != nil {
			return fail(err)
		}
		s.CertificateFiles = append(s.CertificateFiles, p)
	}
	for _, list := range [][]string{s.IdentityFiles, s.CertificateFiles, s.UserKnownHostsFiles, s.GlobalKnownHostsFiles, {s.AgentSock}} {
		for _, p := range list {
			if p != "" && processOwn(s.Env.abs(p)) {
				r.noteProcessOwn(p)
				s.Unsupported = r.unsupported
			}
		}
	}
	if addKeys == "yes" || addKeys == "confirm" {
		s.AddKeysToAgent = addKeys
		n, _ := strconv.ParseUint(addKeysLife, 10, 32) // checked as read
		s.AddKeysLifetime = uint32(n)
		// ssh gives the agent an OpenSSH key's own comment, which an
		// encrypted key keeps with its private part: x/crypto does not
		// return it. Without a passphrase prompt (BatchMode) or an agent
		// no such key is added.
		if !s.BatchMode && s.AgentSock != "" {
			for _, f := range s.IdentityFiles {
				if encryptedOpenSSHKey(s.Env.abs(f)) {
					r.note("AddKeysToAgent with an encrypted OpenSSH key (" + f + ") is not served")
					s.Unsupported = r.unsupported
				}
			}
		}
	}
	return s, nil
}

// expandFailure is the ConnError of a failed expansion: an
// *expandError's lines as logLevel shows them.
func expandFailure(logLevel string, err error) error {
	var ee *expandError
	if errors.As(err, &ee) {
		return failure(logLevel, err, ee.lines...)
	}
	return &ConnError{Msg: err.Error(), Err: err}
}

// jumpHop is one [user@]host[:port] of a ProxyJump list.
type jumpHop struct {
	user, host string
	port       int
}

// parseJumpHop parses "ssh://[user@]host[:port]" or "[user@]host[:port]"
// (with [v6] brackets).
func parseJumpHop(s string) (jumpHop, bool) {
	var h jumpHop
	if strings.HasPrefix(s, "ssh://") {
		u, err := url.Parse(s)
		if err != nil || (u.Path != "" && u.Path != "/") {
			return h, false
		}
		h.user = u.User.Username()
		h.host = u.Hostname()
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 || n > 65535 {
				return h, false
			}
			h.port = n
		}
		return h, h.host != ""
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		h.user, s = s[:i], s[i+1:]
		if h.user == "" {
			return h, false
		}
	}
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return h, false
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return h, false
			}
			port = rest[1:]
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 {
		host, port = s[:i], s[i+1:]
		if strings.Contains(port, ":") {
			return h, false
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n <= 0 || n > 65535 {
			return h, false
		}
		h.port = n
	}
	h.host = host
	return h, host != ""
}

// lastHop splits a ProxyJump value into the hops before the last and
// the last one, which ssh connects through.
func (r *resolver) lastHop(spec string) (rest string, hop jumpHop, err error) {
	last := spec
	if i := strings.LastIndexByte(spec, ','); i >= 0 {
		rest, last = spec[:i], spec[i+1:]
	}
	hop, ok := parseJumpHop(last)
	if !ok {
		return "", hop, failure(r.cmdLevel, errors.New("bad ProxyJump"), fatalLine("Invalid -J argument"))
	}
	return rest, hop, nil
}

// jumpLoop is ssh.c's check that the last ProxyJump hop is not the
// destination itself: fatal before ssh has read its LogLevel from the
// configuration, so only the command line's applies.
func (r *resolver) jumpLoop(s *Settings) error {
	_, hop, err := r.lastHop(r.jump)
	if err != nil {
		return err
	}
	ju, jp := hop.user, hop.port
	if ju == "" {
		ju = s.User
	}
	if jp <= 0 {
		jp = 22
	}
	if hop.host == s.HostName && jp == s.Port && ju == s.User {
		return failure(r.cmdLevel, errors.New("jumphost loop"), fatalLine("jumphost loop via "+hop.host))
	}
	return nil
}

// resolveJump resolves the last hop of s.ProxyJump the way OpenSSH builds
// its "ssh -l user -p port -J rest -F config host -W" proxy command: only
// -l, -p, -J and -F carry over; everything else comes from ssh_config.
func (r *resolver) resolveJump(inv *fakessh.SSHInvocation, s *Settings, depth int) (*Settings, error) {
	rest, hop, err := r.lastHop(r.jump)
	if err != nil {
		return nil, err
	}
	hinv := &fakessh.SSHInvocation{Host: hop.host, ConfigFile: inv.ConfigFile}
	if hop.user != "" {
		hinv.Options = append(hinv.Options, fakessh.Option{Key: "user", Value: hop.user})
	}
	if hop.port > 0 {
		hinv.Options = append(hinv.Options, fakessh.Option{Key: "port", Value: strconv.Itoa(hop.port)})
	}
	if rest != "" {
		hinv.Options = append(hinv.Options, fakessh.Option{Key: "proxyjump", Value: rest})
	}
	return resolve(hinv, r.env, depth+1)
}

// String is a short description for logs: user and host are clipped, so
// that a huge host name from a command line makes no huge log line.
func (s *Settings) String() string {
	clip := func(v string, n int) string {
		if len(v) > n {
			return v[:n] + "…"
		}
		return v
	}
	return fmt.Sprintf("%s@%s:%d", clip(s.User, 32), clip(s.HostName, 64), s.Port)
}

// proxyStderrNull reports whether OpenSSH runs this connection's
// ProxyCommand (a ProxyJump is one too: "ssh -W") with its stderr on
// /dev/null, as ssh_proxy_connect does for a would-be ControlPersist
// master, so that nothing the proxy prints outlives the command line
// that started it. Ansible always passes ControlPersist.
func (s *Settings) proxyStderrNull() bool {
	return s.stderrNull || s.ControlPath != "" && s.ControlPersist != PersistNo
}

// silentHop is the hop s's ProxyJump goes through, printing nothing when
// its stderr would be /dev/null.
func (s *Settings) silentHop() *Settings {
	if !s.proxyStderrNull() {
		return s.Jump
	}
	hop := *s.Jump
	hop.LogLevel = "QUIET"
	hop.stderrNull = true
	return &hop
}
