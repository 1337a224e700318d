package main

// Targeted calls for the C floor: each branch of main.go (and of the parts
// of bridge/become and interp/ansiballz it uses) that the calls Ansible
// makes do not reach, run through both floors by same.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// shQuote is Python's shlex.quote, as Ansible quotes.
func shQuote(s string) string {
	if s == "" {
		return "''"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_@%+=:,./-", c) >= 0) {
			return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
		}
	}
	return s
}

// sh is Ansible's remote command for inner.
func sh(inner string) string { return "/bin/sh -c " + shQuote(inner) }

// spaces are Go's Unicode white space (unicode.IsSpace), and runes that
// look like it but are not.
var spaces = []string{
	" ", "\t", "\n", "\v", "\f", "\r", "\u0085", "\u00a0", "\u1680", "\u2000", "\u2005", "\u200a", "\u2028",
	"\u2029", "\u202f", "\u205f", "\u3000", "\u200b", "\u180e", "\ufeff", "\x00", "\xc2", "\xe2\x80",
}

func TestSameSSHOptions(t *testing.T) {
	t.Parallel()
	values := []string{
		"ControlPersist", "ControlPersist ", " ControlPersist", "ControlPersist=", "ControlPersist= ",
		"Foo\tBar", "Foo Bar=", "Foo =bar", "Foo\t=", "=", "", " ", "=x", "a=b=c", "User", "User=",
		"User=ſ", "uſer=x", "USER=\"\"x\"\"", "User = \"x y\"", "Uſer=root", "UſER=root", "User\u212a=x",
		"ÀB", "ĀĂ", "İ", "\xffA", "ΣΑΣ", "ẞ", "ǅǄ", "Ωmega", "\u0130x\u0131", "K", "User=\u200bx",
		"User=\ufeff", "User=\u180e", "User=\"", "User=\"\"", "User=\"root", "User='x'", "user=@", "User=a@b",
	}
	for _, sp := range spaces {
		values = append(values, "ControlPersist="+sp, sp+"ControlPersist"+sp, "User="+sp+"root"+sp, sp+"User=x", "User"+sp+"=y")
	}
	for _, v := range values {
		v = strings.ReplaceAll(v, "\x00", "")
		for _, dest := range []string{"h", "u@h", "@h", "a@b@h"} {
			same(t, []string{"ssh", "-o", v, dest, sh("echo ~ && sleep 0")}, "")
		}
		same(t, []string{"ssh", "-o", v, "-l", "lu", "h", sh("echo ~")}, "")
		same(t, []string{"sftp", "-o", v, "-b", "-", "h"}, "put a b\n")
		same(t, []string{"scp", "-o", v, "a", "h:b"}, "")
	}
}

func TestSameCommandLines(t *testing.T) {
	t.Parallel()
	home := sh("echo ~ && sleep 0")
	for _, argv := range [][]string{
		{"ssh"}, {"ssh", "-o"}, {"ssh", "-C"}, {"ssh", "-"}, {"ssh", "--"}, {"ssh", "--", "h", home},
		{"ssh", "-", "h"}, {"ssh", "-l"}, {"ssh", "-lroot", "h", home}, {"ssh", "-l", "a", "-l", "b", "h", home},
		{"ssh", "-tlroot", "h", home}, {"ssh", "-ttt", "h", home}, {"ssh", "-t", "-t", "h", home}, {"ssh", "-t", "h", home},
		{"ssh", "-tt", "h"}, {"ssh", "-tt", "h", "a", "b"}, {"ssh", "-tt", "[::1]", home}, {"ssh", "-Tt", "-t", "h", home},
		{"ssh", "-O"}, {"ssh", "-O", "check"}, {"ssh", "-Ocheck", "h"}, {"ssh", "-O", "forward", "h"},
		{"ssh", "-O", "stop", "-O", "check", "h"}, {"ssh", "-O", "check", "-O", "nope", "h"}, {"ssh", "-tt", "-O", "exit", "h"},
		{"ssh", "-O", "", "h"}, {"ssh", "-O", "chéck", "h"}, {"ssh", "-o", "ControlPersist", "-O", "check", "h"},
		{"ssh", "h", "/bin/sh", "-c", "'echo ~'"}, {"ssh", "h", "/bin/sh -c", "'echo ~'"}, {"ssh", "h", ""},
		{"ssh", "-\xff", "h", home}, {"ssh", "-é", "h", home}, {"ssh", "h", "echo ~"},
		{"sftp"}, {"sftp", "h"}, {"sftp", "-b"}, {"sftp", "-b", "-"}, {"sftp", "-b", "-", "a", "b"}, {"sftp", "-b-", "h"},
		{"sftp", "-b", "/nonexistent", "h"}, {"sftp", "-b", "/", "h"}, {"sftp", "-b", "", "h"}, {"sftp", "-b", "-", "-b", "/x", "h"},
		{"sftp", "-o"}, {"sftp", "-P"}, {"sftp", "--", "-b", "-", "h"},
		{"scp"}, {"scp", "a"}, {"scp", "a", "b"}, {"scp", "a:", "b:"}, {"scp", "a", "b", "h:c"}, {"scp", "-F"}, {"scp", "-3", "a", "h:b"},
		{"scp", "", ":"}, {"scp", "é\xff", "h:\x01"}, {"scp", "--", "a", "h:b"},
		{"ssh/", "h", home}, {"/usr/bin/ssh", "h", home}, {"ssh//", "h", home}, {"/", "h"}, {"", "h"}, {".", "h"},
		{"x/sftp", "-b", "-", "h"}, {"SSH", "h"}, {"ſsh", "h"}, {"ssh\xff", "h"}, {"a\"b\\c\x7f\u2028", "h"},
	} {
		same(t, argv, "put a b\n")
	}
	// sftp -b with a file, which the C floor opens itself.
	batch := filepath.Join(t.TempDir(), "batch")
	if err := os.WriteFile(batch, []byte("put a b\n  -put c d  \nget e\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	same(t, []string{"sftp", "-b", batch, "h"}, "")
}

func TestSameRemoteCommands(t *testing.T) {
	t.Parallel()
	const tmp = "/home/u/.ansible/tmp/ansible-tmp-1-2-3"
	mkdir := func(name, dir string) string {
		return "( umask 77 && mkdir -p \"` echo /home/u/.ansible/tmp `\"&& mkdir \"` echo " + dir + " `\" && echo " + name + "=\"` echo " + dir + " `\" )"
	}
	inners := []string{
		"echo ~", "echo ~ && sleep 0", "echo ~root", "echo ~-x", "echo ~.x-y", "echo ~_", "echo ~a b", "echo ~ && sleep 0 ",
		"echo  ~", "echo ~a && sleep 0 && sleep 0", "echo ~é", "echo ~a\n", "echo ~\n && sleep 0", "echo ~ && sleep 1",
		mkdir("ansible-tmp-1-2-3", tmp), mkdir("ansible-tmp-1-2-3", tmp) + " && sleep 0", mkdir("n", "d") + " && sleep 0 ",
		mkdir("a b", tmp), mkdir("", tmp), mkdir("n", ""), mkdir("n", " ") + " && sleep 0", mkdir("n", "x `\" ) && sleep 0"),
		mkdir("n", "x `\" )") + " && sleep 0", mkdir("n", "a\nb"), mkdir("n=m", "d"), mkdir("n", "d && echo m=\"` echo e"),
		mkdir("n", "d") + " && echo m=\"` echo e `\" )", "( umask 77 && mkdir  && echo n=\"` echo d `\" )",
		"( umask 77 && mkdir x && echo n=\"` echo d `\" ) && echo o=\"` echo e `\" )", mkdir("é\xff", "\u2028"),
		mkdir("n\u00a0", "d"), mkdir("n\v", "d"), mkdir("n\t", "d"),
		"chmod u+x " + tmp, "chmod u+x", "chmod u+rwx " + tmp, "chmod  u+x x", "rm -f -r " + tmp + "/ > /dev/null 2>&1", "rm -f -r",
		"/usr/bin/python3", "/usr/bin/python3 && sleep 0", "/usr/bin/python", "/python", "python3", "/usr/bin/python3.11.2",
		"/usr/bin/python3x", "/usr/bin/python3 " + tmp + "/AnsiballZ_ping.py", "/usr/bin/python3 /AnsiballZ_ping.py",
		"/usr/bin/python3 x/AnsiballZ_ping.py", "/usr/bin/python3 x/AnsiballZ_ping.py.py", "/usr/bin/python3 x/AnsiballZ_a/AnsiballZ_b.py",
		"/usr/bin/python3 x/AnsiballZ_p-ng.py", "/usr/bin/python3 x/AnsiballZ_.py", "/usr/bin/python3 x/AnsiballZ_command.py && sleep 0",
		"/usr/bin/python3  && sleep 0", "/usr/bin/python3\t&& sleep 0", "/usr/bin/python3 x/AnsiballZ_ping.py\t",
		"/usr/bin/python3 && sleep 0 && sleep 0", "/usr/bin/python3 x/AnsiballZ_ping.py x", "/opt/pypython/bin/python3.12",
		"/usr/bin/python3 x/AnsiballZ_setup.py", "/usr/bin/python3 x/AnsiballZ_é.py", "/\xffpython", "/usr/bin/python3 \xff/AnsiballZ_ping.py",
		"/usr/bin/python3\v", "/usr/bin/python3 x/AnsiballZ_ping.py\v", "/usr/bin/python3 ", "/usr/bin/python3 &&", "/usr/bin/python3 && sleep",
		"LANG=C /usr/bin/python3", "id -un", "", "é\u2028\x01<>&\"\\",
	}
	for _, inner := range inners {
		same(t, sshCall("h", sh(inner)), "")
		same(t, sshCall("-tt", "h", sh(inner)), pingWrap)
	}
	for _, cmd := range []string{
		`/bin/sh -c "echo ~"`, `/bin/sh -c echo\ ~`, `/bin/sh -c 'echo'\'' ~'`, `/bin/sh -c "a\"b\\$c` + "\\`" + `"`, `/bin/sh -c echo\`,
		`/bin/sh -c 'echo ~`, `/bin/sh -c "echo ~`, "/bin/sh -c \"x\\\ny\"", `/bin/sh -c "\x\$"`, `/bin/sh -c ''`, "/bin/sh -c ",
		`/bin/sh -c 'echo ~' 'x'`, "/bin/sh -c 'echo ~'\t", "/bin/sh -c \"echo ~\"\"\"", `/bin/sh -c ec"ho ~"`, "/bin/sh  -c 'echo ~'",
		"/bin/bash -c 'echo ~'", "/bin/sh -c 'echo ~'\n", `/bin/sh -c "\"`, `/bin/sh -c \'echo\ \~\'`, "/bin/sh -c \\\\",
	} {
		same(t, sshCall("h", cmd), "")
	}
}

func TestSameSFTPBatches(t *testing.T) {
	t.Parallel()
	var lines []string
	for _, sp := range spaces {
		lines = append(lines, sp+"put a b"+sp, sp, sp+"#c", "put"+sp+"x")
	}
	lines = append(lines, "-@-put x", "@put y", "-put", "put", "#", "  # x", "put a\r", "put\ta", "put\u00a0a", "\xffput")
	same(t, []string{"sftp", "-b", "-", "h"}, strings.Join(lines, "\n"))
	same(t, []string{"sftp", "-b", "-", "h"}, strings.Join(lines, "\r\n")+"\r\n")
	for _, refused := range []string{"putx a", "PUT a", "get a", "ls", "\u00a0get", "p\x00ut", "put\x00", "-@", "é", "\x01<>&"} {
		same(t, []string{"sftp", "-b", "-", "h"}, "put a b\n"+refused+"\nput c d\n")
	}
	// bufio.Scanner's 1 MiB limit, with and without the line's newline.
	long := strings.Repeat("x", 1<<20)
	for _, stdin := range []string{
		"put " + long[:1<<20-5], "put " + long[:1<<20-4], "put " + long[:1<<20-5] + "\n", "put " + long[:1<<20-4] + "\n",
		"put a\n" + "put " + long, "put a\nget " + long[:1<<20-6] + "\nput b\n", strings.Repeat("put a b\n", 300000),
		strings.Repeat("\n", 200000) + "put a", "put " + long[:1<<20-6] + "\r\n", "",
	} {
		same(t, []string{"sftp", "-b", "-", "h"}, stdin)
	}
}

// becomeCmd is what Ansible's sudo and doas plugins send: tool, options,
// then the shell running the success echo and inner.
func becomeCmd(tool, opts, id, inner string) string {
	return sh(tool + " " + opts + " /bin/sh -c " + shQuote("echo BECOME-SUCCESS-"+id+" ; "+inner) + " && sleep 0")
}

// suCmd is what Ansible's su plugin sends.
func suCmd(opts, id, inner string) string {
	return sh("su " + opts + " -c " + shQuote("/bin/sh -c "+shQuote("echo BECOME-SUCCESS-"+id+" ; "+inner)) + " && sleep 0")
}

func TestSameBecomeShapes(t *testing.T) {
	t.Parallel()
	const id = "abcdefghijklmnopqrstuvwxyzabcdef"
	prompt := "-p \"[sudo via ansible, key=" + id + "] password:\""
	var cmds []string
	for _, opts := range []string{
		"-H -S -n", "-H -S " + prompt, "-H -S " + prompt + " -u root", "-S -n -i -s", "-i", "-s", "-i -s", "--login --shell",
		"-E", "--preserve-env", "--preserve-env=", "--preserve-env=A,B", "--preserve-env A", "-u", "-u ''", "--user", "--user=", "--user=x",
		"--user x", "-uroot", "-g", "-g ''", "-gwheel", "--group=", "-p ''", "-p '%u'", "-p x%", "--prompt=x", "--prompt", "--stdin=x",
		"--set-home", "--non-interactive", "--shell=x", "-P", "--preserve-groups", "-x", "--x", "--", "-", "x", "-S -- -n", "-HSn",
		"-HSnuroot", "-HSnu", "-H -S -p \"[sudo via ansible, key=" + id[:31] + "] password:\"",
		"-H -S -p \"[sudo via ansible, key=" + strings.ToUpper(id) + "] password:\"", "-S -p \"[SUDO via ansible, key=" + id + "] password:\"",
		"-S -p \"[dzdo via ansible, key=" + id + "] password:\"", "-S -p \"[sudo via ansible, key=" + id + "] password: \"",
		"-S -p \"[ via ansible, key=" + id + "] password:\"", "-S -p \"[sudo via ansible, key=" + id + "x] password:\"",
		"-S -p '[sudo via ansible, key=" + id + "] password:'", "-S -p \"[sudo via ansible, key=" + id + "] password:\" -n",
		"-n -p \"[sudo via ansible, key=" + id + "] password:\"", "-p \"a b\"", "-p \"$x\"", "-p a\\ b", "-p \"é\xff\"",
	} {
		cmds = append(cmds, becomeCmd("sudo", opts, id, "/usr/bin/python3"), becomeCmd("/usr/bin/sudo", opts, id, "echo ~"))
	}
	for _, opts := range []string{"", "-n", "-u root", "-n -u root", "-u", "-u ''", "-nu x", "--user=x", "-x", "-- -n", "x"} {
		cmds = append(cmds, becomeCmd("doas", opts, id, "/usr/bin/python3"))
	}
	for _, opts := range []string{
		"", "root", "- root", "-", "- -", "-l root", "--login", "-m", "-p", "--preserve-environment", "-s /bin/bash root",
		"-s ''", "--shell", "--shell=/bin/sh", "--shell /bin/sh", "-x", "--x", "--", "root x", "'' ", "-- root", "-root", "root -",
		"- root x y", "-l -",
	} {
		cmds = append(cmds, suCmd(opts, id, "/usr/bin/python3"))
	}
	for _, p := range []string{
		"echo BECOME-SUCCESS-" + id, "echo BECOME-SUCCESS-" + id + " ; ", "echo BECOME-SUCCESS-" + id + " ;  x",
		"echo BECOME-SUCCESS-" + id[:31] + " ; x", "echo BECOME-SUCCESS-" + strings.ToUpper(id) + " ; x",
		"echo BECOME-SUCCESS-" + id[:30] + "é ; x", "echo  BECOME-SUCCESS-" + id + " ; x", "echo BECOME-SUCCESS-" + id + "; x",
		"echo BECOME-SUCCESS-" + id + "x ; y", "BECOME-SUCCESS-" + id + " ; x",
	} {
		cmds = append(cmds, sh("sudo -H -S -n /bin/sh -c "+shQuote(p)+" && sleep 0"), sh("su root -c "+shQuote("/bin/sh -c "+shQuote(p))))
	}
	cmds = append(cmds, []string{
		"sudo -H -S -n /bin/sh -c 'echo BECOME-SUCCESS-" + id + " ; echo ~'",
		"/bin/bash -c 'sudo -n /bin/bash -c '\"'\"'echo BECOME-SUCCESS-" + id + " ; echo ~'\"'\"''",
		"/bin/sh -c 'sudo -n /bin/sh -c '\"'\"'echo BECOME-SUCCESS-" + id + " ; echo ~'\"'\"' && sleep 0 && sleep 0'",
		"/bin/sh -c 'sudo -n /bin/zsh/ -c '\"'\"'echo BECOME-SUCCESS-" + id + " ; echo ~'\"'\"''",
		"/bin/sh -c 'sudo -n /bin/csh -c '\"'\"'echo BECOME-SUCCESS-" + id + " ; echo ~'\"'\"''",
		"/bin/sh -c 'sudo -n bin/sh -c '\"'\"'echo BECOME-SUCCESS-" + id + " ; echo ~'\"'\"''",
		"/bin/sh -c 'sudo -n /bin/sh -c \"echo BECOME-SUCCESS-" + id + " ; echo ~\"'",
		"/bin/sh -c 'sudo -n /bin/sh  -c '\"'\"'echo BECOME-SUCCESS-" + id + " ; echo ~'\"'\"''",
		"/bin/sh -c 'sudo -n /bin/sh -c '\"'\"'echo BECOME-SUCCESS-" + id + " ; echo ~'\"'\"' '",
		"/bin/sh -c 'sudo -n /bin/sh -c '\"'\"'echo BECOME-SUCCESS-" + id + " ; echo ~'\"'\"'x'",
		"/bin/sh -c 'sudo -n /bin/sh -c echo\\ BECOME-SUCCESS-" + id + "\\ \\;\\ x'",
		"/bin/sh -c 'sudo -n /bin/sh -x '\"'\"'echo BECOME-SUCCESS-" + id + " ; echo ~'\"'\"''",
		"/bin/sh -c 'sudo -n /bin/sh -c'", "/bin/sh -c '/x=y/sudo -n /bin/sh -c '\"'\"'echo BECOME-SUCCESS-" + id + " ; x'\"'\"''", "/bin/sh -c 'sudo -c x'", "/bin/sh -c 'BECOME-SUCCESS-'", "/bin/sh -c ''BECOME-SUCCESS-",
		"/bin/sh -c 'pbrun /bin/sh -c '\"'\"'echo BECOME-SUCCESS-" + id + " ; x'\"'\"''", "/bin/sh -c 'A=b /bin/sh -c x' BECOME-SUCCESS-",
		"/bin/sh -c 'sud\"o\" -n /bin/sh -c '\"'\"'echo BECOME-SUCCESS-" + id + " ; x'\"'\"''", "/bin/sh -c 'sudo $x BECOME-SUCCESS-'",
		"/bin/sh -c 'sudo \"$x\" BECOME-SUCCESS-'", "/bin/sh -c 'sudo \"`x`\" BECOME-SUCCESS-'", "/bin/sh -c 'sudo x\\' BECOME-SUCCESS-",
		"/bin/sh -c 'sudo \"a\\\nb\" BECOME-SUCCESS-'", "/bin/sh -c 'sudo a\\\nb BECOME-SUCCESS-'", "/bin/sh -c 'sudo \"x BECOME-SUCCESS-'",
		"/bin/sh -c 'sudo '\"'\"'x BECOME-SUCCESS-'", "/bin/sh -c 'sudo \\é BECOME-SUCCESS-'", "/bin/sh -c 'sudo \"\\é\" BECOME-SUCCESS-'",
		"/bin/sh -c 'sudo ~ BECOME-SUCCESS-'", "/bin/sh -c 'sudo é BECOME-SUCCESS-'", "/bin/sh -c 'sudo \xff BECOME-SUCCESS-'",
		"/bin/sh -c 'sudo \"\\\"x\\\\\" BECOME-SUCCESS-'", "/bin/sh -c 'sudo \"\\$\" BECOME-SUCCESS-'", "sudo\tBECOME-SUCCESS-",
		"sudo \x01 BECOME-SUCCESS-", "sudo \x7f BECOME-SUCCESS-", "sudo \u2028 BECOME-SUCCESS-", "sudo \u00ad BECOME-SUCCESS-", "BECOME-SUCCESS-",
	}...)
	for _, cmd := range cmds {
		for _, stdin := range []string{"", "secret\n" + pingWrap, "secret"} {
			same(t, sshCall("h", cmd), stdin)
			same(t, sshCall("-tt", "h", cmd), stdin)
		}
	}
}

// TestSameWrappers gives the pipelined module every wrapper of
// interp/ansiballz's tests, and small wrappers of each format with each
// line dropped, doubled, indented or dedented, with its module named
// otherwise where the Go floor reads it from.
func TestSameWrappers(t *testing.T) {
	t.Parallel()
	argv := sshCall("h", sh("/usr/bin/python3"))
	for _, w := range mustWrappers(t) {
		same(t, argv, w)
		same(t, argv, strings.Repeat("# x\n", 16)+w)
		same(t, argv, strings.ReplaceAll(w, "\n", "\r\n"))
		same(t, argv, strings.Replace(w, "module_fqn='ansible.modules.", "module_fqn='ansible.legacy.", 1))
		same(t, argv, strings.Replace(w, "_module_fqn='ansible.modules.", "_module_fqn='ansible.modules.ping", 1))
	}
	const run = "    runpy.run_module(mod_name='ansible.modules.command', init_globals=dict(_module_fqn='ansible.modules.ping', _modlib_path=modlib_path), run_name='__main__', alter_sys=True)\n"
	small := []string{
		"#!/usr/bin/python\n_ANSIBALLZ_WRAPPER = True\ndef _ansiballz_main():\n    ZIPDATA = \"\"\"UEsDBA==\"\"\"\n    ANSIBALLZ_PARAMS = '{\"x\": 1}'\n" + run,
		"#!/usr/bin/python\n_ANSIBALLZ_WRAPPER = True\ndef _ansiballz_main():\n    ZIPDATA = 'UEsDBA=='  \n    ANSIBALLZ_PARAMS = '{}'\n" + run,
		"_ANSIBALLZ_WRAPPER = True\n_ansiballz_main(\nzip_data='UEsDBA==',\nparams='{}',\nmodule_fqn='ansible.modules.ping',\nprofile='legacy',\n" +
			"date_time=datetime.datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc),\n)\n",
	}
	variants := []string{
		"", "_ANSIBALLZ_WRAPPER = True", " _ANSIBALLZ_WRAPPER = True", "    ZIPDATA = \"\"\"abc\"\"\"", "    ZIPDATA = \"\"\"a'bc\"\"\"",
		"    ZIPDATA = \"\"\"abc", "    ZIPDATA = 'abc' x", "    ZIPDATA = 'abc',", "zip_data='abc',  ", "zip_data='abc' ,", "zip_data='a\\bc',",
		"zip_data='abc'", "profile=''", "profile='',", "profile='x',,", "module_fqn='ansible.modules.ping',", "module_fqn='x-y',", "module_fqn='',",
		"module_fqn='ansible.modules.command'", "    _module_fqn='ansible.modules.ping'", "    x(_module_fqn='')", "    x(_module_fqn='a.b", "params='x'",
		"    ANSIBALLZ_PARAMS = 'x", "ANSIBALLZ_PARAMS = 'x'", "date_time=datetime.datetime(1, tzinfo=datetime.timezone.utc),",
		"date_time=datetime.datetime(x, tzinfo=datetime.timezone.utc),", "date_time=datetime.datetime(, tzinfo=datetime.timezone.utc),",
		"date_time=datetime.datetime(", "mod_name='ansible.modules.ping'", "mod_name='ansible.modules.'", "mod_name='ansible.modules.p-ng'",
	}
	for _, w := range small {
		same(t, argv, w)
		lines := strings.SplitAfter(w, "\n")
		for i := range lines {
			edit := func(repl ...string) string {
				return strings.Join(append(append(append([]string(nil), lines[:i]...), repl...), lines[i+1:]...), "")
			}
			same(t, argv, edit())
			same(t, argv, edit(lines[i], lines[i]))
			same(t, argv, edit("    "+lines[i]))
			same(t, argv, edit(strings.TrimLeft(lines[i], " ")))
			same(t, argv, edit(strings.Repeat("\n", 14), lines[i]))
			same(t, argv, edit(strings.Repeat("\n", 15), lines[i]))
			for _, v := range variants {
				same(t, argv, edit(v+"\n"))
			}
		}
	}
}

// TestSameAllRunes quotes every rune (%q) and lowers it (strings.ToLower)
// through both floors: a refused remote command holding them, and an -o
// keyword without a value.
func TestSameAllRunes(t *testing.T) {
	t.Parallel()
	var chunk strings.Builder
	flush := func() {
		s := chunk.String()
		same(t, []string{"ssh", "h", s}, "")
		same(t, []string{"ssh", "-o", "A" + s, "h"}, "")
		chunk.Reset()
	}
	for r := rune(1); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) || r == ' ' || r == '\t' || r == '=' {
			continue
		}
		chunk.WriteRune(r)
		if r%4096 == 0 {
			chunk.WriteString("\xff\xc0\x80\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82") // invalid UTF-8
		}
		if chunk.Len() > 100000 {
			flush()
		}
	}
	flush()
}

// TestSameHostnames gives the command module odd hostnames, which the
// result's JSON must escape as json.Marshal does, in a UTS namespace of
// its own (needs root and python3 for sethostname; skipped otherwise).
func TestSameHostnames(t *testing.T) {
	bin := floorC(t)
	link := filepath.Join(t.TempDir(), "ssh")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("unshare", "--uts", "python3", "-c", "import socket; socket.sethostname('x')").CombinedOutput(); err != nil {
		t.Skipf("no UTS namespace: %v: %s", err, out)
	}
	for _, host := range []string{
		"a<b>&c", "tab\there", "\x01\x1f\x7f", "\b\f\r", "é\u2028x\u2029", "\xff\xfe", "q\"b\\s", "", "x", strings.Repeat("h", 63),
		strings.Repeat("h", 64), "\xe2\x80", "\u00ad\U0001F600", ",:", "\"a\": 1, \\", "a\nb", "\n",
	} {
		argv := []string{link, "h", sh("/usr/bin/python3 /x/AnsiballZ_command.py")}
		c := runCmd(t, exec.Command("unshare", append([]string{"--uts", "python3", "-c",
			`import os, socket, sys; socket.sethostname(os.environb[b"FLOOR_HOST"]); os.execv(sys.argv[1], sys.argv[1:])`}, argv...)...), host)
		e := env{hostname: host, localUser: testUser, pid: c.pid}
		start, ok := c.start(t, time.Local)
		if !ok {
			t.Fatalf("hostname %q: no module times in %q (stderr %q)", host, c.stdout, c.stderr)
		}
		e.now = func() time.Time { return start }
		var stdout, stderr strings.Builder
		goOut := outcome{exit: run(argv, strings.NewReader(""), &stdout, &stderr, e)}
		goOut.stdout, goOut.stderr = stdout.String(), stderr.String()
		if c.outcome != goOut {
			t.Errorf("hostname %q:\n   go: %+v\n    c: %+v", host, goOut, c.outcome)
		}
	}
}

// runCmd runs cmd as runC runs the floor, with FLOOR_HOST=host.
func runCmd(t *testing.T, cmd *exec.Cmd, host string) cRun {
	t.Helper()
	cmd.Env = []string{"USER=" + testUser, "FLOOR_HOST=" + host}
	if tz, ok := os.LookupEnv("TZ"); ok {
		cmd.Env = append(cmd.Env, "TZ="+tz)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r := cRun{before: time.Now()}
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v: %s", cmd.Args, err, stderr.String())
	}
	r.after = time.Now()
	r.pid = cmd.Process.Pid
	r.outcome = outcome{stdout.String(), stderr.String(), 0}
	return r
}
