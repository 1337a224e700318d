package become

// Doas is OpenBSD doas or OpenDoas, as community.general.doas runs it:
//
//	EXE FLAGS[ -n] [-u USER] SHELL -c Q(echo SUCCESS ; CMD)
//
// The plugin appends -n unless it holds a password.
var Doas = &Method{
	Name: "doas",
	Messages: Messages{
		Plugin:    "community.general.doas",
		Incorrect: []string{"Permission denied"},
		Missing:   []string{"Authorization required"},
	},
	DefaultPrompt: "Password: ",
	parse: func(w *Wrapper, x string, words []word) error {
		return parseToolShell(w, x, words, doasOptions)
	},
	password: func(w *Wrapper) Password {
		if w.NonInteractive {
			return PasswordNever
		}
		return PasswordAnswered
	},
	isPrompt: func(_ *Wrapper, line []byte) bool { return DoasPromptRegexp().Match(line) },
}

var (
	// doas has no long options; -a, -C, -L and -s are ErrUnsupported
	// (-s with a command is a usage error).
	doasShort = map[byte]option{
		'n': {'n', noArg},
		'u': {'u', requiredArg},
	}
)

func doasOptions(w *Wrapper, args []string) error {
	return getopt("doas", args, doasShort, nil, func(o option, val string, _ bool) error {
		if o.short == 'u' {
			if val == "" {
				return unsupported("doas: empty user")
			}
			w.User = val
			return nil
		}
		w.NonInteractive = true
		w.Flags = append(w.Flags, "-n")
		return nil
	}, func(a string) error {
		return unsupported("doas: operand %q before the shell", a)
	})
}
