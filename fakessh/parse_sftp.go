package fakessh

import (
	"bufio"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/fakessh/sshconf"
)

const sftpOptstring = "1246AafhNpqrvCc:D:i:l:o:s:S:b:B:F:J:P:R:X:"

const sftpUsage = `usage: sftp [-46AaCfNpqrv] [-B buffer_size] [-b batchfile] [-c cipher]
          [-D sftp_server_command] [-F ssh_config] [-i identity_file]
          [-J destination] [-l limit] [-o ssh_option] [-P port]
          [-R num_requests] [-S program] [-s subsystem | sftp_server]
          [-X sftp_option] destination
`

// ParseSFTP parses an sftp(1) command line (argv without argv[0]) the way
// OpenSSH 9.2 does. SFTPInvocation.SSH describes the ssh that sftp would
// start, with Host, User and Port from the destination. A command line
// sftp itself rejects gives a *UsageError. The bridge only serves batch
// mode, so a missing -b makes the invocation unsupported. The batch file
// is not opened here: sftp's own "No such file or directory (x)." for a
// missing one is left to the caller.
func ParseSFTP(argv []string) (*SFTPInvocation, error) {
	inv := &SFTPInvocation{}
	p := newOptParser(&inv.SSH, toolSFTP)
	// sftp starts ssh with these before the user's options, so they win.
	for _, o := range []string{"ForwardX11 no", "PermitLocalCommand no", "ClearAllForwardings yes"} {
		_ = p.configLine(o)
	}
	return finishParse(inv, p, parseSFTP(inv, p, argv), func() int { return len(inv.Unsupported) + len(inv.SSH.Unsupported) })
}

func sftpUsageError(prefix string) *UsageError {
	return &UsageError{Msg: prefix + sftpUsage, Status: 1}
}

func parseSFTP(inv *SFTPInvocation, p *optParser, argv []string) error {
	port := -1
	debugLevel := 0
	batch, noisy, direct := false, false, false
	server := ""
	g := getopt{args: argv, opts: sftpOptstring}
	err := p.transferOptions(&g, "", sftpUsageError, func(c byte, optarg string) error {
		switch c {
		case 'q':
			inv.Quiet = true
			_ = p.sshOption(c, "")
		case 'P':
			port = a2port(optarg)
			if port <= 0 {
				return fatalError(`Bad port "` + optarg + `"` + "\n")
			}
		case 'v':
			// sftp passes at most three -v on to ssh.
			if debugLevel < 3 {
				_ = p.sshOption(c, "")
			}
			debugLevel++
		case '1':
			return fatalError("SSH protocol v.1 is no longer supported")
		case '2', 'f':
			// -f (fsync) only tunes transfers.
		case 'a', 'l':
			// Resumed transfers and a bandwidth limit.
			inv.Unserved = append(inv.Unserved, "-"+string([]byte{c}))
		case 'B':
			if !validStrtol(optarg) {
				return fatalError(`Invalid buffer size "` + optarg + `"`)
			}
		case 'b':
			if batch {
				return fatalError("Batch file already specified.")
			}
			if optarg == "" {
				// sftp opens the file here; only this failure is
				// certain without touching the file system.
				return fatalError("No such file or directory ().")
			}
			inv.BatchFile = optarg
			batch = true
			inv.Quiet = true
			_ = p.configLine("batchmode yes")
		case 'N':
			noisy = true
		case 'p':
			inv.Preserve = true
		case 'D':
			direct = true
			inv.Unsupported = append(inv.Unsupported, "-D")
		case 'r':
			inv.Recursive = true
		case 'R':
			if !validStrtol(optarg) {
				return fatalError(`Invalid number of requests "` + optarg + `"`)
			}
		case 's':
			server = optarg
		case 'S':
			inv.Unsupported = append(inv.Unsupported, "-S")
		case 'X':
			if err := checkSFTPXOption(optarg, p); err != nil {
				return fatalError(err.Msg)
			}
		default: // -h
			return sftpUsageError("")
		}
		return nil
	})
	if err != nil {
		return err
	}
	if noisy {
		inv.Quiet = false
	}
	// sftp adds this after the user's options, so theirs win.
	_ = p.configLine("ForwardAgent no")
	if direct {
		return nil
	}
	operands := argv[g.ind:]
	if len(operands) == 0 || len(operands) > 2 {
		return sftpUsageError("")
	}
	dest := operands[0]
	var user, host string
	u, r := parseURI("sftp", dest)
	switch r {
	case -1:
		return sftpUsageError("")
	case 0:
		user, host = u.user, u.host
		if u.port > 0 {
			port = u.port
		}
		if u.hasPath {
			inv.InitialPath = u.path
		}
	default:
		var ok bool
		if user, host, inv.InitialPath, ok = parseUserHostPath(dest); ok {
			break
		}
		if user, host, ok = parseUserHostPort(dest); ok {
			break // [user@]host[:port]: the port is ignored
		}
		user, host = "", cleanhostname(dest)
	}
	if host == "" {
		return sftpUsageError("Missing hostname\n")
	}
	// sftp runs "ssh ... -oPort N -l user -s -- host sftp".
	if port > 0 {
		p.setPort(port)
	}
	if user != "" {
		p.setUser(user)
	}
	p.inv.Host = host
	if server != "" && server != "sftp" {
		inv.Unsupported = append(inv.Unsupported, "-s "+server)
	}
	if len(operands) == 2 {
		inv.Unsupported = append(inv.Unsupported, "local path operand")
	}
	if !batch {
		inv.Unsupported = append(inv.Unsupported, "interactive")
	}
	checkSSHTarget(p)
	return nil
}

// validStrtol is sftp's check of -B and -R: strtol must take the whole
// argument and give a non-zero value.
func validStrtol(s string) bool {
	v, end, _ := sshconf.Strtoll(s)
	return end == len(s) && v != 0
}

// sftp reads its batch file with fgets into a 2048 byte buffer, so longer
// lines arrive in pieces that each run as a command.
const sftpLineMax = 2048 - 1

// ParseSFTPBatch reads an sftp batch file (sftp -b) and parses each line
// as sftp 9.2 does. Every line read is returned, blank and comment lines
// included, because sftp echoes them too ("sftp> " + Text). Lines sftp
// rejects (unknown commands, bad flags, missing paths) come back with Err
// set: they fail when run, which stops the batch unless IgnoreError. The
// error is only for reading r.
func ParseSFTPBatch(r io.Reader) ([]BatchCommand, error) {
	br := bufio.NewReader(r)
	var cmds []BatchCommand
	for n := 1; ; n++ {
		line, err := readFgets(br)
		if line == "" && err != nil {
			if errors.Is(err, io.EOF) {
				return cmds, nil
			}
			return cmds, err
		}
		// fgets keeps the newline and sftp cuts at the first one; C
		// strings also end at a NUL.
		if i := strings.IndexAny(line, "\n\x00"); i >= 0 {
			line = line[:i]
		}
		cmd := parseBatchLine(line)
		cmd.Line = n
		cmds = append(cmds, cmd)
	}
}

// readFgets returns what one fgets call would: up to and including a
// newline, at most sftpLineMax bytes.
func readFgets(br *bufio.Reader) (string, error) {
	var b []byte
	for len(b) < sftpLineMax {
		c, err := br.ReadByte()
		if err != nil {
			return string(b), err
		}
		b = append(b, c)
		if c == '\n' {
			break
		}
	}
	return string(b), nil
}

// batchCmd is one entry of sftp.c's command table.
type batchCmd struct {
	name, canonical string
	flags           string // getopt string of its flags
}

// batchCmds is sftp.c's cmds[] table; canonical folds the aliases.
var batchCmds = []batchCmd{
	{"bye", "quit", ""},
	{"cd", "cd", ""},
	{"chdir", "cd", ""},
	{"chgrp", "chgrp", "h"},
	{"chmod", "chmod", "h"},
	{"chown", "chown", "h"},
	{"copy", "copy", ""},
	{"cp", "copy", ""},
	{"df", "df", "hi"},
	{"dir", "ls", "1Safhlnrt"},
	{"exit", "quit", ""},
	{"get", "get", "afPpRr"},
	{"help", "help", ""},
	{"lcd", "lcd", ""},
	{"lchdir", "lcd", ""},
	{"lls", "lls", ""},
	{"lmkdir", "lmkdir", ""},
	{"ln", "ln", "s"},
	{"lpwd", "lpwd", ""},
	{"ls", "ls", "1Safhlnrt"},
	{"lumask", "lumask", "h"},
	{"mkdir", "mkdir", ""},
	{"mget", "get", "afPpRr"},
	{"mput", "put", "afPpRr"},
	{"progress", "progress", ""},
	{"put", "put", "afPpRr"},
	{"pwd", "pwd", ""},
	{"quit", "quit", ""},
	{"reget", "reget", "afPpRr"},
	{"rename", "rename", "l"},
	{"reput", "reput", "afPpRr"},
	{"rm", "rm", ""},
	{"rmdir", "rmdir", ""},
	{"symlink", "symlink", ""},
	{"version", "version", ""},
	{"!", "!", ""},
	{"?", "help", ""},
}

// parseBatchLine is sftp.c's parse_args for one batch line.
func parseBatchLine(line string) BatchCommand {
	cmd := BatchCommand{Text: line}
	cp := strings.TrimLeft(line, wsChars)
	// Leading '-' ignores errors, '@' suppresses the echo, in any mix.
	for cp != "" {
		if cp[0] == '-' {
			cmd.IgnoreError = true
		} else if cp[0] == '@' {
			cmd.Quiet = true
		} else {
			break
		}
		cp = cp[1:]
	}
	cp = strings.TrimLeft(cp, wsChars)
	if cp == "" || cp[0] == '#' {
		return cmd // blank or comment: echoed, nothing runs
	}
	argv, errMsg := makeargv(cp)
	if errMsg != "" {
		cmd.Name, cmd.Err = "invalid", errMsg
		return cmd
	}
	var bc *batchCmd
	for i := range batchCmds {
		if len(argv) > 0 && strings.EqualFold(batchCmds[i].name, argv[0]) {
			bc = &batchCmds[i]
			break
		}
	}
	if cp[0] == '!' {
		// A shell escape takes the raw rest of the line.
		cmd.Name, cmd.Args = "!", []string{cp[1:]}
		return cmd
	}
	if bc == nil {
		cmd.Name, cmd.Err = "invalid", "Invalid command."
		return cmd
	}
	cmd.Name = bc.canonical
	if bc.canonical == "lls" {
		// lls passes the raw rest of the line to ls(1).
		cmd.Args = []string{cp[len(bc.name):]}
		return cmd
	}

	g := getopt{args: argv[1:], opts: bc.flags}
	for {
		c, _, st := g.next()
		if st == optDone {
			break
		}
		if st != optOK {
			name := bc.name
			if bc.canonical == "ls" {
				name = "ls" // sftp names ls even for dir
			}
			cmd.Err = name + ": Invalid flag -" + string([]byte{c})
			return cmd
		}
		cmd.Flags += string([]byte{c})
	}
	rest := argv[1+g.ind:]
	needPaths := func(n int, msg string) bool {
		if len(rest) < n {
			cmd.Err = msg
			return false
		}
		return true
	}
	switch bc.canonical {
	case "get", "reget", "put", "reput":
		if !needPaths(1, "You must specify at least one path after a "+bc.name+" command.") {
			return cmd
		}
		cmd.Glob = hasGlob(rest[0])
		cmd.Args = []string{undoGlobEscape(rest[0])}
		if len(rest) > 1 {
			cmd.Args = append(cmd.Args, undoGlobEscape(rest[1]))
		}
	case "ln", "copy", "rename", "symlink":
		if !needPaths(2, "You must specify two paths after a "+bc.name+" command.") {
			return cmd
		}
		cmd.Args = []string{undoGlobEscape(rest[0]), undoGlobEscape(rest[1])}
	case "rm", "mkdir", "rmdir", "lmkdir":
		if !needPaths(1, "You must specify a path after a "+bc.name+" command.") {
			return cmd
		}
		if bc.canonical == "rm" {
			cmd.Glob = hasGlob(rest[0])
		}
		cmd.Args = []string{undoGlobEscape(rest[0])}
	case "cd", "lcd", "df":
		if len(rest) > 0 {
			cmd.Args = []string{undoGlobEscape(rest[0])}
		}
	case "ls":
		if len(rest) > 0 {
			cmd.Glob = hasGlob(rest[0])
			cmd.Args = []string{undoGlobEscape(rest[0])}
		}
	case "chmod", "lumask", "chown", "chgrp":
		base := 10
		if bc.canonical == "chmod" || bc.canonical == "lumask" {
			base = 8
		}
		if len(rest) < 1 || !validNumArg(rest[0], base) {
			cmd.Err = "You must supply a numeric argument to the " + bc.name + " command."
			return cmd
		}
		cmd.Args = []string{rest[0]}
		if bc.canonical == "lumask" {
			break
		}
		if !needPaths(2, "You must specify a path after a "+bc.name+" command.") {
			cmd.Args = nil
			return cmd
		}
		cmd.Glob = hasGlob(rest[1])
		cmd.Args = append(cmd.Args, undoGlobEscape(rest[1]))
	}
	return cmd
}

// validNumArg is sftp's strtoll check of a chmod/chown/chgrp/lumask number.
func validNumArg(s string, base int) bool {
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	if t == "" {
		return false
	}
	v, err := strconv.ParseUint(t, base, 64)
	if err != nil {
		return false
	}
	// Overflowing strtoll would clamp and fail the range check anyway.
	return v <= 1<<32-1 && (!neg || v == 0)
}

// makeargv is sftp.c's makeargv: shell-like words with single and double
// quotes and backslash escapes, '#' (unquoted) ends the line. Wildcards
// that must stay literal come back escaped with a backslash, as sftp hands
// them to glob(3). errMsg is the error sftp prints for a bad line.
func makeargv(arg string) (argv []string, errMsg string) {
	const maxArgs, maxArgLen = 128, 8192
	if len(arg) > maxArgLen-1 {
		return nil, "string too long"
	}
	const (
		stStart = iota
		stSquote
		stDquote
		stUnquoted
	)
	state := stStart
	var cur []byte
	used := 0 // bytes of sftp's static buffer used by finished words
	at := func(i int) byte {
		if i < len(arg) {
			return arg[i]
		}
		return 0
	}
	for i := 0; ; i++ {
		if len(argv) >= maxArgs+1 {
			return nil, "Too many arguments."
		}
		c := at(i)
		quoted := state == stSquote || state == stDquote
		switch {
		case c != 0 && isSpace(c):
			if state == stUnquoted {
				argv = append(argv, string(cur))
				used += len(cur) + 1
				cur, state = nil, stStart
			} else if state != stStart {
				cur = append(cur, c)
			}
		case c == '"' || c == '\'':
			q := stSquote
			if c == '"' {
				q = stDquote
			}
			switch state {
			case stStart, stUnquoted:
				state = q
			case q:
				state = stUnquoted
			default:
				cur = append(cur, c)
			}
		case c == '\\':
			n := at(i + 1)
			if quoted {
				quot := byte('\'')
				if state == stDquote {
					quot = '"'
				}
				switch {
				case n == quot:
					i++
					cur = append(cur, n)
				case n == '?' || n == '[' || n == '*':
					if used+len(cur) >= maxArgLen-5 {
						return nil, "string too long"
					}
					i++
					cur = append(cur, '\\', '\\', '\\', n)
				case n == 0:
					cur = append(cur, c) // then "Unterminated"
				default:
					i++
					cur = append(cur, c, n)
				}
			} else {
				state = stUnquoted
				switch {
				case n == '?' || n == '[' || n == '*' || n == '\\':
					i++
					cur = append(cur, c, n)
				case n == 0:
					// A trailing backslash escapes nothing.
				default:
					i++
					cur = append(cur, n)
				}
			}
		case c == '#' && quoted:
			cur = append(cur, c)
		case c == '#' || c == 0:
			if c == 0 && quoted {
				return nil, "Unterminated quoted argument"
			}
			if state == stUnquoted {
				argv = append(argv, string(cur))
			}
			return argv, ""
		default:
			if state == stStart {
				state = stUnquoted
			}
			if quoted && (c == '?' || c == '[' || c == '*') {
				if used+len(cur) >= maxArgLen-3 {
					return nil, "string too long"
				}
				cur = append(cur, '\\', c)
			} else {
				cur = append(cur, c)
			}
		}
	}
}

// undoGlobEscape is sftp.c's undo_glob_escape: it removes the escapes
// makeargv put before wildcards and backslashes, for paths sftp does not
// glob. Other backslashes stay.
func undoGlobEscape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b = append(b, s[i])
			continue
		}
		i++
		if i == len(s) {
			b = append(b, '\\')
			break
		}
		switch s[i] {
		case '?', '[', '*', '\\':
			b = append(b, s[i])
		default:
			b = append(b, '\\', s[i])
		}
	}
	return string(b)
}

// hasGlob reports whether a makeargv word has a wildcard glob(3) would
// expand, that is one not escaped by a backslash.
func hasGlob(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return true
		}
	}
	return false
}
