package become

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	shellquote "github.com/kballard/go-shellquote"
)

var (
	// ErrNotBecome means the command carries no BECOME-SUCCESS marker:
	// Ansible did not wrap it in a become plugin.
	ErrNotBecome = errors.New("not a become wrapper")
	// ErrUnsupported means the command looks like a become wrapper but
	// something in it is not fully understood. The caller must pass the
	// command through unchanged.
	ErrUnsupported = errors.New("unsupported become wrapper")
)

// Password says whether the become tool may ask for a password and whether
// Ansible will answer it.
type Password int

const (
	// PasswordUnknown: the tool may prompt, and the command line does not
	// say whether Ansible holds a become password. This is always the case
	// for su, and for sudo without -n and without Ansible's own prompt.
	PasswordUnknown Password = iota
	// PasswordNever: the tool runs non-interactively (sudo -n, doas -n). It
	// fails instead of prompting.
	PasswordNever
	// PasswordAnswered: Ansible holds a become password and writes it,
	// followed by "\n", once it sees the prompt (see Wrapper.IsPrompt).
	// This is sudo with Ansible's own -p prompt, and doas without -n: the
	// doas plugin leaves -n out only when it has a password.
	PasswordAnswered
)

func (p Password) String() string {
	switch p {
	case PasswordUnknown:
		return "unknown"
	case PasswordNever:
		return "never"
	case PasswordAnswered:
		return "answered"
	}
	return fmt.Sprintf("Password(%d)", int(p))
}

// Wrapper is a parsed become wrapper: the remote command that runs Inner
// through Shell as User by way of a become tool, after printing Success.
type Wrapper struct {
	// Method is the become tool: Sudo, Su or Doas (see Lookup).
	Method *Method
	// Exe is the tool's first word, as the shell sees it: become_exe, such
	// as "sudo" or "/usr/local/bin/sudo". Its base name is Method.
	Exe string
	// Flags are the tool's options in order, one option per element and
	// its value, if any, in the next element, with long options spelled as
	// their short form: "-HSn" and "--set-home --stdin --non-interactive"
	// both give ["-H" "-S" "-n"]. "--preserve-env=LIST", which has no short
	// form, stays one element. The user (sudo and doas -u, su's operand),
	// sudo's -p prompt and su's -c command are not in Flags: see User,
	// Prompt and Inner. su's "-" and "--login" are "-l", its "-p" and
	// "--preserve-environment" are "-m". Exe, Flags, "-u" User (or User
	// as su's operand) rebuild an equivalent tool invocation.
	Flags []string
	// User is the target user as given: sudo/doas -u USER, or su's user
	// operand. "" means the tool's default target, normally root. Sudo's
	// "#uid" form is kept as written.
	User string
	// Group is sudo's -g GROUP, or "".
	Group string
	// Prompt is sudo's -p PROMPT: the text sudo prints before it reads a
	// password. With a become password Ansible sets it to
	// "[sudo via ansible, key=ID] password:". Empty for su and doas.
	Prompt string
	// Password says whether the tool may prompt and whether Ansible
	// answers.
	Password Password
	// NonInteractive is sudo's or doas's -n: fail rather than prompt.
	NonInteractive bool
	// Stdin is sudo's -S: read the password from standard input (and print
	// the prompt on standard error) instead of the terminal.
	Stdin bool
	// SetHome is sudo's -H: HOME is the target user's home.
	SetHome bool
	// Login is sudo's -i, or su's "-", -l or --login: run the target
	// user's login shell, which reads its profile and starts in its home.
	Login bool
	// RunShell is sudo's -s: run the command through $SHELL -c.
	RunShell bool
	// PreserveEnv is sudo's -E (--preserve-env) or su's -m (-p,
	// --preserve-environment): keep the caller's environment.
	PreserveEnv bool
	// PreserveEnvVars lists the variables of sudo's
	// --preserve-env=LIST options, in order.
	PreserveEnvVars []string
	// PreserveGroups is sudo's -P: keep the caller's supplementary groups.
	PreserveGroups bool
	// UserShell is su's -s SHELL: the shell su runs instead of the target
	// user's login shell. su runs "UserShell -c 'Shell -c ...'".
	UserShell string
	// ID is the 32 lowercase letters Ansible generated for this become
	// (become plugin _gen_id). Sudo's Ansible prompt carries it too.
	ID string
	// Success is "BECOME-SUCCESS-" + ID, the line the wrapper prints as the
	// target user before it runs Inner. Ansible waits for it, strips it
	// from the output, and only then sends pipelined input.
	Success string
	// Shell is the shell the tool runs, "Shell -c 'echo Success ; Inner'":
	// the play's shell executable (ansible_shell_executable, /bin/sh by
	// default), or the raw action's executable argument. An absolute path
	// whose base name is sh, bash, dash, ksh or zsh.
	Shell string
	// Inner is the command Ansible wrapped: what Shell runs after the echo,
	// as shell source. It is everything Ansible put before the become wrap,
	// so it includes the chdir prefix ("cd DIR && ...") of the script action
	// and the environment assignments of modules ("LANG=C /usr/bin/python3
	// ..."). The bridge classifies it like any other command.
	Inner string
	// Outer is what Ansible put around the whole become command.
	Outer Outer
}

// Outer is the wrapping _low_level_execute_command adds around the become
// command: "Shell -c 'BECOME && sleep 0'". Neither part changes what the
// command prints or its exit status: "X && sleep 0" exits with X's status,
// and the shell exits with its last command's status.
type Outer struct {
	// Shell is the outer shell: the play's shell executable, or the raw
	// action's executable argument. "" means Ansible sent the become command
	// bare: this is the raw action without an executable argument.
	Shell string
	// SleepZero reports the " && sleep 0" Ansible appends (a mitigation for
	// an ssh race) when it used the play's executable, that is, for all but
	// the raw action.
	SleepZero bool
}

// Parse parses the remote command Ansible passes as the last ssh argument
// when a task uses become. It returns an error wrapping ErrNotBecome when the
// command is not a become wrapper, and one wrapping ErrUnsupported when it is
// one, or looks like one, but is not fully understood (another become plugin,
// another tool, an unknown option, shell syntax beyond plain quoting).
func Parse(cmd string) (*Wrapper, error) {
	if !strings.Contains(cmd, successPrefix) {
		return nil, ErrNotBecome
	}
	// "SHELL -c 'BECOME[ && sleep 0]'". The outer shell's base name is a
	// shell and a bare become command starts with sudo, su or doas, so at
	// most one of the two readings below can succeed.
	if shell, body, ok := splitOuter(cmd); ok {
		body, sleep := strings.CutSuffix(body, " && sleep 0")
		w, err := parseBecome(body)
		if err != nil {
			return nil, err
		}
		w.Outer = Outer{Shell: shell, SleepZero: sleep}
		return w, nil
	}
	return parseBecome(cmd)
}

// Identity names the process a wrapper's tool starts: Method, Exe, User and
// the options that shape the process (Group, SetHome, Login, RunShell,
// PreserveEnv, PreserveEnvVars as a set, PreserveGroups, UserShell). It
// leaves out what only concerns the password exchange (-S, -n, the prompt),
// the order and spelling of options, the inner shell and the command. An
// agent started through one wrapper can serve the commands of any wrapper
// with the same Identity.
func (w *Wrapper) Identity() string {
	parts := []string{w.Method.Name, w.Exe, "user=" + w.User}
	add := func(on bool, s string) {
		if on {
			parts = append(parts, s)
		}
	}
	add(w.Group != "", "group="+w.Group)
	add(w.SetHome, "set-home")
	add(w.Login, "login")
	add(w.RunShell, "shell")
	add(w.PreserveEnv, "preserve-env")
	if len(w.PreserveEnvVars) > 0 {
		vars := slices.Clone(w.PreserveEnvVars)
		slices.Sort(vars)
		parts = append(parts, "preserve-env="+strings.Join(slices.Compact(vars), ","))
	}
	add(w.PreserveGroups, "preserve-groups")
	add(w.UserShell != "", "user-shell="+w.UserShell)
	return shellquote.Join(parts...)
}

const successPrefix = "BECOME-SUCCESS-"

// idLen is the length of the become ID: _gen_id(length=32), lowercase ASCII.
const idLen = 32

// shells are the base names of the shells Ansible's sh shell plugin drives
// (ShellModule.COMPATIBLE_SHELLS).
var shells = []string{"sh", "bash", "dash", "ksh", "zsh"}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

// isShellPath reports whether s is a plain absolute path to a shell Ansible's
// sh plugin drives.
func isShellPath(s string) bool {
	return strings.HasPrefix(s, "/") && pyQuote(s) == s && slices.Contains(shells, path.Base(s))
}

// splitOuter splits "SHELL -c QUOTED", with QUOTED exactly as Python's
// shlex.quote writes it.
func splitOuter(cmd string) (shell, body string, ok bool) {
	shell, quoted, found := strings.Cut(cmd, " -c ")
	if !found || !isShellPath(shell) {
		return "", "", false
	}
	body, ok = unquoteCanonical(quoted)
	return shell, body, ok
}

// parseBecome parses the become command a become plugin built.
func parseBecome(x string) (*Wrapper, error) {
	words, err := splitWords(x)
	if err != nil {
		return nil, unsupported("%v", err)
	}
	if len(words) == 0 {
		return nil, unsupported("empty command")
	}
	exe := words[0]
	if exe.raw != exe.val || strings.Contains(exe.val, "=") {
		return nil, unsupported("become tool %q", exe.raw)
	}
	m := Lookup(path.Base(exe.val))
	if m == nil {
		return nil, unsupported("become tool %q", exe.val)
	}
	w := &Wrapper{Method: m, Exe: exe.val}
	if err := m.parse(w, x, words); err != nil {
		return nil, err
	}
	return w, nil
}

// parseToolShell parses "EXE OPTIONS... SHELL -c QUOTED(echo SUCCESS ; INNER)",
// the shape of the sudo and doas plugins (sudo: FLAGS [-p "PROMPT"] [-u USER],
// doas: FLAGS [-n] [-u USER]), the options with options.
func parseToolShell(w *Wrapper, x string, words []word, options func(*Wrapper, []string) error) error {
	n := len(words)
	if n < 4 {
		return unsupported("%s: too few words", w.Method)
	}
	shell, c, payload := words[n-3], words[n-2], words[n-1]
	if c.raw != "-c" || shell.raw != shell.val || !isShellPath(shell.val) {
		return unsupported("%s: command is not SHELL -c ...", w.Method)
	}
	if payload.raw != pyQuote(payload.val) || !strings.HasSuffix(x, " "+shell.raw+" -c "+payload.raw) {
		return unsupported("%s: command not quoted as Ansible quotes it", w.Method)
	}
	if err := options(w, vals(words[1:n-3])); err != nil {
		return err
	}
	w.Shell = shell.val
	return w.setPayload(payload.val)
}

// setPayload parses "echo BECOME-SUCCESS-ID ; INNER" and sets Password,
// which depends on it.
func (w *Wrapper) setPayload(p string) error {
	rest, ok := strings.CutPrefix(p, "echo "+successPrefix)
	if !ok || len(rest) < idLen {
		return unsupported("no echo %s... ; prefix", successPrefix)
	}
	id := rest[:idLen]
	for i := 0; i < len(id); i++ {
		if id[i] < 'a' || id[i] > 'z' {
			return unsupported("become id %q", id)
		}
	}
	inner, ok := strings.CutPrefix(rest[idLen:], " ; ")
	if !ok || inner == "" {
		return unsupported("no command after the success marker")
	}
	w.ID, w.Success, w.Inner = id, successPrefix+id, inner
	w.Password = w.Method.password(w)
	return nil
}

// ansiblePromptRe matches the -p prompt Ansible's sudo plugin sets when it
// has a become password (community.general.dzdo's, for become_exe sudo, has
// "dzdo" for "sudo").
var ansiblePromptRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\[[a-z]+ via ansible, key=([a-z]{32})\] password:$`)
})

func (w *Wrapper) ansiblePrompt() bool {
	m := ansiblePromptRe().FindStringSubmatch(w.Prompt)
	return m != nil && m[1] == w.ID
}

// Option parsing. Each tool parses its argv with getopt(3): short options
// bundle ("-HSn"), a short option's value is the rest of the word or the
// next word ("-uroot", "-u root"), a long option's value follows "=" or is
// the next word ("--user=root", "--user root"; an optional value only with
// "="). sudo and doas stop at the first operand, which must be Ansible's
// SHELL; su (util-linux, GNU getopt) permutes operands, takes a first operand
// "-" as --login and the next as the user.

type argKind int

const (
	noArg argKind = iota
	requiredArg
	optionalArg // only as --name=value
)

// option is one accepted option: its canonical short name and whether it
// takes a value.
type option struct {
	short byte
	arg   argKind
}

// getopt walks args as getopt_long would, calling opt for each option and
// operand for each operand (a word not starting with "-", or "-" alone).
// It returns ErrUnsupported for unknown options, missing values and "--".
func getopt(tool string, args []string, short map[byte]option, long map[string]option,
	opt func(o option, val string, hasVal bool) error, operand func(string) error) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return unsupported("%s: option \"--\"", tool)
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			o, ok := long[name]
			if !ok {
				return unsupported("%s: option %q", tool, a)
			}
			switch {
			case o.arg == noArg && hasVal:
				return unsupported("%s: option %q takes no value", tool, a)
			case o.arg == requiredArg && !hasVal:
				if i+1 == len(args) {
					return unsupported("%s: option %q needs a value", tool, a)
				}
				i++
				val, hasVal = args[i], true
			}
			if err := opt(o, val, hasVal); err != nil {
				return err
			}
		case strings.HasPrefix(a, "-") && a != "-":
			for j := 1; j < len(a); j++ {
				o, ok := short[a[j]]
				if !ok {
					return unsupported("%s: option -%c", tool, a[j])
				}
				if o.arg == noArg {
					if err := opt(o, "", false); err != nil {
						return err
					}
					continue
				}
				val := a[j+1:]
				if val == "" {
					if i+1 == len(args) {
						return unsupported("%s: option -%c needs a value", tool, a[j])
					}
					i++
					val = args[i]
				}
				if err := opt(o, val, true); err != nil {
					return err
				}
				break
			}
		default:
			if err := operand(a); err != nil {
				return err
			}
		}
	}
	return nil
}

// Shell words.

// word is one shell word: its text after quote removal and as written.
type word struct {
	val, raw string
}

func vals(ws []word) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.val
	}
	return out
}

// isSafe reports whether c stands for itself unquoted: the characters
// Python's shlex.quote leaves unquoted ([\w@%+=:,./-], ASCII).
func isSafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("_@%+=:,./-", c) >= 0
}

// pyQuote is Python's shlex.quote, which Ansible uses for every level of
// quoting it adds.
func pyQuote(s string) string {
	if s == "" {
		return "''"
	}
	for i := 0; i < len(s); i++ {
		if !isSafe(s[i]) {
			return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
		}
	}
	return s
}

// unquoteCanonical returns the word q stands for when q is exactly what
// pyQuote writes for it.
func unquoteCanonical(q string) (string, bool) {
	words, err := shellquote.Split(q)
	if err != nil || len(words) != 1 || pyQuote(words[0]) != q {
		return "", false
	}
	return words[0], true
}

// splitWords splits a simple command into words the way a POSIX shell
// would, and rejects everything whose meaning is more than literal text:
// unquoted characters outside isSafe (operators, expansions, globs, comments,
// tilde, newlines), "$" and "`" inside double quotes, and a trailing or
// newline-escaping backslash. Blanks are spaces and tabs. The result is
// checked against go-shellquote's reading of the same text.
func splitWords(s string) ([]word, error) {
	var words []word
	var b strings.Builder
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			break
		}
		start := i
		b.Reset()
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			switch c := s[i]; {
			case c == '\'':
				j := strings.IndexByte(s[i+1:], '\'')
				if j < 0 {
					return nil, errors.New("unterminated single quote")
				}
				b.WriteString(s[i+1 : i+1+j])
				i += j + 2
			case c == '"':
				i++
				for {
					if i == len(s) {
						return nil, errors.New("unterminated double quote")
					}
					c := s[i]
					if c == '"' {
						i++
						break
					}
					if c == '$' || c == '`' {
						return nil, fmt.Errorf("%q inside double quotes", c)
					}
					if c == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
						if s[i+1] != '\n' {
							b.WriteByte(s[i+1])
						}
						i += 2
						continue
					}
					b.WriteByte(c)
					i++
				}
			case c == '\\':
				if i+1 == len(s) || s[i+1] == '\n' {
					return nil, errors.New("backslash at end of line")
				}
				b.WriteByte(s[i+1])
				i += 2
			case isSafe(c):
				b.WriteByte(c)
				i++
			default:
				return nil, fmt.Errorf("unquoted %q", c)
			}
		}
		words = append(words, word{val: b.String(), raw: s[start:i]})
	}
	check, err := shellquote.Split(s)
	if err != nil || !slices.Equal(check, vals(words)) {
		return nil, errors.New("ambiguous quoting")
	}
	return words, nil
}
