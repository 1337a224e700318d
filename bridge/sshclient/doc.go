// Package sshclient resolves the effective connection settings of an ssh
// invocation and dials the target with golang.org/x/crypto/ssh, behaving
// like OpenSSH 9.2's ssh: the same configuration precedence, the same
// known_hosts decisions, the same authentication order, and the same
// messages on stderr, so that a failure seen through the bridge reads
// exactly like one from the real client.
//
// Resolve turns a parsed command line (fakessh.SSHInvocation) and the
// shim's environment (Env) into Settings (ControlPath, expanded, says
// which invocations may share a connection); Dial connects; KeepAlive
// watches a connection.
//
// # Configuration
//
// Sources are, in order: command-line options (as the shim's parser kept
// them), then ~/.ssh/config and /etc/ssh/ssh_config, or only the -F file
// ("-F none" reads no file). The first value obtained for a keyword wins;
// IdentityFile and CertificateFile accumulate. ~/.ssh/config is refused
// when group- or world-writable, as OpenSSH does.
//
// Files are split into Host and Match blocks here, with values kept
// verbatim and tokenised per keyword as OpenSSH does (package
// fakessh/sshconf); Host/Match/Include are evaluated per invocation. (An
// ssh_config library was used once, only to group lines into blocks: it
// strips quotes, handles '#' differently, resolves relative Includes
// against the daemon's $HOME and fails the whole file on Match criteria
// it does not know.) Include globs are read in sorted order,
// relative to ~/.ssh (user files) or /etc/ssh (system files), so Debian's
// "Include /etc/ssh/ssh_config.d/*.conf" works. Host patterns match the
// host as typed, case-sensitively; Match host/originalhost match case
// insensitively. Match all, canonical, final (with OpenSSH's second pass),
// host, originalhost, user and localuser are supported; Match exec is not
// run: its block is skipped and recorded in Settings.Unsupported, where
// the caller can log it or choose the real ssh. Invalid values and
// keywords OpenSSH 9.2 does not know (less IgnoreUnknown's) give
// OpenSSH's messages ("Bad port 'x'.", "Bad configuration option: x",
// "terminating, N bad configuration options"), at the command line's
// LogLevel, as ssh prints them before it has read its files; keywords it
// knows and the bridge does not apply are ignored, or noted in
// Unsupported where they would change what ssh says or does.
//
// Errors come in ssh.c's order: the configuration, a ProxyJump loop,
// then the expansion of ControlPath, IdentityAgent and
// UserKnownHostsFile, the ProxyCommand, IdentityFile and CertificateFile
// (vdollar_percent_expand's messages, under the configured LogLevel).
//
// HostName expands %h and is lower-cased; IdentityFile, CertificateFile,
// IdentityAgent and UserKnownHostsFile expand ~, the %C %d %h %i %k %L %l
// %n %p %r %u tokens and ${VAR} from the shim's environment; ProxyCommand
// expands %h %n %p %r. Relative paths resolve against the shim's working
// directory (the daemon's when Env.Cwd is empty). OpenSSH takes ~ from the
// password database, not $HOME, so Env.Home should be that. Defaults are OpenSSH's: port 22, the local user, the
// existing ~/.ssh/id_* files when no IdentityFile is set, ~/.ssh/known_hosts
// and known_hosts2, /etc/ssh/ssh_known_hosts and ssh_known_hosts2,
// StrictHostKeyChecking ask, ServerAliveCountMax 3, three password
// prompts, PreferredAuthentications
// gssapi-with-mic,hostbased,publickey,keyboard-interactive,password (the
// first two are never attempted).
//
// Ciphers, MACs, KexAlgorithms and HostKeyAlgorithms are assembled as
// OpenSSH's kex_assemble_names does ("+" appends to OpenSSH 9.2's default,
// "-" removes patterns from it, "^" puts names first, a plain list
// replaces it) and then filtered to what x/crypto implements; a plain
// HostKeyAlgorithms list is used in its own order, otherwise known_hosts
// reorders it. A name OpenSSH refuses, or a list x/crypto implements
// nothing of, goes to Settings.Unsupported (the caller falls back).
//
// ProxyJump and ProxyCommand share one first-wins slot: whichever comes
// first is used, "ProxyJump none" blocks later ProxyJumps only. A ProxyJump
// hop is resolved as OpenSSH's generated "ssh -l user -p port -J rest -F
// file host" would be: only those options carry over, the rest comes from
// ssh_config for the hop. "jumphost loop via host" is detected likewise.
//
// # Host keys
//
// known_hosts lines are parsed with ssh.ParseKnownHosts and matched here
// (hashed names, patterns, negation, [host]:port for ports other than 22,
// HostKeyAlias, @revoked, @cert-authority) because x/crypto's knownhosts
// callback only considers the first key of each type for a host and fails
// on any malformed line, while OpenSSH accepts any matching key and skips
// bad lines. As in OpenSSH, a known key of another type counts as a
// changed key, and host key algorithms of known types are preferred
// (order_hostkeyalgs) from OpenSSH's default order, not x/crypto's.
//
// Unknown hosts: StrictHostKeyChecking=yes refuses ("No ED25519 host key
// is known for ... and you have requested strict checking."); accept-new
// and no add the key to the first UserKnownHostsFile (hashed with
// HashKnownHosts, creating ~/.ssh 0700 when needed) and report "Warning:
// Permanently added ..."; ask shows OpenSSH's "The authenticity of host
// ..." question through the Prompter, which the shim can show on its
// terminal; without an answer (BatchMode, no Prompter, a Prompter error)
// it fails with "Host key verification failed." as ssh without a tty does.
// A changed or revoked key prints OpenSSH's warning banner and fails,
// except with StrictHostKeyChecking=no, where, as in OpenSSH, the
// connection goes on with password and keyboard-interactive
// authentication disabled (and, with the default known_hosts files,
// OpenSSH's "UpdateHostkeys is disabled" notice). At a re-key only the
// key accepted first is accepted again. For a port other than 22, a key
// (or certificate CA) that known_hosts holds for the bare host name, with
// no "[host]:port" entry at all, is accepted, as OpenSSH's "checking
// without port identifier" does. Without a user known_hosts file
// (UserKnownHostsFile none) nothing can be recorded, so an unknown host
// fails with only "Host key verification failed." whatever
// StrictHostKeyChecking says, as in OpenSSH.
//
// The check follows sshconnect.c's check_host_key step by step: a host
// certificate is looked up by its CA among @cert-authority lines and
// checked as sshkey_cert_check_host does (a failure prints its
// "Certificate invalid: ..." line); one no CA vouches for, or that fails
// a check, is checked again as its plain key; @revoked lines cover a key,
// a certificate's key and a certificate's CA, and a revoked certificate
// is not checked again as its plain key.
//
// UpdateHostKeys (on with the default known_hosts, VerifyHostKeyDNS off):
// for a key trusted from a user known_hosts file, the server's
// hostkeys-00@openssh.com keys replace the host's lines in it once the
// new ones are proven (hostkeys-prove-00@openssh.com), as OpenSSH's
// client_input_hostkeys does; ask makes the invocation fall back.
//
// A connection is shared only as a ControlMaster's is (see package
// bridge): its key was checked when it was made, and an edited
// known_hosts file counts from the next connection, as with OpenSSH.
//
// # Authentication
//
// Methods are tried in PreferredAuthentications order among those the
// server lists (learned from the "none" request), each retried while it
// has something left, starting over when the server's list changes, as in
// sshconnect2.c; this is driven through x/crypto's AuthCallback. Public
// keys are offered in pubkey_prepare order: CertificateFile certificates
// first, then the agent's copies of the configured files (in agent
// order), then the agent's other keys (dropped by IdentitiesOnly), then
// the files the agent does not hold (each with FILE-cert.pub when no
// CertificateFile is set). A certificate is signed by the identity
// holding its key, else by a file named like it, else by a private key
// loaded from the certificate's own file, as sign_and_send_pubkey does
// (with its "Load key" lines: bad permissions, "Is a directory",
// "Permission denied", ...). A key's public half comes from
// the file, the public part of an OpenSSH-format key, or file.pub, so a
// passphrase is asked ("Enter passphrase for key '...': ") only once the
// server accepts the key; unprotected key files get OpenSSH's "UNPROTECTED
// PRIVATE KEY FILE" refusal. With AddKeysToAgent a key loaded from a
// file is added to the agent (maybe_add_key_to_agent: its comment, else
// the file's name; a failure only logged). Passwords are asked as "user@host's password:
// " (which sshpass recognises) and keyboard-interactive questions as
// "(user@host) question", up to NumberOfPasswordPrompts times each, with
// "Permission denied, please try again." between password attempts.
// BatchMode disables all prompts. The final failure is "user@host:
// Permission denied (methods)." with the server's own list.
//
// # Messages
//
// A failed Dial returns a *ConnError whose Msg is what ssh prints
// (filtered by LogLevel: empty under -q), to be written with "\r\n" and
// followed by exit status 255. Messages that do not end the connection go,
// as they happen, to the Prompter when it implements Notifier, and
// otherwise to the log. Network failures read like OpenSSH's ("ssh:
// connect to host H port P: Connection refused", "ssh: Could not resolve
// hostname H: Name or service not known", "kex_exchange_identification:
// Connection closed by remote host", "Connection timed out during banner
// exchange", ...); through a ProxyCommand or ProxyJump the peer is
// "UNKNOWN port 65535" and a failing hop's own messages come first.
//
// # Keepalive
//
// KeepAlive sends keepalive@openssh.com requests like ServerAliveInterval
// and ServerAliveCountMax. With ServerAliveInterval 0 (the default) it
// sends one, for the round trip status shows, and never gives up on a
// connection, as ssh does not; the TCP socket has the kernel's keepalive
// timers where TCPKeepAlive is yes, none where it is no.
package sshclient
