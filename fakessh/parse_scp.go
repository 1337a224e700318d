package fakessh

import (
	"strconv"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/fakessh/sshconf"
)

const scpOptstring = "12346ABCTdfOpqRrstvD:F:J:P:S:c:i:l:o:X:"

const scpUsage = `usage: scp [-346ABCOpqRrsTv] [-c cipher] [-D sftp_server_path] [-F ssh_config]
           [-i identity_file] [-J destination] [-l limit] [-o ssh_option]
           [-P port] [-S program] [-X sftp_option] source ... target
`

// ParseSCP parses an scp(1) command line (argv without argv[0]) the way
// OpenSSH 9.2 does. SCPInvocation.SSH describes the ssh that scp would
// start: its fixed options, the user's, and Host, User and Port of the one
// remote host. A command line scp itself rejects gives a *UsageError;
// copies the bridge cannot make (remote to remote, local to local, several
// hosts, scp's server mode) are listed in Unsupported.
func ParseSCP(argv []string) (*SCPInvocation, error) {
	inv := &SCPInvocation{}
	p := newOptParser(&inv.SSH, toolSCP)
	// scp starts ssh with these before the user's options, so they win.
	_ = p.sshOption('x', "")
	for _, o := range []string{"PermitLocalCommand=no", "ClearAllForwardings=yes", "RemoteCommand=none", "RequestTTY=no"} {
		_ = p.configLine(o)
	}
	return finishParse(inv, p, parseSCP(inv, p, argv), func() int { return len(inv.Unsupported) + len(inv.SSH.Unsupported) })
}

func scpFatal(msg string) *UsageError {
	return &UsageError{Msg: "scp: " + msg + "\r\n", Status: ExitSSHError}
}

func scpUsageError(prefix string) *UsageError {
	return &UsageError{Msg: prefix + scpUsage, Status: 1}
}

func parseSCP(inv *SCPInvocation, p *optParser, argv []string) error {
	sshport := -1
	g := getopt{args: argv, opts: scpOptstring}
	err := p.transferOptions(&g, "scp: ", scpUsageError, func(c byte, optarg string) error {
		switch c {
		case '1':
			return scpFatal("SSH protocol v.1 is no longer supported")
		case '2', 'R', 'T':
			// -R only matters for remote-to-remote copies, -T for
			// the legacy protocol's filename checks.
		case 'v', 'q':
			_ = p.sshOption(c, "")
		case 'B':
			_ = p.configLine("Batchmode=yes")
		case 'O':
			inv.LegacyProtocol = true
		case 's':
			inv.LegacyProtocol = false
		case 'P':
			port := a2port(optarg)
			if port <= 0 {
				return scpFatal(`bad port "` + optarg + `"` + "\n")
			}
			sshport = port
		case 'p':
			inv.Preserve = true
		case 'r':
			inv.Recursive = true
		case 'l':
			inv.Unserved = append(inv.Unserved, "-l")
		case 'X':
			if err := checkSFTPXOption(optarg, p); err != nil {
				return scpFatal(err.Msg)
			}
		default:
			// -3 (copy through the local host), -S program,
			// -D sftp_server_path, and -d/-f/-t, scp's server mode.
			inv.Unsupported = append(inv.Unsupported, "-"+string([]byte{c}))
		}
		return nil
	})
	if err != nil {
		return err
	}
	// scp adds this after the user's options, so theirs win.
	_ = p.configLine("ForwardAgent=no")

	operands := argv[g.ind:]
	if len(operands) < 2 {
		return scpUsageError("")
	}
	for i, s := range operands {
		rp, bad := parseSCPOperand(s)
		if bad != "" {
			inv.Unsupported = append(inv.Unsupported, bad)
		}
		if i == len(operands)-1 {
			inv.Target = rp
		} else {
			inv.Sources = append(inv.Sources, rp)
		}
	}
	if len(inv.Unsupported) > 0 {
		return nil
	}
	var remote *RemotePath
	if inv.Target.Remote {
		remote = &inv.Target
		for _, s := range inv.Sources {
			if s.Remote {
				inv.Unsupported = append(inv.Unsupported, "remote-to-remote copy")
				return nil
			}
		}
	} else {
		for i := range inv.Sources {
			s := &inv.Sources[i]
			if !s.Remote {
				inv.Unsupported = append(inv.Unsupported, "local copy")
				return nil
			}
			if remote != nil && (s.Host != remote.Host || s.User != remote.User || s.Port != remote.Port) {
				inv.Unsupported = append(inv.Unsupported, "multiple remote hosts")
				return nil
			}
			remote = s
		}
	}
	// scp runs "ssh ... -p port -l user -- host": after the user's -o
	// options, so -o Port and -o User still win.
	port := sshport
	if remote.Port != "" {
		port, _ = strconv.Atoi(remote.Port)
	}
	if port > 0 {
		p.setPort(port)
	}
	if remote.User != "" {
		p.setUser(remote.User)
	}
	p.inv.Host = remote.Host
	checkSSHTarget(p)
	return nil
}

// parseSCPOperand classifies one operand as scp does: an scp:// URI, or
// [user@]host:path where the colon rules of misc.c's colon() apply, else a
// local path. bad names an operand scp would reject.
func parseSCPOperand(s string) (rp RemotePath, bad string) {
	u, r := parseURI("scp", s)
	switch r {
	case -1:
		return RemotePath{Path: s}, "invalid scp:// URI " + s
	case 0:
		rp = RemotePath{Remote: true, User: u.user, Host: u.host, Path: u.path}
		if u.port > 0 {
			rp.Port = strconv.Itoa(u.port)
		}
		if !u.hasPath {
			rp.Path = "."
		}
	default:
		user, host, path, ok := parseUserHostPath(s)
		if !ok {
			return RemotePath{Path: s}, ""
		}
		rp = RemotePath{Remote: true, User: user, Host: host, Path: path}
	}
	if rp.User != "" && !okname(rp.User) {
		return rp, "invalid user name " + rp.User
	}
	return rp, ""
}

// colon is misc.c's colon(): the index of the ':' that ends the host part
// of [user@]host:path or [user@][v6addr]:path, or -1 for a local path (no
// colon before the first '/', or a leading colon).
func colon(s string) int {
	if s == "" || s[0] == ':' {
		return -1
	}
	bracket := s[0] == '['
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '@' && i+1 < len(s) && s[i+1] == '[':
			bracket = true
		case s[i] == ']' && i+1 < len(s) && s[i+1] == ':' && bracket:
			return i + 1
		case s[i] == ':' && !bracket:
			return i
		case s[i] == '/':
			return -1
		}
	}
	return -1
}

// parseUserHostPath is misc.c's parse_user_host_path: [user@]host:[path],
// with an empty path meaning "." and brackets removed from the host.
func parseUserHostPath(s string) (user, host, path string, ok bool) {
	i := colon(s)
	if i < 0 {
		return "", "", "", false
	}
	path = s[i+1:]
	if path == "" {
		path = "."
	}
	hp := s[:i]
	if j := strings.LastIndexByte(hp, '@'); j >= 0 {
		user, hp = hp[:j], hp[j+1:]
	}
	return user, cleanhostname(hp), path, true
}

// okname is scp's check of a remote user name.
func okname(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c&0x80 != 0 {
			return false
		}
		switch c {
		case '\'', '"', '`', ' ', '#':
			return false
		}
	}
	return true
}

// transferOptions is the option loop of scp and sftp: it reads g's
// options, whose getopt errors are the tool's usage error (with its
// message after prefix). The options both tools pass on to ssh alike,
// and -l, it handles itself; option gets every other one, and its error
// ends the loop. The operands start at g.ind once it returns.
func (p *optParser) transferOptions(g *getopt, prefix string, usage func(string) *UsageError, option func(c byte, arg string) error) error {
	for {
		c, arg, ok, err := g.nextOption(prefix, usage)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		switch c {
		case 'A', '4', '6', 'C':
			_ = p.sshOption(c, "")
		case 'o':
			_ = p.configLine(arg)
		case 'c', 'i', 'F', 'J':
			if err := p.sshOption(c, arg); err != nil {
				// ssh reports it; the tool then fails.
				p.unsupported("-" + string([]byte{c}) + " " + arg)
			}
		case 'l':
			// A bandwidth limit: checked here, applied by the real tool.
			if _, e := sshconf.Strtonum(arg, 1, 100*1024*1024); e != "" {
				return usage("")
			}
			if err := option(c, arg); err != nil {
				return err
			}
		default:
			if err := option(c, arg); err != nil {
				return err
			}
		}
	}
}

// checkSFTPXOption checks scp's and sftp's -X buffer=N / nrequests=N.
// Anything other than those two keys is an error; a doubtful value is left
// to the real binary.
func checkSFTPXOption(arg string, p *optParser) *UsageError {
	var v string
	switch {
	case strings.HasPrefix(arg, "buffer="):
		v = arg[len("buffer="):]
	case strings.HasPrefix(arg, "nrequests="):
		v = arg[len("nrequests="):]
	default:
		return &UsageError{Msg: "Invalid -X option", Status: ExitSSHError}
	}
	if _, e := sshconf.Strtonum(v, 1, 256*1024); e != "" {
		p.unsupported("-X " + arg)
	}
	return nil
}

// checkSSHTarget applies the checks the ssh started by scp or sftp makes
// on its destination; a failure there is the real tools' to report.
func checkSSHTarget(p *optParser) {
	inv := p.inv
	switch {
	case inv.Host == "":
		p.unsupported("empty host name")
	case strings.IndexByte(inv.Host, '@') >= 0 || strings.HasPrefix(inv.Host, "ssh://"):
		// ssh would take this apart again as a destination.
		p.unsupported("unusual host name " + inv.Host)
	case !validHostname(inv.Host):
		p.unsupported("invalid host name " + inv.Host)
	case p.userSet && !validRuser(inv.User):
		p.unsupported("invalid user name " + inv.User)
	}
}
