package become

import "strings"

// Su is util-linux su, as ansible.builtin.su runs it:
//
//	EXE FLAGS [USER] -c Q(SHELL -c Q(echo SUCCESS ; CMD))
//
// It reads a password from a terminal only, and the command line never
// says whether Ansible holds one. It runs the command in a session of its
// own (-c, unlike --session-command).
var Su = &Method{
	Name:             "su",
	Messages:         Messages{Plugin: "su", Incorrect: []string{"Authentication failure"}},
	TerminalPassword: true,
	OwnSession:       true,
	NestedShell:      true,
	DefaultPrompt:    "Password: ",
	parse:            parseSu,
	password:         func(*Wrapper) Password { return PasswordUnknown },
	isPrompt:         func(_ *Wrapper, line []byte) bool { return SuPromptRegexp().Match(line) },
}

var (
	// su (util-linux): -f, -g, -G, -P, -w, -c (other than Ansible's),
	// --session-command, -h and -V are ErrUnsupported.
	suShort = map[byte]option{
		'l': {'l', noArg},
		'm': {'m', noArg},
		'p': {'m', noArg},
		's': {'s', requiredArg},
	}
	suLong = map[string]option{
		"login":                {'l', noArg},
		"preserve-environment": {'m', noArg},
		"shell":                {'s', requiredArg},
	}
)

// parseSu parses "EXE FLAGS [USER] -c QUOTED(SHELL -c QUOTED(echo SUCCESS ;
// INNER))", the shape of the su plugin.
func parseSu(w *Wrapper, x string, words []word) error {
	n := len(words)
	if n < 3 {
		return unsupported("su: too few words")
	}
	c, cmd := words[n-2], words[n-1]
	if c.raw != "-c" || cmd.raw != pyQuote(cmd.val) || !strings.HasSuffix(x, " -c "+cmd.raw) {
		return unsupported("su: command not quoted as Ansible quotes it")
	}
	shell, quoted, ok := strings.Cut(cmd.val, " -c ")
	if !ok || !isShellPath(shell) {
		return unsupported("su: command is not SHELL -c ...")
	}
	payload, ok := unquoteCanonical(quoted)
	if !ok {
		return unsupported("su: inner command not quoted as Ansible quotes it")
	}
	if err := suOptions(w, vals(words[1:n-2])); err != nil {
		return err
	}
	w.Shell = shell
	return w.setPayload(payload)
}

func suOptions(w *Wrapper, args []string) error {
	var operands []string
	err := getopt("su", args, suShort, suLong, func(o option, val string, _ bool) error {
		switch o.short {
		case 'l':
			w.Login = true
		case 'm':
			w.PreserveEnv = true
		case 's':
			if val == "" {
				return unsupported("su: empty shell")
			}
			w.UserShell = val
			w.Flags = append(w.Flags, "-s", val)
			return nil
		}
		w.Flags = append(w.Flags, "-"+string(o.short))
		return nil
	}, func(a string) error {
		operands = append(operands, a)
		return nil
	})
	if err != nil {
		return err
	}
	if len(operands) > 0 && operands[0] == "-" {
		w.Login = true
		w.Flags = append(w.Flags, "-l")
		operands = operands[1:]
	}
	switch {
	case len(operands) > 1:
		return unsupported("su: extra operands %q", operands[1:])
	case len(operands) == 1:
		if operands[0] == "" || strings.HasPrefix(operands[0], "-") {
			return unsupported("su: user %q", operands[0])
		}
		w.User = operands[0]
	}
	return nil
}
