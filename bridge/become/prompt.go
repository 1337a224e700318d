package become

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
)

// Messages are the strings Ansible's become plugin for a tool looks for in
// the command's output while it negotiates escalation (ssh connection
// plugin, _examine_output), and the name it reports failures under. Ansible
// looks for them, translated with gettext in the controller's locale (the
// plugin name is the domain: in practice the C strings below), as substrings
// of each output line, on stdout and stderr, until it sees the success line.
type Messages struct {
	// Plugin is the plugin name in Ansible's errors: "Incorrect <Plugin>
	// password", "Missing <Plugin> password".
	Plugin string
	// Incorrect are check_incorrect_password's strings (the plugin's fail).
	// A line containing one makes Ansible stop the command and fail the task
	// with "Incorrect <Plugin> password".
	Incorrect []string
	// Missing are check_missing_password's strings (the plugin's missing).
	// A line containing one makes Ansible fail the task with "Missing
	// <Plugin> password".
	Missing []string
}

// SuPromptLocalizations is the su plugin's SU_PROMPT_LOCALIZATIONS (ansible-core
// 2.14): the localised words for "Password" that su's prompt may start with.
// Users can replace it with the prompt_l10n option (ansible_su_prompt_l10n),
// which the command line does not show.
var SuPromptLocalizations = []string{
	"Password",
	"암호",
	"パスワード",
	"Adgangskode",
	"Contraseña",
	"Contrasenya",
	"Hasło",
	"Heslo",
	"Jelszó",
	"Lösenord",
	"Mật khẩu",
	"Mot de passe",
	"Parola",
	"Parool",
	"Pasahitza",
	"Passord",
	"Passwort",
	"Salasana",
	"Sandi",
	"Senha",
	"Wachtwoord",
	"ססמה",
	"Лозинка",
	"Парола",
	"Пароль",
	"गुप्तशब्द",
	"शब्दकूट",
	"సంకేతపదము",
	"හස්පදය",
	"密码",
	"密碼",
	"口令",
}

// SuPromptRegexp is the su plugin's check_password_prompt, applied to one
// output line: Python's
//
//	re.compile(b"|".join(br"(\w+'s )?" + p for p in prompts) + " ?(:|：) ?",
//	           flags=re.IGNORECASE).match(line)
//
// over bytes, so \w and case folding are ASCII only. Because of the
// alternation's precedence only the last localisation needs the colon:
// any line starting with "Password" (in any ASCII case, optionally after
// "word's ") counts as a prompt.
//
// It is compiled on first use: the pattern is large, and the binary that
// holds this package also starts as ssh several times per task.
var SuPromptRegexp = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(suPromptPattern(SuPromptLocalizations))
})

// DoasPromptRegexp is community.general.doas's check_password_prompt
// (community.general 6.6; re.match, so anchored at the start of the line):
// "doas (" or "Password:". OpenBSD doas and OpenDoas prompt with
// "doas (USER@HOST) password: ".
var DoasPromptRegexp = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:doas \(|Password:)`)
})

// suPromptPattern builds SuPromptRegexp from a localisation list.
func suPromptPattern(prompts []string) string {
	var b strings.Builder
	b.WriteString(`^(?:`)
	for i, p := range prompts {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(`(?:[0-9A-Za-z_]+'s )?`)
		for _, r := range p {
			switch {
			case 'a' <= r && r <= 'z':
				b.WriteString("[" + string(r-'a'+'A') + string(r) + "]")
			case 'A' <= r && r <= 'Z':
				b.WriteString("[" + string(r) + string(r-'A'+'a') + "]")
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
	}
	b.WriteString(` ?(?::|：) ?)`)
	return b.String()
}

// pySpace is what Python's bytes.strip removes.
const pySpace = " \t\n\r\v\f"

// IsPrompt reports whether Ansible's plugin would take line as the password
// prompt (check_password_prompt): for sudo, a line that starts, both
// stripped of white space, with Ansible's -p prompt (never when the prompt
// is not Ansible's: the sudo plugin then watches for none); for su, a match
// of SuPromptRegexp; for doas, of DoasPromptRegexp(). Ansible checks only
// while it holds a password (expect_prompt), which for su the command line
// does not reveal. line is one line as Python's bytes.splitlines(True)
// splits output (at "\n", "\r" or "\r\n"), with or without its ending.
func (w *Wrapper) IsPrompt(line []byte) bool {
	return w.Method.isPrompt(w, line)
}

// IsSuccess reports whether Ansible takes line as the become success line
// (check_success): it contains Success once trailing white space is removed.
func (w *Wrapper) IsSuccess(line []byte) bool {
	return bytes.Contains(bytes.TrimRight(line, pySpace), []byte(w.Success))
}

// IsIncorrectPassword reports whether line contains one of
// Method.Messages.Incorrect.
func (w *Wrapper) IsIncorrectPassword(line []byte) bool {
	return containsAny(line, w.Method.Messages.Incorrect)
}

// IsMissingPassword reports whether line contains one of
// Method.Messages.Missing.
func (w *Wrapper) IsMissingPassword(line []byte) bool {
	return containsAny(line, w.Method.Messages.Missing)
}
