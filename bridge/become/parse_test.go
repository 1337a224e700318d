package become

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	shellquote "github.com/kballard/go-shellquote"
)

// setting is the become configuration Ansible had: plugin, become_exe,
// become_flags, become_user, whether it had become_pass, and the play's
// shell executable.
type setting struct {
	method *Method
	exe    string
	flags  string
	user   string
	pass   bool
	shell  string
}

var sudoNFlag = regexp.MustCompile(`^(-\w*)n(\w*.*)`)

// ansibleWrap builds the remote command the way ansible-core 2.14 does:
// build_become_command of the sudo, su and community.general.doas plugins,
// then _low_level_execute_command's outer wrap. It is the reference the
// fixtures check it against (TestAnsibleWrapMatchesFixtures).
func ansibleWrap(t testing.TB, s setting, id, cmd string, outer Outer) string {
	t.Helper()
	shell := s.shell
	if outer.Shell != "" && !outer.SleepZero {
		shell = outer.Shell // raw's executable becomes the shell's executable
	}
	payload := pyQuote("echo BECOME-SUCCESS-" + id + " ; " + cmd)
	var b string
	switch s.method {
	case Sudo:
		flags, prompt := s.flags, ""
		if s.pass {
			if flags != "" {
				words, err := shellquote.Split(flags)
				if err != nil {
					t.Fatal(err)
				}
				var reflag []string
				for _, f := range words {
					if f == "-n" || f == "--non-interactive" {
						continue
					}
					if !strings.HasPrefix(f, "--") {
						f = sudoNFlag.ReplaceAllString(f, "${1}${2}")
					}
					reflag = append(reflag, pyQuote(f))
				}
				flags = strings.Join(reflag, " ")
			}
			prompt = `-p "[sudo via ansible, key=` + id + `] password:"`
		}
		user := ""
		if s.user != "" {
			user = "-u " + s.user
		}
		b = strings.Join([]string{s.exe, flags, prompt, user, shell + " -c " + payload}, " ")
	case Su:
		b = fmt.Sprintf("%s %s %s -c %s", s.exe, s.flags, s.user, pyQuote(shell+" -c "+payload))
	case Doas:
		flags := s.flags
		if !s.pass && !strings.Contains(flags, "-n") {
			flags += " -n"
		}
		user := ""
		if s.user != "" {
			user = "-u " + s.user
		}
		b = fmt.Sprintf("%s %s %s %s -c %s", s.exe, flags, user, shell, payload)
	default:
		t.Fatalf("no Ansible builder for %q", s.method)
	}
	if outer.Shell == "" {
		return b
	}
	if outer.SleepZero {
		b += " && sleep 0"
	}
	return outer.Shell + " -c " + pyQuote(b)
}

// ansiblePromptMark stands for Ansible's sudo prompt with the wrapper's ID in
// the expectations below.
const ansiblePromptMark = "ANSIBLE"

// project zeroes the fields that differ per invocation, and fills in
// Ansible's prompt in want.
func project(got, want *Wrapper) (g, w Wrapper) {
	g, w = *got, *want
	if w.Prompt == ansiblePromptMark {
		w.Prompt = "[sudo via ansible, key=" + g.ID + "] password:"
	}
	g.ID, g.Success, g.Inner, g.Outer, g.Shell = "", "", "", Outer{}, ""
	return g, w
}

func checkWrapper(t *testing.T, cmd string, got, want *Wrapper) {
	t.Helper()
	if got.Success != successPrefix+got.ID || len(got.ID) != idLen {
		t.Errorf("ID %q, Success %q", got.ID, got.Success)
	}
	if !strings.Contains(cmd, got.Success) || got.Inner == "" {
		t.Errorf("Success %q or Inner %q not from %q", got.Success, got.Inner, cmd)
	}
	if g, w := project(got, want); !reflect.DeepEqual(g, w) {
		t.Errorf("Parse(%q)\n got %+v\nwant %+v", cmd, g, w)
	}
}

type fixture struct {
	Tag        string   `json:"tag"`
	Pipelining bool     `json:"pipelining"`
	Args       []string `json:"args"`
	Cmd        string   `json:"cmd"`
}

func readFixtures(t testing.TB) []fixture {
	t.Helper()
	f, err := os.Open("testdata/generated.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []fixture
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var fx fixture
		if err := json.Unmarshal(sc.Bytes(), &fx); err != nil {
			t.Fatal(err)
		}
		out = append(out, fx)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// generated lists every scenario of testdata/gen/generate.sh: the settings
// Ansible had (nil for plugins the test does not rebuild) and the wrapper
// Parse must return, or the error.
var generated = map[string]struct {
	set  *setting
	want *Wrapper
	err  error
}{
	"sudo-default": {&setting{Sudo, "sudo", "-H -S -n", "root", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}, nil},
	"sudo-default-pipelining": {&setting{Sudo, "sudo", "-H -S -n", "root", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}, nil},
	"sudo-password": {&setting{Sudo, "sudo", "-H -S -n", "root", true, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S"}, User: "root", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, SetHome: true}, nil},
	"sudo-password-pipelining": {&setting{Sudo, "sudo", "-H -S -n", "root", true, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S"}, User: "root", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, SetHome: true}, nil},
	"sudo-user": {&setting{Sudo, "sudo", "-H -S -n", "nobody", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, User: "nobody", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}, nil},
	"sudo-user-password": {&setting{Sudo, "sudo", "-H -S -n", "nobody", true, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S"}, User: "nobody", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, SetHome: true}, nil},
	"sudo-empty-user": {&setting{Sudo, "sudo", "-H -S -n", "", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}, nil},
	"sudo-empty-flags": {&setting{Sudo, "sudo", "", "root", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", User: "root", Password: PasswordUnknown}, nil},
	"sudo-empty-flags-password": {&setting{Sudo, "sudo", "", "root", true, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", User: "root", Prompt: ansiblePromptMark, Password: PasswordAnswered}, nil},
	"sudo-bundled": {&setting{Sudo, "sudo", "-HSn", "root", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}, nil},
	"sudo-bundled-password": {&setting{Sudo, "sudo", "-HSn", "root", true, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S"}, User: "root", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, SetHome: true}, nil},
	"sudo-long": {&setting{Sudo, "sudo", "--set-home --stdin --non-interactive", "root", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}, nil},
	"sudo-long-password": {&setting{Sudo, "sudo", "--set-home --stdin --non-interactive", "root", true, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S"}, User: "root", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, SetHome: true}, nil},
	"sudo-preserve-env": {&setting{Sudo, "sudo", "-E -H -S -n", "root", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-E", "-H", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true, PreserveEnv: true}, nil},
	"sudo-preserve-env-list": {&setting{Sudo, "sudo", "--preserve-env=PATH,LANG -H -S -n", "root", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"--preserve-env=PATH,LANG", "-H", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true, PreserveEnvVars: []string{"PATH", "LANG"}}, nil},
	"sudo-preserve-env-long": {&setting{Sudo, "sudo", "--preserve-env -H -S -n", "root", true, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-E", "-H", "-S"}, User: "root", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, SetHome: true, PreserveEnv: true}, nil},
	"sudo-login": {&setting{Sudo, "sudo", "-i -S -n", "root", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-i", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, Login: true}, nil},
	"sudo-group": {&setting{Sudo, "sudo", "-H -S -n -g adm", "nobody", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n", "-g", "adm"}, User: "nobody", Group: "adm", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}, nil},
	"sudo-user-in-flags": {&setting{Sudo, "sudo", "-H -S -n -unobody", "", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, User: "nobody", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}, nil},
	"sudo-quoted-prompt-flag": {&setting{Sudo, "sudo", `-H -S -n --prompt="my prompt"`, "root", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, User: "root", Prompt: "my prompt", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}, nil},
	// Ansible adds its own -p: sudo prints its usage for the second one.
	"sudo-quoted-prompt-flag-password": {err: ErrUnsupported},
	"sudo-exe-path": {&setting{Sudo, "/usr/bin/sudo", "-H -S -n", "root", false, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "/usr/bin/sudo", Flags: []string{"-H", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}, nil},
	"sudo-exe-path-password": {&setting{Sudo, "/usr/bin/sudo", "-H -S -n", "root", true, "/bin/sh"},
		&Wrapper{Method: Sudo, Exe: "/usr/bin/sudo", Flags: []string{"-H", "-S"}, User: "root", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, SetHome: true}, nil},
	"sudo-bash": {&setting{Sudo, "sudo", "-H -S -n", "root", false, "/bin/bash"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}, nil},
	"sudo-bash-password": {&setting{Sudo, "sudo", "-H -S -n", "root", true, "/bin/bash"},
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S"}, User: "root", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, SetHome: true}, nil},
	// community.general.dzdo with become_exe sudo runs sudo in sudo's shape.
	"sudo-dzdo-plugin": {nil,
		&Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S"}, Prompt: "DZDO", Password: PasswordAnswered, Stdin: true, SetHome: true}, nil},

	"su-default": {&setting{Su, "su", "", "root", false, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su", User: "root"}, nil},
	"su-default-pipelining": {&setting{Su, "su", "", "root", false, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su", User: "root"}, nil},
	"su-password": {&setting{Su, "su", "", "root", true, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su", User: "root"}, nil},
	"su-user": {&setting{Su, "su", "", "nobody", false, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su", User: "nobody"}, nil},
	"su-empty-user": {&setting{Su, "su", "", "", false, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su"}, nil},
	"su-dash": {&setting{Su, "su", "-", "root", false, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su", Flags: []string{"-l"}, User: "root", Login: true}, nil},
	"su-dash-empty-user": {&setting{Su, "su", "-", "", false, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su", Flags: []string{"-l"}, Login: true}, nil},
	"su-login": {&setting{Su, "su", "-l", "root", false, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su", Flags: []string{"-l"}, User: "root", Login: true}, nil},
	"su-login-long": {&setting{Su, "su", "--login", "root", false, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su", Flags: []string{"-l"}, User: "root", Login: true}, nil},
	"su-preserve": {&setting{Su, "su", "-m", "root", false, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su", Flags: []string{"-m"}, User: "root", PreserveEnv: true}, nil},
	"su-shell": {&setting{Su, "su", "-s /bin/bash", "root", false, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su", Flags: []string{"-s", "/bin/bash"}, User: "root", UserShell: "/bin/bash"}, nil},
	"su-shell-long": {&setting{Su, "su", "--shell=/bin/bash", "", false, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "su", Flags: []string{"-s", "/bin/bash"}, UserShell: "/bin/bash"}, nil},
	"su-exe-path": {&setting{Su, "/bin/su", "", "root", true, "/bin/sh"},
		&Wrapper{Method: Su, Exe: "/bin/su", User: "root"}, nil},
	"su-bash": {&setting{Su, "su", "", "root", false, "/bin/bash"},
		&Wrapper{Method: Su, Exe: "su", User: "root"}, nil},

	"doas-default": {&setting{Doas, "doas", "", "", false, "/bin/sh"},
		&Wrapper{Method: Doas, Exe: "doas", Flags: []string{"-n"}, Password: PasswordNever, NonInteractive: true}, nil},
	"doas-default-pipelining": {&setting{Doas, "doas", "", "", false, "/bin/sh"},
		&Wrapper{Method: Doas, Exe: "doas", Flags: []string{"-n"}, Password: PasswordNever, NonInteractive: true}, nil},
	"doas-password": {&setting{Doas, "doas", "", "", true, "/bin/sh"},
		&Wrapper{Method: Doas, Exe: "doas", Password: PasswordAnswered}, nil},
	"doas-user": {&setting{Doas, "doas", "", "nobody", false, "/bin/sh"},
		&Wrapper{Method: Doas, Exe: "doas", Flags: []string{"-n"}, User: "nobody", Password: PasswordNever, NonInteractive: true}, nil},
	"doas-user-password": {&setting{Doas, "doas", "", "nobody", true, "/bin/sh"},
		&Wrapper{Method: Doas, Exe: "doas", User: "nobody", Password: PasswordAnswered}, nil},
	"doas-flags-n": {&setting{Doas, "doas", "-n", "root", false, "/bin/sh"},
		&Wrapper{Method: Doas, Exe: "doas", Flags: []string{"-n"}, User: "root", Password: PasswordNever, NonInteractive: true}, nil},
	"doas-exe-path": {&setting{Doas, "/usr/bin/doas", "", "", true, "/bin/sh"},
		&Wrapper{Method: Doas, Exe: "/usr/bin/doas", Password: PasswordAnswered}, nil},

	"neg-dzdo":                {err: ErrUnsupported},
	"neg-pbrun":               {err: ErrUnsupported},
	"neg-machinectl":          {err: ErrUnsupported},
	"neg-ksu":                 {err: ErrUnsupported},
	"neg-pfexec":              {err: ErrUnsupported},
	"neg-pmrun":               {err: ErrUnsupported},
	"neg-sesu":                {err: ErrUnsupported},
	"neg-sudosu":              {err: ErrUnsupported},
	"neg-sesu-as-su":          {err: ErrUnsupported},
	"neg-sudo-wrapper-exe":    {err: ErrUnsupported},
	"neg-sudo-unknown-flag":   {err: ErrUnsupported},
	"neg-sudo-timeout-flag":   {err: ErrUnsupported},
	"neg-sudo-env-assignment": {err: ErrUnsupported},
	"neg-sudo-expansion":      {err: ErrUnsupported},
	"neg-su-fast":             {err: ErrUnsupported},
	"neg-su-pty":              {err: ErrUnsupported},
	"neg-su-as-sudo":          {err: ErrUnsupported},
	"neg-sudo-as-su":          {err: ErrUnsupported},
	"neg-doas-shell":          {err: ErrUnsupported},
}

// TestParseGenerated parses every wrapper stock Ansible produced in
// generate.sh's scenarios.
func TestParseGenerated(t *testing.T) {
	fixtures := readFixtures(t)
	seen := map[string]int{}
	for i, fx := range fixtures {
		t.Run(fmt.Sprintf("%s/%d", fx.Tag, i), func(t *testing.T) {
			exp, ok := generated[fx.Tag]
			if !ok {
				t.Fatalf("no expectation for scenario %q", fx.Tag)
			}
			seen[fx.Tag]++
			w, err := Parse(fx.Cmd)
			if exp.err != nil {
				if !errors.Is(err, exp.err) {
					t.Fatalf("Parse(%q) = %+v, %v; want %v", fx.Cmd, w, err, exp.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", fx.Cmd, err)
			}
			want := *exp.want
			if want.Prompt == "DZDO" {
				want.Prompt = "[dzdo via ansible, key=" + w.ID + "] password:"
			}
			checkWrapper(t, fx.Cmd, w, &want)
			checkTask(t, fx.Cmd, w)
		})
	}
	for tag := range generated {
		if seen[tag] == 0 {
			t.Errorf("scenario %q has no fixture", tag)
		}
	}
}

var moduleRe = regexp.MustCompile(`^/usr/bin/python3 /[^ '"]+/AnsiballZ_[a-z_]+\.py$`)

// checkTask checks Inner, Shell and Outer against the task of
// testdata/gen/playbook.yml that produced the wrapper.
func checkTask(t *testing.T, cmd string, w *Wrapper) {
	t.Helper()
	play := Outer{Shell: w.Shell, SleepZero: true}
	switch {
	case w.Inner == "echo raw-ok":
		play = Outer{}
	case w.Inner == "echo raw-bash":
		play = Outer{Shell: "/bin/bash"}
		if w.Shell != "/bin/bash" {
			t.Errorf("raw executable: Shell = %q", w.Shell)
		}
	case strings.HasPrefix(w.Inner, "cd /tmp &&  /"):
		if !strings.HasSuffix(w.Inner, "/s.sh") {
			t.Errorf("script Inner = %q", w.Inner)
		}
	case strings.HasPrefix(w.Inner, "LC_ALL=C FOO='it'\"'\"'s a b' /usr/bin/python3"):
	case w.Inner == "/usr/bin/python3", moduleRe.MatchString(w.Inner):
	default:
		t.Errorf("Inner %q is no task of playbook.yml", w.Inner)
	}
	if w.Outer != play {
		t.Errorf("Outer = %+v, want %+v in %q", w.Outer, play, cmd)
	}
	if w.Shell != "/bin/sh" && w.Shell != "/bin/bash" {
		t.Errorf("Shell = %q", w.Shell)
	}
}

// TestAnsibleWrapMatchesFixtures checks the test's Ansible builder, and with
// it Parse's ID, Inner and Outer, against every generated wrapper: rebuilt
// from the scenario's settings, it is byte for byte what Ansible sent.
func TestAnsibleWrapMatchesFixtures(t *testing.T) {
	n := 0
	for _, fx := range readFixtures(t) {
		exp := generated[fx.Tag]
		if exp.set == nil {
			continue
		}
		w, err := Parse(fx.Cmd)
		if err != nil {
			t.Fatalf("%s: %v", fx.Tag, err)
		}
		if got := ansibleWrap(t, *exp.set, w.ID, w.Inner, w.Outer); got != fx.Cmd {
			t.Errorf("%s:\nrebuilt %q\nAnsible %q", fx.Tag, got, fx.Cmd)
		}
		n++
	}
	if n < 200 {
		t.Errorf("only %d fixtures rebuilt", n)
	}
}

// traceCmd returns the remote command of one line of a calls-*.log trace.
func traceCmd(line string) (string, bool) {
	const host = "[127.0.0.1] ["
	i := strings.Index(line, host)
	if !strings.HasPrefix(line, "ssh ") || i < 0 || !strings.HasSuffix(line, "]") {
		return "", false
	}
	return line[i+len(host) : len(line)-1], true
}

// TestParseTraces parses every ssh command of the stock traces: the become
// wrappers parse to what the trace's settings say, everything else is
// ErrNotBecome.
func TestParseTraces(t *testing.T) {
	sudoDefault := &Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}
	sudoNobody := *sudoDefault
	sudoNobody.User = "nobody"
	sudoPass := &Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S"}, User: "root", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, SetHome: true}
	su := &Wrapper{Method: Su, Exe: "su", User: "root"}
	const tmp = "/usr/bin/python3 /home/"
	want := map[string]struct {
		w     *Wrapper
		inner string // prefix
	}{
		"fhvyxxpbsblpeungqbcutnwcrgbtgzwr": {sudoPass, tmp + "pwuser/.ansible/tmp/"},
		"knawhrkztgnfmyqgtuoilxeduejtxjoi": {su, tmp + "pwuser/.ansible/tmp/"},
		"nrxuzygpmhpvaygazyndtnokshbixidt": {sudoPass, "/usr/bin/python3"},
		"houwtqmtjufydethnyoymcmbkuubboih": {su, tmp + "pwuser/.ansible/tmp/"},
		"nklxuoupzqkkblrxdutchvrffnswejuy": {sudoDefault, tmp + "deploy/.ansible/tmp/"},
		"zsbgjqydezydczmwypbxrubfyqfvewgl": {sudoDefault, "/usr/bin/python3"},
		"kkoaccdxcmjjfnuxxtxysixmvlfbdtyz": {&sudoNobody, "/usr/bin/python3"},
	}
	files, err := filepath.Glob("testdata/traces/calls-*.log")
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces: %v", err)
	}
	found, other := map[string]bool{}, 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			cmd, ok := traceCmd(line)
			if !ok {
				continue
			}
			w, err := Parse(cmd)
			if !strings.Contains(cmd, "BECOME-SUCCESS-") {
				if !errors.Is(err, ErrNotBecome) {
					t.Errorf("%s: Parse(%q) = %v, %v; want ErrNotBecome", file, cmd, w, err)
				}
				other++
				continue
			}
			if err != nil {
				t.Errorf("%s: Parse(%q): %v", file, cmd, err)
				continue
			}
			exp, ok := want[w.ID]
			if !ok {
				t.Errorf("%s: unexpected become ID %q", file, w.ID)
				continue
			}
			found[w.ID] = true
			checkWrapper(t, cmd, w, exp.w)
			if !strings.HasPrefix(w.Inner, exp.inner) || w.Shell != "/bin/sh" || w.Outer != (Outer{Shell: "/bin/sh", SleepZero: true}) {
				t.Errorf("%s: Inner %q Shell %q Outer %+v", file, w.Inner, w.Shell, w.Outer)
			}
		}
	}
	if len(found) != len(want) || other < 100 {
		t.Errorf("found %d of %d become wrappers and %d other commands", len(found), len(want), other)
	}
}

// TestRoundTrip builds wrappers with the Ansible builder over a matrix of
// settings, tasks and outer wraps, and parses them back.
func TestRoundTrip(t *testing.T) {
	const id = "abcdefghijklmnopqrstuvwxyzabcdef"
	inners := []string{
		"/usr/bin/python3",
		"/usr/bin/python3 /home/u/.ansible/tmp/ansible-tmp-1-2-3/AnsiballZ_ping.py",
		`LANG=C FOO='it'"'"'s' /usr/bin/python3 /tmp/x.py`,
		"cd /tmp &&  /home/u/.ansible/tmp/ansible-tmp-1/s.sh 'a b' \"$HOME\" `id` $(id) ; echo done",
		"printf '%s\\n' \"multi\nline\" && sleep 0",
		"echo BECOME-SUCCESS-zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz ; echo nested",
		"'",
		`\`,
		"é ünïcödé ☃",
		" ",
	}
	outers := []Outer{{Shell: "/bin/sh", SleepZero: true}, {}, {Shell: "/bin/bash"}}
	type tc struct {
		set  setting
		want Wrapper
	}
	cases := []tc{
		{setting{Sudo, "sudo", "-H -S -n", "root", false, "/bin/sh"},
			Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}},
		{setting{Sudo, "sudo", "-H -S -n", "root", true, "/bin/sh"},
			Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S"}, User: "root", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, SetHome: true}},
		{setting{Sudo, "/opt/sudo/bin/sudo", "-Hn --preserve-env=A,B,C -P --group=staff", "app_user-1.x", false, "/bin/ksh"},
			Wrapper{Method: Sudo, Exe: "/opt/sudo/bin/sudo", Flags: []string{"-H", "-n", "--preserve-env=A,B,C", "-P", "-g", "staff"}, User: "app_user-1.x", Group: "staff", Password: PasswordNever, NonInteractive: true, SetHome: true, PreserveEnvVars: []string{"A", "B", "C"}, PreserveGroups: true}},
		// Ansible inserts become_user unquoted: "#1000" alone would start a
		// comment, so it has to be written quoted.
		{setting{Sudo, "sudo", "-nHS", "'#1000'", false, "/bin/zsh"},
			Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-n", "-H", "-S"}, User: "#1000", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}},
		{setting{Sudo, "sudo", "-s -S -n", "www-data", true, "/bin/dash"},
			Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-s", "-S"}, User: "www-data", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, RunShell: true}},
		{setting{Sudo, "sudo", "--login --stdin --user=nobody", "", true, "/bin/sh"},
			Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-i", "-S"}, User: "nobody", Prompt: ansiblePromptMark, Password: PasswordAnswered, Stdin: true, Login: true}},
		{setting{Sudo, "sudo", "-H -S -p 'Enter it:'", "root", false, "/bin/sh"},
			Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S"}, User: "root", Prompt: "Enter it:", Password: PasswordUnknown, Stdin: true, SetHome: true}},
		{setting{Su, "su", "", "root", true, "/bin/sh"},
			Wrapper{Method: Su, Exe: "su", User: "root"}},
		{setting{Su, "/usr/bin/su", "- -m -s/bin/zsh", "postgres", false, "/bin/bash"},
			Wrapper{Method: Su, Exe: "/usr/bin/su", Flags: []string{"-m", "-s", "/bin/zsh", "-l"}, User: "postgres", Login: true, PreserveEnv: true, UserShell: "/bin/zsh"}},
		{setting{Su, "su", "-lp --shell /bin/sh", "", false, "/bin/sh"},
			Wrapper{Method: Su, Exe: "su", Flags: []string{"-l", "-m", "-s", "/bin/sh"}, Login: true, PreserveEnv: true, UserShell: "/bin/sh"}},
		{setting{Doas, "doas", "", "root", false, "/bin/sh"},
			Wrapper{Method: Doas, Exe: "doas", Flags: []string{"-n"}, User: "root", Password: PasswordNever, NonInteractive: true}},
		{setting{Doas, "/usr/local/bin/doas", "", "operator", true, "/bin/ksh"},
			Wrapper{Method: Doas, Exe: "/usr/local/bin/doas", User: "operator", Password: PasswordAnswered}},
		{setting{Doas, "doas", "-nuwheel", "", true, "/bin/sh"},
			Wrapper{Method: Doas, Exe: "doas", Flags: []string{"-n"}, User: "wheel", Password: PasswordNever, NonInteractive: true}},
	}
	for i, c := range cases {
		for j, inner := range inners {
			for k, outer := range outers {
				name := fmt.Sprintf("%d/%s/%d/%d", i, c.set.method, j, k)
				t.Run(name, func(t *testing.T) {
					cmd := ansibleWrap(t, c.set, id, inner, outer)
					w, err := Parse(cmd)
					if err != nil {
						t.Fatalf("Parse(%q): %v", cmd, err)
					}
					checkWrapper(t, cmd, w, &c.want)
					wantShell := c.set.shell
					if outer.Shell != "" && !outer.SleepZero {
						wantShell = outer.Shell
					}
					if w.ID != id || w.Inner != inner || w.Outer != outer || w.Shell != wantShell {
						t.Errorf("Parse(%q): ID %q Inner %q Outer %+v Shell %q", cmd, w.ID, w.Inner, w.Outer, w.Shell)
					}
				})
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	const (
		id      = "abcdefghijklmnopqrstuvwxyzabcdef"
		payload = `'echo BECOME-SUCCESS-` + id + ` ; /usr/bin/python3'`
	)
	sudo := func(mid string) string { return "sudo " + mid + " /bin/sh -c " + payload }
	outer := func(b string) string { return "/bin/sh -c " + pyQuote(b+" && sleep 0") }
	for _, c := range []struct {
		name, cmd string
		err       error
	}{
		{"empty", "", ErrNotBecome},
		{"home", "/bin/sh -c 'echo ~ && sleep 0'", ErrNotBecome},
		{"python", "/bin/sh -c '/usr/bin/python3 && sleep 0'", ErrNotBecome},
		{"control", "-O check", ErrNotBecome},
		{"bare sudo ok", sudo("-H -S -n -u root"), nil},
		{"outer sudo ok", outer(sudo("-H -S -n -u root")), nil},

		{"pbrun", outer(`pbrun  -u root ` + payload), ErrUnsupported},
		{"dzdo", outer(`dzdo -H -S -n -u root /bin/sh -c ` + payload), ErrUnsupported},
		{"machinectl", outer(`machinectl -q shell  root@ /bin/sh -c ` + payload), ErrUnsupported},
		{"wrapper exe", outer(`/usr/local/bin/sudo-wrapper -H -S -n -u root /bin/sh -c ` + payload), ErrUnsupported},
		{"exe assignment", outer(`X=/usr/bin/sudo -H -u root /bin/sh -c ` + payload), ErrUnsupported},
		{"quoted exe", outer(`'sudo' -H -u root /bin/sh -c ` + payload), ErrUnsupported},
		{"unknown sudo flag", outer(sudo("-H -S -n -k -u root")), ErrUnsupported},
		{"unknown bundled flag", outer(sudo("-HkS -u root")), ErrUnsupported},
		{"sudo chdir", outer(sudo("-H -D /tmp -u root")), ErrUnsupported},
		{"abbreviated long", outer(sudo("--non -u root")), ErrUnsupported},
		{"long with bad value", outer(sudo("--set-home=yes -u root")), ErrUnsupported},
		{"double dash", outer(sudo("-H -- -u root")), ErrUnsupported},
		{"env assignment", outer(sudo("-H -u root FOO=bar")), ErrUnsupported},
		{"missing user", outer(sudo("-H -u")), ErrUnsupported},
		{"empty user", outer(sudo("-H -u ''")), ErrUnsupported},
		{"prompt escape", outer(sudo(`-H -p "%u password:" -u root`)), ErrUnsupported},
		{"login and shell", outer(sudo("-i -s -u root")), ErrUnsupported},
		// sudo prints its usage for these; the last value must not win.
		{"two users", outer(sudo("-H -S -n -u abcu2 -u root")), ErrUnsupported},
		{"same user twice", outer(sudo("-u root -uroot")), ErrUnsupported},
		{"user long and short", outer(sudo("--user=nobody -u root")), ErrUnsupported},
		{"two groups", outer(sudo("-g adm --group adm -u root")), ErrUnsupported},
		{"two prompts", outer(sudo(`-p x -p "[sudo via ansible, key=` + id + `] password:" -u root`)), ErrUnsupported},
		{"login and preserve-env", outer(sudo("-i -E -u root")), ErrUnsupported},
		{"preserve-env and login", outer(sudo("--preserve-env -i -u root")), ErrUnsupported},
		{"login and preserve-env list", outer(sudo("-i --preserve-env=A -u root")), nil},
		{"repeated plain flags", outer(sudo("-H -H -S -S -n -n -P -P -E -E -u root")), nil},
		{"one group", outer(sudo("-g adm -u root")), nil},
		{"command substitution", outer(sudo("-H -u $(whoami)")), ErrUnsupported},
		{"backquote in double quotes", outer(sudo("-H -p \"`id`\" -u root")), ErrUnsupported},
		{"variable in double quotes", outer(sudo(`-H -p "$P" -u root`)), ErrUnsupported},
		{"semicolon", outer(sudo("-H -u root;")), ErrUnsupported},
		{"newline", outer(sudo("-H\n-u root")), ErrUnsupported},
		{"glob", outer(sudo("-H -u ro*t")), ErrUnsupported},
		{"tilde", outer(sudo("-H -u ~root")), ErrUnsupported},
		{"brace", outer(sudo("-H -u {a,b}")), ErrUnsupported},
		{"comment", outer(sudo("-H #x -u root")), ErrUnsupported},
		{"redirect", outer(sudo("-H -u root 2>/dev/null")), ErrUnsupported},
		{"trailing backslash", "sudo -H -u root /bin/sh -c " + payload + ` \`, ErrUnsupported},
		{"unterminated", outer(`sudo -H -u 'root /bin/sh -c ` + payload), ErrUnsupported},
		{"relative shell", outer(`sudo -H -u root sh -c ` + payload), ErrUnsupported},
		{"not a shell", outer(`sudo -H -u root /usr/bin/python3 -c ` + payload), ErrUnsupported},
		{"shell option", outer(`sudo -H -u root /bin/sh -e -c ` + payload), ErrUnsupported},
		{"extra argument", outer(sudo("-H -u root") + " x"), ErrUnsupported},
		{"double space before shell payload", outer(`sudo -H -u root /bin/sh -c  ` + payload), ErrUnsupported},
		{"payload in double quotes", outer(`sudo -H -u root /bin/sh -c "echo BECOME-SUCCESS-` + id + ` ; /usr/bin/python3"`), ErrUnsupported},
		{"payload over-quoted", outer(`sudo -H -u root /bin/sh -c 'echo BECOME-SUCCESS-` + id + ` ; /usr/bin/python3'''`), ErrUnsupported},
		{"short id", outer(`sudo -u root /bin/sh -c 'echo BECOME-SUCCESS-abc ; /usr/bin/python3'`), ErrUnsupported},
		{"upper-case id", outer(`sudo -u root /bin/sh -c 'echo BECOME-SUCCESS-` + strings.ToUpper(id) + ` ; /usr/bin/python3'`), ErrUnsupported},
		{"long id", outer(`sudo -u root /bin/sh -c 'echo BECOME-SUCCESS-` + id + `x ; /usr/bin/python3'`), ErrUnsupported},
		{"no separator", outer(`sudo -u root /bin/sh -c 'echo BECOME-SUCCESS-` + id + `; /usr/bin/python3'`), ErrUnsupported},
		{"no inner", outer(`sudo -u root /bin/sh -c 'echo BECOME-SUCCESS-` + id + ` ; '`), ErrUnsupported},
		{"printf", outer(`sudo -u root /bin/sh -c 'printf BECOME-SUCCESS-` + id + ` ; /usr/bin/python3'`), ErrUnsupported},
		{"outer not canonical", `/bin/sh -c "` + sudo("-u root") + ` && sleep 0"`, ErrUnsupported},
		{"outer other suffix", "/bin/sh -c " + pyQuote(sudo("-u root")+" && sleep 1"), ErrUnsupported},
		{"outer trailing command", "/bin/sh -c " + pyQuote(sudo("-u root")+" && sleep 0; id"), ErrUnsupported},
		{"outer python", "/usr/bin/python3 -c " + pyQuote(sudo("-u root")), ErrUnsupported},
		{"bare with sleep", sudo("-u root") + " && sleep 0", ErrUnsupported},

		{"su ok", outer(`su - root -c ` + pyQuote(`/bin/sh -c `+payload)), nil},
		{"su extra operand", outer(`su root extra -c ` + pyQuote(`/bin/sh -c `+payload)), ErrUnsupported},
		{"su late dash", outer(`su root - -c ` + pyQuote(`/bin/sh -c `+payload)), ErrUnsupported},
		{"su command in flags", outer(`su -c id root -c ` + pyQuote(`/bin/sh -c `+payload)), ErrUnsupported},
		{"su session command", outer(`su --session-command=id root -c ` + pyQuote(`/bin/sh -c `+payload)), ErrUnsupported},
		{"su group", outer(`su -g adm root -c ` + pyQuote(`/bin/sh -c `+payload)), ErrUnsupported},
		{"su shell eats -c", outer(`su -s -c ` + pyQuote(`/bin/sh -c `+payload)), ErrUnsupported},
		{"su unquoted command", outer(`su root -c /bin/sh -c ` + payload), ErrUnsupported},
		{"su inner not canonical", outer(`su root -c ` + pyQuote(`/bin/sh -c "echo BECOME-SUCCESS-`+id+` ; id"`)), ErrUnsupported},
		{"su not shell", outer(`su root -c ` + pyQuote(`/usr/bin/env -c `+payload)), ErrUnsupported},
		{"su double dash", outer(`su -- root -c ` + pyQuote(`/bin/sh -c `+payload)), ErrUnsupported},

		{"doas ok", outer(`doas -n -u root /bin/sh -c ` + payload), nil},
		{"doas shell", outer(`doas -s -n /bin/sh -c ` + payload), ErrUnsupported},
		{"doas config", outer(`doas -C /etc/doas.conf /bin/sh -c ` + payload), ErrUnsupported},
		{"doas long", outer(`doas --user=root /bin/sh -c ` + payload), ErrUnsupported},
		{"doas operand", outer(`doas -n env /bin/sh -c ` + payload), ErrUnsupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := Parse(c.cmd)
			if c.err == nil {
				if err != nil {
					t.Fatalf("Parse(%q): %v", c.cmd, err)
				}
				return
			}
			if !errors.Is(err, c.err) || w != nil {
				t.Fatalf("Parse(%q) = %+v, %v; want %v", c.cmd, w, err, c.err)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	parse := func(cmd string) *Wrapper {
		t.Helper()
		w, err := Parse(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	set := setting{Sudo, "sudo", "-H -S -n", "root", false, "/bin/sh"}
	base := parse(ansibleWrap(t, set, "abcdefghijklmnopqrstuvwxyzabcdef", "/usr/bin/python3", Outer{Shell: "/bin/sh", SleepZero: true}))
	same := func(s setting) bool {
		return parse(ansibleWrap(t, s, "zyxwvutsrqponmlkjihgfedcbazyxwvu", "id", Outer{})).Identity() == base.Identity()
	}
	pass := set
	pass.pass = true
	bundled := set
	bundled.flags = "-HSn"
	bash := set
	bash.shell = "/bin/bash"
	if !same(pass) || !same(bundled) || !same(bash) {
		t.Errorf("password, bundling or shell changed %q", base.Identity())
	}
	for _, s := range []setting{
		{Sudo, "sudo", "-H -S -n", "nobody", false, "/bin/sh"},
		{Sudo, "/usr/bin/sudo", "-H -S -n", "root", false, "/bin/sh"},
		{Sudo, "sudo", "-S -n", "root", false, "/bin/sh"},
		{Sudo, "sudo", "-H -S -n -E", "root", false, "/bin/sh"},
		{Sudo, "sudo", "-H -S -n -g adm", "root", false, "/bin/sh"},
		{Su, "su", "", "root", false, "/bin/sh"},
		{Doas, "doas", "", "root", false, "/bin/sh"},
	} {
		if same(s) {
			t.Errorf("%+v has the Identity of %+v", s, set)
		}
	}
	env1 := parse(outerSudo("--preserve-env=B,A --preserve-env=A -u root"))
	env2 := parse(outerSudo("--preserve-env=A,B -u root"))
	if env1.Identity() != env2.Identity() {
		t.Errorf("preserve-env lists: %q != %q", env1.Identity(), env2.Identity())
	}
}

func outerSudo(mid string) string {
	return "/bin/sh -c " + pyQuote("sudo "+mid+" /bin/sh -c 'echo BECOME-SUCCESS-abcdefghijklmnopqrstuvwxyzabcdef ; id' && sleep 0")
}

func TestPrompts(t *testing.T) {
	const id = "abcdefghijklmnopqrstuvwxyzabcdef"
	parse := func(s setting) *Wrapper {
		t.Helper()
		w, err := Parse(ansibleWrap(t, s, id, "/usr/bin/python3", Outer{Shell: "/bin/sh", SleepZero: true}))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	sudoPass := parse(setting{Sudo, "sudo", "-H -S -n", "root", true, "/bin/sh"})
	sudoNoPass := parse(setting{Sudo, "sudo", "-H -S -n", "root", false, "/bin/sh"})
	sudoOwnPrompt := parse(setting{Sudo, "sudo", "-H -S -p Password:", "root", false, "/bin/sh"})
	su := parse(setting{Su, "su", "", "root", true, "/bin/sh"})
	doas := parse(setting{Doas, "doas", "", "root", true, "/bin/sh"})

	prompt := "[sudo via ansible, key=" + id + "] password:"
	for _, c := range []struct {
		w    *Wrapper
		line string
		want bool
	}{
		{sudoPass, prompt, true},
		{sudoPass, prompt + " ", true},
		{sudoPass, "\r\n  " + prompt + "\r\n", true},
		{sudoPass, prompt + " trailing", true},
		{sudoPass, "x" + prompt, false},
		{sudoPass, "[sudo via ansible, key=zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz] password:", false},
		{sudoPass, "[sudo] password for deploy: ", false},
		{sudoNoPass, prompt, false},
		{sudoOwnPrompt, "Password:", false},
	} {
		if got := c.w.IsPrompt([]byte(c.line)); got != c.want {
			t.Errorf("%s IsPrompt(%q) = %v", c.w.Method, c.line, got)
		}
	}

	// What Python's re answers for the su and doas plugins' expressions
	// (ansible-core 2.14.18, community.general 6.6.2).
	for _, c := range []struct {
		line     string
		su, doas bool
	}{
		{"Password: ", true, true},
		{"Password:", true, true},
		{"password", true, false},
		{"PASSWORD for root", true, false},
		{"root's Password:", true, false},
		{"root's password: ", true, false},
		{"x root's Password:", false, false},
		{" Password:", false, false},
		{"Passwort: ", true, false},
		{"Mot de passe : ", true, false},
		{"MOT DE PASSE:", true, false},
		{"口令：", true, false},
		{"口令", false, false},
		{"口令 : ", true, false},
		{"密码：", true, false},
		{"Пароль: ", true, false},
		{"пароль: ", false, false},
		{"ПАРОЛЬ: ", false, false},
		{"Лозинка:", true, false},
		{"Jelszó: ", true, false},
		{"JELSZÓ: ", false, false},
		{"jelszó:", true, false},
		{"Lösenord:", true, false},
		{"LÖSENORD:", false, false},
		{"Mật khẩu: ", true, false},
		{"MẬT KHẨU:", false, false},
		{"mật khẩu:", true, false},
		{"bob_1's Senha:", true, false},
		{"bob-1's Senha:", false, false},
		{"Kennwort:", false, false},
		{"doas (deploy@t) password: ", false, true},
		{"\rdoas (deploy@t) password: ", false, false},
		{"[sudo via ansible, key=x] password:", false, false},
		{"Contraseña:", true, false},
		{"CONTRASEÑA:", false, false},
		{"contraseÑa:", false, false},
		{"ab's 암호:", true, false},
		{"Wachtwoord\r\n", true, false},
		{"Sorry, try again.", false, false},
	} {
		if got := su.IsPrompt([]byte(c.line)); got != c.su {
			t.Errorf("su IsPrompt(%q) = %v", c.line, got)
		}
		if got := doas.IsPrompt([]byte(c.line)); got != c.doas {
			t.Errorf("doas IsPrompt(%q) = %v", c.line, got)
		}
	}

	for _, w := range []*Wrapper{sudoPass, su, doas} {
		if !w.IsSuccess([]byte("BECOME-SUCCESS-"+id+"\r\n")) || !w.IsSuccess([]byte("noise BECOME-SUCCESS-"+id)) ||
			w.IsSuccess([]byte("BECOME-SUCCESS-zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\n")) {
			t.Errorf("%s IsSuccess", w.Method)
		}
	}
	for _, c := range []struct {
		w                  *Wrapper
		line               string
		incorrect, missing bool
	}{
		{sudoPass, "Sorry, try again.\n", true, false},
		{sudoPass, "sudo: a password is required\n", false, true},
		{sudoPass, "Sorry, a password is required to run sudo\n", false, true},
		{sudoPass, "sudo: 3 incorrect password attempts\n", false, false},
		{su, "su: Authentication failure\n", true, false},
		{su, "Sorry, try again.\n", false, false},
		{doas, "doas: Permission denied\n", true, false},
		{doas, "doas: Authorization required\n", false, true},
	} {
		if got := c.w.IsIncorrectPassword([]byte(c.line)); got != c.incorrect {
			t.Errorf("%s IsIncorrectPassword(%q) = %v", c.w.Method, c.line, got)
		}
		if got := c.w.IsMissingPassword([]byte(c.line)); got != c.missing {
			t.Errorf("%s IsMissingPassword(%q) = %v", c.w.Method, c.line, got)
		}
	}
	if m := Lookup("pbrun"); m != nil {
		t.Errorf("Lookup(pbrun) = %v", m)
	}
	if got := len(SuPromptLocalizations); got != 32 {
		t.Errorf("%d su localisations, su.py has 32", got)
	}
}

func TestPyQuote(t *testing.T) {
	// Values from Python's shlex.quote.
	for in, want := range map[string]string{
		"":             "''",
		"abc":          "abc",
		"a-b_c.d/e:f":  "a-b_c.d/e:f",
		"@%+=,":        "@%+=,",
		"a b":          "'a b'",
		"it's":         `'it'"'"'s'`,
		"'":            `''"'"''`,
		"é":            "'é'",
		"$HOME":        "'$HOME'",
		"~":            "'~'",
		"a\nb":         "'a\nb'",
		"[sudo] x:":    "'[sudo] x:'",
		"-H -S -n":     "'-H -S -n'",
		"--prompt=a b": "'--prompt=a b'",
	} {
		if got := pyQuote(in); got != want {
			t.Errorf("pyQuote(%q) = %q, want %q", in, got, want)
		}
		if got, ok := unquoteCanonical(want); !ok || got != in {
			t.Errorf("unquoteCanonical(%q) = %q, %v", want, got, ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, fx := range readFixtures(f) {
		f.Add(fx.Cmd)
	}
	f.Add(outerSudo("-H -S -n -u root"))
	f.Add("su - root -c '/bin/sh -c '\"'\"'echo BECOME-SUCCESS-abcdefghijklmnopqrstuvwxyzabcdef ; id'\"'\"''")
	f.Add(`doas -u root /bin/sh -c "echo BECOME-SUCCESS-abcdefghijklmnopqrstuvwxyzabcdef ; id"`)
	f.Fuzz(func(t *testing.T, cmd string) {
		w, err := Parse(cmd)
		if err != nil {
			if w != nil || !(errors.Is(err, ErrNotBecome) || errors.Is(err, ErrUnsupported)) {
				t.Fatalf("Parse(%q) = %+v, %v", cmd, w, err)
			}
			return
		}
		if w.Method != Sudo && w.Method != Su && w.Method != Doas {
			t.Fatalf("Parse(%q): Method %q", cmd, w.Method)
		}
		if w.Success != successPrefix+w.ID || len(w.ID) != idLen || w.Inner == "" || !isShellPath(w.Shell) {
			t.Fatalf("Parse(%q) = %+v", cmd, w)
		}
		// The command ends with the quoted payload, quoted once more
		// inside the outer shell's argument.
		payload := pyQuote("echo " + w.Success + " ; " + w.Inner)
		if w.Method == Su {
			payload = pyQuote(w.Shell + " -c " + payload)
		}
		if w.Outer.Shell != "" {
			payload = strings.ReplaceAll(payload, "'", `'"'"'`)
		}
		if !strings.Contains(cmd, payload) {
			t.Fatalf("Parse(%q): payload %q not in command", cmd, payload)
		}
		_ = w.Identity()
		w.IsPrompt([]byte(cmd))
	})
}

func ExampleParse() {
	cmd := `/bin/sh -c 'sudo -H -S -p "[sudo via ansible, key=fhvyxxpbsblpeungqbcutnwcrgbtgzwr] password:" -u root /bin/sh -c '"'"'echo BECOME-SUCCESS-fhvyxxpbsblpeungqbcutnwcrgbtgzwr ; /usr/bin/python3'"'"' && sleep 0'`
	w, err := Parse(cmd)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w.Method, w.Exe, w.Flags, w.User, w.Password)
	fmt.Println(w.Prompt)
	fmt.Println(w.Success)
	fmt.Printf("%s -c %q\n", w.Shell, w.Inner)
	fmt.Printf("%+v\n", w.Outer)
	fmt.Println(w.IsPrompt([]byte(w.Prompt)), w.Identity())

	_, err = Parse(`/bin/sh -c 'pbrun  -u root '"'"'echo BECOME-SUCCESS-fepsfjkbdbfsczbyyovtibevpelierot ; /usr/bin/python3'"'"' && sleep 0'`)
	fmt.Println(errors.Is(err, ErrUnsupported), err)
	// Output:
	// sudo sudo [-H -S] root answered
	// [sudo via ansible, key=fhvyxxpbsblpeungqbcutnwcrgbtgzwr] password:
	// BECOME-SUCCESS-fhvyxxpbsblpeungqbcutnwcrgbtgzwr
	// /bin/sh -c "/usr/bin/python3"
	// {Shell:/bin/sh SleepZero:true}
	// true sudo sudo user=root set-home
	// true unsupported become wrapper: become tool "pbrun"
}

// TestWithInner: replacing Inner by itself gives the command back, and
// by another command gives a wrapper that parses to that command with
// everything else the same.
func TestWithInner(t *testing.T) {
	n := 0
	for _, fx := range readFixtures(t) {
		cmd := fx.Cmd
		w, err := Parse(cmd)
		if err != nil {
			continue
		}
		same, err := w.WithInner(cmd, w.Inner)
		if err != nil || same != cmd {
			t.Errorf("WithInner(Inner) of %q: %q, %v", cmd, same, err)
			continue
		}
		const other = `/usr/bin/python3 -c 'import base64;exec(base64.b64decode("aW1wb3J0IG9z"))'`
		got, err := w.WithInner(cmd, other)
		if err != nil {
			t.Errorf("WithInner of %q: %v", cmd, err)
			continue
		}
		w2, err := Parse(got)
		if err != nil {
			t.Errorf("rewritten %q does not parse: %v", got, err)
			continue
		}
		if w2.Inner != other || w2.Identity() != w.Identity() || w2.Success != w.Success || w2.Prompt != w.Prompt || w2.Outer != w.Outer {
			t.Errorf("rewritten %q parses to %+v, want %+v with Inner %q", got, w2, w, other)
		}
		n++
	}
	if n < 100 {
		t.Fatalf("only %d wrappers rewritten", n)
	}
}

// TestParseVersionTraces parses the become steps every ansible-core
// version sent (bridge/testdata/traces, scripts/record-traces.sh): sudo
// to root, pipelined and from a temp dir, with " && sleep 0" up to 2.21
// and without it from 2.22.
func TestParseVersionTraces(t *testing.T) {
	files, err := filepath.Glob("../testdata/traces/*.log")
	if err != nil || len(files) < 10 {
		t.Fatalf("traces: %v %v", files, err)
	}
	sudo := &Wrapper{Method: Sudo, Exe: "sudo", Flags: []string{"-H", "-S", "-n"}, User: "root", Password: PasswordNever, NonInteractive: true, Stdin: true, SetHome: true}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			cmd, ok := traceCmd(line)
			if !ok || !strings.Contains(cmd, "BECOME-SUCCESS-") {
				continue
			}
			n++
			w, err := Parse(cmd)
			if err != nil {
				t.Errorf("%s: Parse(%q): %v", file, cmd, err)
				continue
			}
			checkWrapper(t, cmd, w, sudo)
			sleep := !strings.HasPrefix(filepath.Base(file), "2.22-")
			if !strings.HasPrefix(w.Inner, "/usr/bin/python3") || w.Outer != (Outer{Shell: "/bin/sh", SleepZero: sleep}) {
				t.Errorf("%s: Inner %q Outer %+v", file, w.Inner, w.Outer)
			}
		}
		if n != 1 {
			t.Errorf("%s: %d become steps, want 1", file, n)
		}
	}
}

// TestCommandEnv: sudo's SUDO_COMMAND is its command and arguments joined
// by spaces, as a module under stock's sudo sees it; the others set none.
func TestCommandEnv(t *testing.T) {
	const id = "abcdefghijklmnopqrstuvwxyzabcdef"
	tests := []struct {
		cmd  string
		want map[string]string
	}{
		{`/bin/sh -c 'sudo -H -S -n  -u root /bin/sh -c '"'"'echo BECOME-SUCCESS-` + id + ` ; /usr/bin/python3'"'"' && sleep 0'`,
			map[string]string{"SUDO_COMMAND": "/bin/sh -c echo BECOME-SUCCESS-" + id + " ; /usr/bin/python3"}},
		{`/bin/sh -c 'sudo -H -S -n -i -u root /bin/sh -c '"'"'echo BECOME-SUCCESS-` + id + ` ; /usr/bin/python3'"'"' && sleep 0'`, nil},
		{`/bin/sh -c 'su  root -c '"'"'/bin/sh -c '"'"'"'"'"'"'"'"'echo BECOME-SUCCESS-` + id + ` ; /usr/bin/python3'"'"'"'"'"'"'"'"''"'"' && sleep 0'`, nil},
	}
	for _, tc := range tests {
		w, err := Parse(tc.cmd)
		if err != nil {
			t.Fatalf("%s: %v", tc.cmd, err)
		}
		if got := w.CommandEnv(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %s: %q, want %q", tc.cmd, w.Method, got, tc.want)
		}
	}
}
