package become

import "bytes"

// Method is a become tool the bridge understands, as a value: how
// Ansible's plugin writes a command with it (parse), when it asks for a
// password and how it prompts, what it prints on failure, and how an
// interpreter is started through it. Each lives in a file of its own
// (sudo.go, su.go, doas.go) and is listed in methods.
//
// Adding a become method is adding such a file and its entry in
// methods: Parse, the prompt checks, WithInner, and the bridge's
// become route (which starts interpreters through any Method) follow.
type Method struct {
	// Name is the tool's base name, which become_exe's must be.
	Name string
	// Messages are what Ansible's plugin for the tool looks for in its
	// output.
	Messages Messages
	// TerminalPassword: the tool reads a password from a terminal only
	// (su), so an interpreter is started through it on a PTY, and the
	// password prompt goes to the terminal (stdout) even without -tt.
	TerminalPassword bool
	// OwnSession: the tool runs its command in a session of its own,
	// with no controlling terminal (util-linux su -c calls setsid), so
	// the hangup of the terminal the tool runs on (sshd's, when its
	// client dies) ends the tool, not the command.
	OwnSession bool
	// NestedShell: the tool's command is "SHELL -c QUOTED(echo SUCCESS ;
	// INNER)" quoted once more (su -c), not SHELL's words themselves.
	NestedShell bool
	// DefaultPrompt is the prompt the bridge shows for the tool when the
	// command line gives none (Wrapper.Prompt is sudo's -p only).
	DefaultPrompt string

	// parse reads the command's words (words[0] is the tool) into w;
	// x is the command as written.
	parse func(w *Wrapper, x string, words []word) error
	// password is Wrapper.Password, once the rest of w is parsed.
	password func(w *Wrapper) Password
	// isPrompt is the plugin's check_password_prompt (Wrapper.IsPrompt).
	isPrompt func(w *Wrapper, line []byte) bool
	// commandEnv is Wrapper.CommandEnv; nil when the tool sets none.
	commandEnv func(w *Wrapper) map[string]string
}

// CommandEnv is what the tool puts in the environment about the command
// it runs (sudo's SUDO_COMMAND). The bridge runs every step in an
// interpreter the tool started once, whose environment names that start;
// a step sets these so that it sees what its own wrapper would have set.
func (w *Wrapper) CommandEnv() map[string]string {
	if w.Method.commandEnv == nil {
		return nil
	}
	return w.Method.commandEnv(w)
}

// methods are the become tools Parse understands, by Name.
var methods = map[string]*Method{
	Sudo.Name: Sudo,
	Su.Name:   Su,
	Doas.Name: Doas,
}

// Lookup returns the Method named name (a become_exe's base name), or nil
// when Parse does not understand that tool.
func Lookup(name string) *Method { return methods[name] }

func (m *Method) String() string { return m.Name }

// PasswordPrompt is the prompt the tool prints before it reads a
// password: sudo's -p PROMPT, or the method's default.
func (w *Wrapper) PasswordPrompt() string {
	if w.Prompt != "" {
		return w.Prompt
	}
	return w.Method.DefaultPrompt
}

func containsAny(line []byte, subs []string) bool {
	for _, s := range subs {
		if bytes.Contains(line, []byte(s)) {
			return true
		}
	}
	return false
}
