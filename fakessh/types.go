package fakessh

// ExitSSHError (255) is the exit status of ssh when ssh itself fails (a
// command line it rejects, a fatal error, a connection that fails), as
// opposed to the remote command's status, which it passes on. scp and
// sftp use it for their fatal errors too.
const ExitSSHError = 255

// Option is one ssh_config style setting given on the command line
// (-o Key=Value, -o Key Value, or a flag such as -p, -l, -i, -J, -C that
// OpenSSH maps onto a config keyword). Key is canonical lower case
// ("port", "user", "identityfile", "proxyjump", "compression", ...).
type Option struct {
	Key   string
	Value string
	// Words are the value's words as ssh_config quoting splits them, for
	// the keywords that take a list (UserKnownHostsFile,
	// GlobalKnownHostsFile), whose Value is them joined with spaces; nil
	// for the others, whose Value is one word.
	Words []string
	// Flag is the flag that gave the option where ssh treats it apart
	// ("-i": a file it cannot stat is warned about and skipped).
	Flag string `json:",omitempty"`
}

// SSHInvocation is a parsed ssh(1) command line.
type SSHInvocation struct {
	// Destination as written: the host part only (user and port split off;
	// ssh:// URIs decoded), not lower-cased and before any -o HostName.
	// ssh keeps "[::1]" with its brackets; ssh:// URIs cannot hold IPv6
	// addresses in OpenSSH 9.2.
	Host string
	// User from -l, or user@host, or ssh://user@host ("" when none given).
	// -l and -o User win over user@host, as in OpenSSH.
	User string
	// Port from -p, -o Port or ssh://host:port, as a decimal number
	// (service names resolved), "" when none given.
	Port string
	// Options in command-line order, including those implied by flags
	// (-p → port, -l → user, -i → identityfile, -J → proxyjump,
	// -C → compression=yes, -q/-v → loglevel, -t/-T → requesttty,
	// -n → stdinnull, -a → forwardagent=no, -x, -4/-6, -e, -k, -g;
	// -F is in ConfigFile) and the destination's user and port.
	// Only settings in effect are kept: as in OpenSSH the first value of a
	// single-valued key wins and a later one is dropped, while a flag
	// overwrites and replaces earlier values, so Get returns what ssh
	// would use. identityfile, certificatefile and sendenv accumulate.
	// Values of yes/no keys are lower case, with true/false as yes/no;
	// old alias keys are stored under the current name.
	Options []Option
	// ConfigFile from -F ("" when not given; "none" disables config).
	ConfigFile string
	// Command is the remote command words after the destination, unjoined.
	// The string sent to the server is strings.Join(Command, " ").
	Command []string
	// TTY is the tty request in effect: -1 no (-T, RequestTTY=no), 0 auto
	// (the default), 1 yes (-t), 2 force (-tt, RequestTTY=force). As in
	// OpenSSH, -t after yes is force and -t after force is yes again.
	TTY int
	// Quiet is -q; Verbose is ssh's debug count from -v.
	Quiet   bool
	Verbose int
	// Subsystem is -s or SessionType=subsystem: Command[0] names a
	// subsystem.
	Subsystem bool
	// Control is the -O argument ("check", "stop", "exit", ...) or "".
	Control string
	// NoStdin is -n or StdinNull=yes.
	NoStdin bool
	// Unsupported lists flags or options the bridge cannot honour
	// (-L, -R, -D, -W, -w, -N, -f, -M, -S, -A, -X, -Y, -G, -E, -y, -B, -b,
	// -c, -m, -I, -K, -V, -Q, -O forward/cancel/proxy; -o keys such as
	// LocalForward, ForwardAgent=yes, ForwardX11=yes, Tunnel=yes,
	// PermitLocalCommand=yes, RemoteCommand, SessionType=none, and any
	// keyword not known to the parser) and destinations only the real
	// ssh can judge. A non-empty list makes the shim exec the real ssh.
	Unsupported []string
}

// Get returns the first value given for key (canonical lower case) and
// whether it was given at all.
func (s *SSHInvocation) Get(key string) (string, bool) {
	for _, o := range s.Options {
		if o.Key == key {
			return o.Value, true
		}
	}
	return "", false
}

// All returns every value given for key, in order (for identityfile).
func (s *SSHInvocation) All(key string) []string {
	var out []string
	for _, o := range s.Options {
		if o.Key == key {
			out = append(out, o.Value)
		}
	}
	return out
}

// RemotePath is one scp operand.
type RemotePath struct {
	Remote bool   // host:path form
	User   string // from user@host:path
	Host   string // "" for local paths; brackets removed for [v6]:path
	Port   string // from scp://user@host:port/path
	Path   string // remote path ("." for "host:", the remote home) or local path
}

// SCPInvocation is a parsed scp(1) command line.
type SCPInvocation struct {
	// SSH is the ssh command scp would run: scp's fixed options (-x,
	// PermitLocalCommand=no, ...), the user's (-o, -i, -F, -J, -C, -q, -v;
	// -l is in Unserved), then the remote operand's
	// port (or -P) and user, which -o Port / -o User given earlier beat.
	// Host/User/Port are the effective ones for the single remote host;
	// Command and Subsystem are left empty.
	SSH       SSHInvocation
	Sources   []RemotePath
	Target    RemotePath
	Recursive bool // -r
	Preserve  bool // -p
	// LegacyProtocol is -O: the old SCP protocol, where the remote shell
	// expands (and unquotes) remote paths. Without it OpenSSH 9 uses SFTP
	// and takes remote paths literally.
	LegacyProtocol bool
	// Unserved names options only the real scp applies (-l, a bandwidth
	// limit): the daemon hands such a copy back to it, over its connection.
	Unserved []string
	// Unsupported as in SSHInvocation (-3, remote-to-remote copies, -S
	// program, -D sftp_server_path, ...).
	Unsupported []string
}

// SFTPInvocation is a parsed sftp(1) command line.
type SFTPInvocation struct {
	// SSH carries the connection options and Host/User/Port from the
	// destination ([user@]host[:path] or sftp://[user@]host[:port][/path]).
	SSH SSHInvocation
	// BatchFile from -b ("-" is stdin, "" means interactive).
	BatchFile string
	// InitialPath from host:path (cd there first, or fetch it if a file).
	InitialPath string
	Preserve    bool // -p
	Recursive   bool // -r
	// Quiet is sftp's quiet mode (-q or -b, undone by -N): it hides the
	// "Uploading ..."/"Fetching ..." lines.
	Quiet bool
	// Unserved names options only the real sftp applies (-a, resumed
	// transfers; -l, a bandwidth limit), as SCPInvocation's.
	Unserved []string
	// Unsupported as in SSHInvocation (-S program, -D server path, -s
	// subsystem, interactive mode without -b, ...).
	Unsupported []string
}

// BatchCommand is one line of an sftp batch file.
type BatchCommand struct {
	Line int // 1-based line number in the batch file
	// IgnoreError is the leading '-': a failure does not abort the batch.
	IgnoreError bool
	// Quiet is a leading '@': the line is not echoed.
	Quiet bool
	// Text is the line as read, newline removed, prefixes and white space
	// kept: sftp echoes "sftp> " + Text (through its non-printable filter)
	// unless Quiet, blank and comment lines included.
	Text string
	// Name is the command, lower case, with aliases folded: quit (bye,
	// exit), cd (chdir), lcd (lchdir), ls (dir), get (mget), put (mput),
	// copy (cp), help (?); "!" is a shell escape; "" is a blank or comment
	// line; "invalid" a line sftp cannot parse (see Err).
	Name  string
	Flags string // single-letter flags given, e.g. "Pr" for "put -P -r"
	// Args are the operands sftp uses, unquoted and with glob escapes
	// removed; operands sftp ignores are dropped. chmod, chown and chgrp
	// have the number first, lumask only the number; lls and "!" have the
	// raw rest of the line.
	Args []string
	// Glob is set when a path sftp expands with glob(3) has a wildcard
	// (*, ? or [) that quoting did not escape.
	Glob bool
	// Err is the error sftp prints for this line instead of running it
	// ("Invalid command.", "put: Invalid flag -x", ...), without a line
	// ending. The line then fails, which ends the batch unless IgnoreError.
	Err string
}

// HasCommand tells whether there is a remote command to run: ssh joins
// the words with spaces, so "" alone is none (a login shell) and "" ""
// is one.
func (inv *SSHInvocation) HasCommand() bool {
	return len(inv.Command) > 1 || len(inv.Command) == 1 && inv.Command[0] != ""
}
