package fakessh

// Option is one ssh_config style setting given on the command line
// (-o Key=Value, -o Key Value, or a flag such as -p, -l, -i, -J, -C that
// OpenSSH maps onto a config keyword). Key is canonical lower case
// ("port", "user", "identityfile", "proxyjump", "compression", ...).
type Option struct {
	Key   string
	Value string
}

// SSHInvocation is a parsed ssh(1) command line.
type SSHInvocation struct {
	// Destination as written: the host part only (user and port split off;
	// ssh:// URIs and [v6]:port decoded).
	Host string
	// User from -l, or user@host, or ssh://user@host ("" when none given).
	// -l and -o User win over user@host, as in OpenSSH.
	User string
	// Port from -p or ssh://host:port ("" when none given).
	Port string
	// Options in command-line order, including those implied by flags
	// (-p → port, -l → user, -i → identityfile, -J → proxyjump,
	// -C → compression=yes, -q → loglevel=quiet, -F is in ConfigFile).
	// OpenSSH semantics: the first value of a single-valued key wins;
	// identityfile accumulates.
	Options []Option
	// ConfigFile from -F ("" when not given; "none" disables config).
	ConfigFile string
	// Command is the remote command words after the destination, unjoined.
	// The string sent to the server is strings.Join(Command, " ").
	Command []string
	// TTY: number of -t flags (0, 1, 2+); -1 when -T was given last.
	TTY int
	// Quiet is -q; Verbose counts -v.
	Quiet   bool
	Verbose int
	// Subsystem is -s: Command[0] names a subsystem.
	Subsystem bool
	// Control is the -O argument ("check", "stop", "exit", ...) or "".
	Control string
	// NoStdin is -n.
	NoStdin bool
	// Unsupported lists flags or options the bridge cannot honour
	// (port forwarding, -N, -f, -W, -M, -S, -A, -X/-Y, -G, -w, -e, -E,
	// -B, -b, -c, -m, -k?; -o keys such as LocalForward, RemoteForward,
	// DynamicForward, ForwardAgent=yes, ForwardX11=yes, Tunnel,
	// PermitLocalCommand=yes, LocalCommand, RemoteCommand, unknown keys).
	// A non-empty list makes the shim exec the real ssh.
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
	Path   string // remote path ("" means the remote home) or local path
}

// SCPInvocation is a parsed scp(1) command line.
type SCPInvocation struct {
	// SSH carries the connection options (-o, -P → port, -i, -F, -J, -C,
	// -q, -v, -l is the bandwidth limit and is ignored) with Host/User/Port
	// left empty: they come from the remote operand.
	SSH       SSHInvocation
	Sources   []RemotePath
	Target    RemotePath
	Recursive bool // -r
	Preserve  bool // -p
	// Unsupported as in SSHInvocation (-3, remote-to-remote copies, -S
	// program, -D sftp_server_path, -R ...).
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
	// Unsupported as in SSHInvocation (-S program, -D server path, -s
	// subsystem, interactive mode without -b, ...).
	Unsupported []string
}

// BatchCommand is one line of an sftp batch file.
type BatchCommand struct {
	Line int // 1-based line number in the batch file
	// IgnoreError is the leading '-': a failure does not abort the batch.
	IgnoreError bool
	// Text is the line as sftp echoes it ("sftp> " + Text), without the
	// '-' prefix, trimmed.
	Text  string
	Name  string   // command name, lower case: put, get, mkdir, rm, ...
	Flags string   // single-letter flags given, e.g. "Pr" for "put -P -r"
	Args  []string // arguments after flags, unquoted like sftp does
}
