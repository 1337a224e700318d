// Package fakessh is the shim that stands in for ssh, scp and sftp on
// Ansible's PATH. It parses the command line exactly as OpenSSH 9.2 does,
// hands what the bridge can serve to the daemon, and execs the real binary
// for everything else. It starts several times per Ansible task, so it
// stays small: standard library plus the wire protocol.
//
// # Command lines
//
// ParseSSH, ParseSCP and ParseSFTP mirror ssh.c, scp.c and sftp.c of
// OpenSSH 9.2 (Debian 12): the same getopt (bundling, attached arguments,
// "--", no reordering, and ssh's second option pass after the
// destination), the same destination forms (user@host with the user split
// at the last '@', ssh://, scp:// and sftp:// URIs, [v6addr]:path), and the
// same precedence (-o settings and -p/-l keep the first value, most flags
// overwrite). -o arguments go through a copy of readconf.c's line parser,
// quotes and all.
//
// A command line OpenSSH itself rejects gives a *UsageError holding the
// exact bytes OpenSSH writes to stderr and its exit status. Anything the
// bridge cannot honour (forwardings, agent or X11 forwarding, control
// masters, unknown -o keywords, remote-to-remote copies, interactive sftp,
// ...) is listed in Unsupported instead, and the shim runs the real
// binary, which then also reports any error we did not check for. Checks
// that need the file system (ssh's warning for a missing -i file, sftp
// opening its -b file, scp's check that a local target is a directory) are
// left to the caller.
//
// The shim parses once: NewHello's Hello carries the parsed command line
// to the daemon. The C front (fakessh/front, installed as
// ansible-bridge-front, which the shims link to) sends argv unparsed, and
// the daemon parses it with (*Hello).Parse.
//
// # The C front
//
// Starting any Go binary took ~5 ms of wall here (the runtime's cpuid
// probes trap in a VM, it reads cgroup files and starts threads), the
// static C front ~0.1 ms (linked against musl: glibc's start probes the
// CPU with cpuid, which traps, and took 0.5 ms), and Ansible waits for
// each of its ssh calls: six per task without pipelining. The front serves
// what the daemon serves: it sends the hello (argv, environment as
// os.Environ gives it, directory as os.Getwd, umask, terminal size,
// whether it could prompt), pumps stdin once accepted, writes output,
// passes a terminating signal on and exits with the daemon's status.
// Everything else it hands to this package's shim by exec, same pid, argv
// and environment: before it dials (stdin the controlling terminal,
// DisableEnv, the socket unusable, no daemon), or on the daemon's Handover
// (a command line that does not parse as served) as if it had never
// called; and mid-call (a prompt, a fallback, a raw terminal) with the
// connection, the unread frame on it, and ResumeEnv saying how far it got.
// The daemon counts the handovers it causes in status (front_handovers).
// front_test.go compares its hello with this shim's and runs every
// handover.
//
// The tests compare the parsers with the real ssh -G, scp and sftp when
// OpenSSH 9.2 is installed; FAKESSH_DIFF_N=n adds n random command lines.
//
// # Batch files
//
// ParseSFTPBatch reads what Ansible writes to "sftp -b -": one command per
// line, with sftp's quoting (Ansible quotes paths with shlex.quote), the
// '-' (ignore errors) and '@' (no echo) prefixes, and the echo text, so an
// executor can reproduce sftp's output line for line.
package fakessh
