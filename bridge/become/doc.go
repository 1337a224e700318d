// Package become parses the become wrappers ansible-core (2.14 and later)
// puts around remote commands, so that the bridge can run the inner command
// in an agent that already runs as the become user, and answer Ansible's
// escalation protocol the way the real tool would.
//
// Parse takes the remote command, the last argument Ansible gives ssh, and
// returns a Wrapper or an error wrapping ErrNotBecome or ErrUnsupported.
// Anything not fully understood is ErrUnsupported: the bridge then passes the
// command through unchanged, which is always correct.
//
// # Methods
//
// Each tool is a Method value (sudo.go, su.go, doas.go), registered in
// methods and found by Lookup: its option parser, when it asks for a
// password (Wrapper.Password), its prompt check (Wrapper.IsPrompt) and
// default prompt, its failure messages (Method.Messages), and how an
// interpreter is started through it (TerminalPassword: on a PTY;
// NestedShell: su's extra quoting, which WithInner follows), and whether
// the command outlives the tool's terminal (OwnSession). Nothing outside
// those files switches on the tool.
//
// # Grammar
//
// A become plugin's build_become_command wraps CMD, then
// ActionBase._low_level_execute_command wraps the result once more. Q(s) is
// Python's shlex.quote(s): s itself when it has only [A-Za-z0-9_@%+=:,./-],
// otherwise s in single quotes with each ' written as '"'"'. SUCCESS is
// "echo BECOME-SUCCESS-ID ; CMD", ID being 32 random lowercase letters.
//
//	remote  = EXEC " -c " Q(become [" && sleep 0"])   play executable, or raw's executable
//	        | become                                   raw without an executable
//	sudo    = EXE " " FLAGS " " [`-p "PROMPT"`] " " ["-u " USER] " " SHELL " -c " Q(SUCCESS)
//	su      = EXE " " FLAGS " " [USER] " -c " Q(SHELL " -c " Q(SUCCESS))
//	doas    = EXE " " FLAGS[" -n"] " " ["-u " USER] " " SHELL " -c " Q(SUCCESS)
//
// Empty parts leave their spaces; the default sudo wrapper has two spaces
// before -u:
//
//	/bin/sh -c 'sudo -H -S -n  -u root /bin/sh -c '"'"'echo BECOME-SUCCESS-ID ; CMD'"'"' && sleep 0'
//
// EXE is become_exe; its base name must be sudo, su or doas.
// SHELL and EXEC are the play's shell executable (/bin/sh by default), or the
// raw action's executable. " && sleep 0" is there unless the action chose
// the executable (raw). The sudo plugin adds -p only when it has a become
// password, and then drops -n and --non-interactive from FLAGS, removes an
// "n" from bundles such as -HSn and requotes FLAGS with shlex.join. The doas
// plugin appends -n unless it has a password. CMD itself may start with
// "cd DIR && " (script's chdir) and environment assignments; they belong to
// Wrapper.Inner.
//
// Parse checks every quoting level against Q exactly, so it accepts only text
// Ansible could have written and unquotes it the way the shell does. FLAGS,
// USER and EXE are inserted by Ansible without quoting, so the become command
// is split into shell words strictly: unquoted operators, expansions ($, `),
// globs, "~", "#", "{" and newlines are ErrUnsupported, and the words must
// agree with go-shellquote's reading. The tool's options are then parsed with
// getopt semantics (bundles, attached and separate values, long options) and
// the first operand must be Ansible's SHELL (sudo, doas), or, for su, the
// operands are an optional "-" and the user.
//
// # Options
//
// sudo: -E/--preserve-env[=LIST], -g/--group, -H/--set-home, -i/--login,
// -n/--non-interactive, -P/--preserve-groups, -p/--prompt, -S/--stdin,
// -s/--shell, -u/--user.
//
// su (util-linux): "-", -l/--login, -m/-p/--preserve-environment,
// -s/--shell, the user operand, and Ansible's trailing -c.
//
// doas: -n, -u.
//
// These either shape the process the tool starts (user, group, environment,
// home, login shell), which an agent started through the same tool, Exe and
// Flags inherits (see Wrapper.Identity), or only concern the password
// exchange (-S, -n, -p), which the bridge answers itself.
//
// # Password protocol
//
// With a become password, Ansible's ssh connection plugin reads output line
// by line (stdout and stderr) and:
//
//   - while it waits for the prompt, writes the password and "\n" once to
//     stdin at the first line the plugin takes as the prompt (Wrapper.IsPrompt);
//   - removes the prompt and the success line (Wrapper.IsSuccess) from the
//     output, and sends pipelined input only after the success line;
//   - fails the task at a line Wrapper.IsIncorrectPassword or
//     Wrapper.IsMissingPassword accepts (Method.Messages), or when the prompt
//     comes again;
//   - times out ("Timeout (Ns) waiting for privilege escalation prompt")
//     when neither prompt nor success comes within its connection timeout
//     plus 2 seconds.
//
// The prompts the tools print: sudo prints exactly its -p PROMPT, on stderr
// with -S (on the terminal otherwise, which -tt merges into stdout); su's
// PAM prompt is "Password: " in the C locale (SuPromptRegexp(), from
// SuPromptLocalizations, is what Ansible accepts); OpenBSD doas and OpenDoas
// print "doas (USER@HOST) password: ", which DoasPromptRegexp accepts. What the tools print on
// failure: sudo -S "Sorry, try again." after a wrong password (and prompts
// again), sudo -n "sudo: a password is required", su "su: Authentication
// failure". Wrapper.Password says whether the tool may prompt at all and
// whether Ansible will answer.
//
// # Unsupported, deliberately
//
//   - Other become plugins: pbrun, dzdo, machinectl, ksu, pfexec, pmrun,
//     sesu, sudosu, runas and custom plugins. Their commands either name a
//     tool other than sudo, su or doas, or do not fit the grammar (sudosu's
//     "sudo ... su -l USER SHELL -c ..."). A plugin that runs one of the
//     three tools in exactly its shape (dzdo with become_exe sudo) is parsed
//     as that tool: the tool is what runs.
//   - A become_exe whose base name is not sudo, su or doas, such as a site
//     wrapper script: its behaviour is unknown.
//   - Any other option of the three tools, abbreviated long options, "--",
//     operands before SHELL (sudo's NAME=value), a sudo prompt with %
//     escapes, doas -s (a usage error with a command), su
//     options that pass through to the shell (-f) or change the terminal
//     (--pty).
//   - What sudo refuses with its usage (parse_args): a second -u, -g or
//     -p (a -p in become_flags beside the one Ansible adds with a
//     password), -i with -s, -i with -E or a bare --preserve-env. Read
//     with the last value winning, such a command would name an agent
//     sudo never starts.
//   - Shells other than sh, bash, dash, ksh and zsh (the sh shell plugin's
//     COMPATIBLE_SHELLS) given by absolute path, and the powershell and cmd
//     shell plugins.
//   - The prompt_l10n options of su and doas: they change what Ansible
//     accepts as a prompt but do not show on the command line.
//
// # Fixtures
//
// testdata/traces holds the ssh/scp/sftp invocations of stock ansible-core
// 2.14.18 against a real sshd. testdata/generated.jsonl holds the become
// wrappers of many become settings, captured by testdata/gen/generate.sh
// from stock ansible-playbook with a fake ssh that logs its arguments.
package become
