package become

import (
	"bytes"
	"strings"
)

// Sudo is sudo, as ansible.builtin.sudo runs it:
//
//	EXE FLAGS [-p "PROMPT"] [-u USER] SHELL -c Q(echo SUCCESS ; CMD)
//
// With -S it reads the password from stdin and prompts on stderr.
var Sudo = &Method{
	Name: "sudo",
	Messages: Messages{
		Plugin:    "sudo",
		Incorrect: []string{"Sorry, try again."},
		Missing:   []string{"Sorry, a password is required to run sudo", "sudo: a password is required"},
	},
	DefaultPrompt: "Password: ",
	parse: func(w *Wrapper, x string, words []word) error {
		return parseToolShell(w, x, words, sudoOptions)
	},
	password: func(w *Wrapper) Password {
		switch {
		case w.NonInteractive:
			return PasswordNever
		case w.ansiblePrompt():
			return PasswordAnswered
		}
		return PasswordUnknown
	},
	isPrompt: func(w *Wrapper, line []byte) bool {
		// Ansible watches for its own -p prompt only.
		if !w.ansiblePrompt() {
			return false
		}
		return bytes.HasPrefix(bytes.Trim(line, pySpace), []byte(strings.Trim(w.Prompt, pySpace)))
	},
	commandEnv: func(w *Wrapper) map[string]string {
		if w.Login || w.RunShell {
			return nil // sudo runs the user's shell, which quotes the command its own way
		}
		// The command and its arguments, joined by spaces (sudo's env.c).
		return map[string]string{"SUDO_COMMAND": w.Shell + " -c echo " + w.Success + " ; " + w.Inner}
	},
}

// sudoShort and sudoLong are the sudo options Parse accepts: those whose
// effect is the password exchange or the state of the resulting process.
// Everything else (-A -a -B -b -C -c -D -e -h -K -k -l -N -R -r -T -t -U -V -v,
// abbreviated long options) is ErrUnsupported.
var (
	sudoShort = map[byte]option{
		'E': {'E', noArg},
		'g': {'g', requiredArg},
		'H': {'H', noArg},
		'i': {'i', noArg},
		'n': {'n', noArg},
		'P': {'P', noArg},
		'p': {'p', requiredArg},
		'S': {'S', noArg},
		's': {'s', noArg},
		'u': {'u', requiredArg},
	}
	sudoLong = map[string]option{
		"group":           {'g', requiredArg},
		"login":           {'i', noArg},
		"non-interactive": {'n', noArg},
		"preserve-env":    {'E', optionalArg},
		"preserve-groups": {'P', noArg},
		"prompt":          {'p', requiredArg},
		"set-home":        {'H', noArg},
		"shell":           {'s', noArg},
		"stdin":           {'S', noArg},
		"user":            {'u', requiredArg},
	}
)

func sudoOptions(w *Wrapper, args []string) error {
	given := map[byte]bool{}
	err := getopt("sudo", args, sudoShort, sudoLong, func(o option, val string, hasVal bool) error {
		switch o.short {
		case 'u', 'g', 'p':
			// sudo's parse_args prints its usage for a second -u, -g or
			// -p, where the last one would win here.
			if given[o.short] {
				return unsupported("sudo: option -%c given twice", o.short)
			}
			given[o.short] = true
		}
		switch o.short {
		case 'u':
			if val == "" {
				return unsupported("sudo: empty user")
			}
			w.User = val
			return nil
		case 'p':
			// sudo expands %H %h %p %U %u %% in the prompt; what it prints
			// then depends on the target.
			if val == "" || strings.Contains(val, "%") {
				return unsupported("sudo: prompt %q", val)
			}
			w.Prompt = val
			return nil
		case 'g':
			if val == "" {
				return unsupported("sudo: empty group")
			}
			w.Group = val
			w.Flags = append(w.Flags, "-g", val)
			return nil
		case 'E':
			if hasVal {
				if val == "" {
					return unsupported("sudo: empty --preserve-env list")
				}
				w.PreserveEnvVars = append(w.PreserveEnvVars, strings.Split(val, ",")...)
				w.Flags = append(w.Flags, "--preserve-env="+val)
				return nil
			}
			w.PreserveEnv = true
		case 'H':
			w.SetHome = true
		case 'i':
			w.Login = true
		case 'n':
			w.NonInteractive = true
		case 'P':
			w.PreserveGroups = true
		case 'S':
			w.Stdin = true
		case 's':
			w.RunShell = true
		}
		w.Flags = append(w.Flags, "-"+string(o.short))
		return nil
	}, func(a string) error {
		// sudo would run it (or take NAME=value as an environment
		// assignment); Ansible's SHELL comes later.
		return unsupported("sudo: operand %q before the shell", a)
	})
	if err != nil {
		return err
	}
	// sudo's usage errors (parse_args): the tool says so, as with stock.
	if w.Login && w.RunShell {
		return unsupported("sudo: -i and -s together")
	}
	if w.Login && w.PreserveEnv {
		return unsupported("sudo: -i and -E together")
	}
	return nil
}
