package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clientCase is a shell script that drives real clients nobody here
// wrote (rsync, git, scp, sftp, ssh) at the lab host "lab". SIDE in it
// is the side's name, so that each side works in remote and local
// directories of its own. REAL_SSH is the real ssh, on both sides, and
// LABPORT the lab sshd's port.
type clientCase struct {
	name, script string
}

var clientCases = []clientCase{
	{"ssh: exit status, stdin, quoting", `
ssh lab 'exit 7'; echo "rc=$?"
printf 'a b\n' | ssh lab 'cat; echo "$0" "x  y"'
ssh lab echo "'two  spaces'" '$HOME' | sed "s|$HOME_REMOTE|REMOTE_HOME|"
ssh -n lab 'cat; echo stdin closed'
ssh lab 'echo err >&2; exit 3'; echo "rc=$?"
`},
	// No stderr with the full stdout: ssh closes the channel once writing
	// stdout failed, and stderr still in flight is lost (its own race).
	{"ssh: a closed or full stdout, closed stdin", `
ssh lab 'echo a; sleep 1; echo b' </dev/null | true; echo "rc=${PIPESTATUS[0]}"
ssh lab 'yes | head -c 50000000' </dev/null | head -c 10; echo; echo "rc=${PIPESTATUS[0]}"
yes | head -c 3000000 | ssh lab 'cat' | head -c 10; echo; echo "rc=${PIPESTATUS[2]}"
ssh lab 'echo x; exit 3' </dev/null >/dev/full; echo "rc=$?"
ssh lab 'echo x; echo y >&2; exit 3' <&-; echo "rc=$?"
ssh lab 'cat; echo x' <&-; echo "rc=$?"
`},
	// The remote command closes its stdin and runs on: sshd says so
	// (eow@openssh.com), and ssh stops reading its own stdin and leaves it
	// open, so the writer blocks and dies of SIGPIPE once ssh exits. The
	// command waits, a bounded loop, for the marker the writer leaves on
	// the target if it gets to its end. First a new master, then over it.
	{"ssh: the remote command closes its stdin", eowScript("ssh") + `
eow; eow
`},
	{"ssh: address family, an empty command, a refused subsystem", `
ssh -6 lab true; echo "rc=$?"
ssh -4 -o HostName=::1 lab true; echo "rc=$?"
ssh -o HostName=127.1 lab 'echo via 127.1'; echo "rc=$?"
ssh -i /nonexistent/id lab 'echo a missing -i'; echo "rc=$?"
ssh -o IdentityFile=/nonexistent/id2 -o ControlPath=$HOME/.ssh/cm-noid lab 'echo a missing IdentityFile'; echo "rc=$?"
ssh -o ControlPath=$HOME/.ssh/cm-noid -O exit lab 2>/dev/null
ssh -o IdentityFile=none -o ControlPath=$HOME/.ssh/cm-idnone lab 'echo IdentityFile none skipped'; echo "rc=$?"
ssh -o ControlPath=$HOME/.ssh/cm-idnone -O exit lab 2>/dev/null
ssh lab '' </dev/null >/dev/null; echo "rc=$?"
ssh -s lab nosuch </dev/null; echo "rc=$?"
ssh lab 'echo still here'
ssh lab $'echo caf\xe9 | od -An -tx1'
LC_BYTES=$'\xff' ssh -o SendEnv=LC_BYTES lab 'echo "$LC_BYTES" | od -An -tx1'
`},
	{"ssh: key policy that only ssh applies", `
ssh -o ControlPath=$HOME/.ssh/cm-pka1 -o PubkeyAcceptedAlgorithms=rsa-sha2-512,rsa-sha2-256 lab 'echo a refused key type'; echo "rc=$?"
ssh -o ControlPath=$HOME/.ssh/cm-pka2 -o PubkeyAcceptedKeyTypes=-ssh-ed25519 lab 'echo a refused key type'; echo "rc=$?"
ssh -o ControlPath=$HOME/.ssh/cm-pka3 -o PubkeyAcceptedAlgorithms=+ssh-ed25519 lab 'echo the default list'; echo "rc=$?"
ssh -o ControlPath=$HOME/.ssh/cm-pka3 -O exit lab 2>/dev/null
`},
	// ssh writes a numeric address as getnameinfo does (127.1 is
	// 127.0.0.1) before %h and %C: one master serves all three.
	{"ssh: numeric addresses, one connection", `
ssh lab 'echo via 127.0.0.1'; echo "rc=$?"
ssh -o HostName=127.1 lab 'echo via 127.1'; echo "rc=$?"
ssh -o HostName=0x7F000001 lab 'echo via 0x7F000001'; echo "rc=$?"
ssh -o HostName=127.1 -O check lab 2>&1 | sed 's/pid=[0-9]*/pid=PID/'
$REAL_SSH -F $SSHCFG -o HostName=2130706433 -O check lab 2>&1 | sed 's/pid=[0-9]*/pid=PID/'
ls $HOME/.ssh | grep -c '^cm-'
`},
	{"ssh: a login shell without a terminal", `
printf 'echo from-shell\nexit 4\n' | ssh lab; echo "rc=$?"
printf 'echo hi\n' | ssh -t lab 'cat'; echo "rc=$?"
`},
	{"ssh -tt: the terminal's modes", `
ssh -tt lab 'echo hi; stty -a' </dev/null; echo "rc=$?"
printf 'hello\nworld\n' | ssh -tt lab 'read a; read b; echo "got $a $b"'; echo "rc=$?"
python3 -c '
import os, pty, subprocess, sys, termios
m, s = pty.openpty()
a = termios.tcgetattr(s)
a[3] &= ~termios.ECHO
termios.tcsetattr(s, termios.TCSANOW, a)
p = subprocess.run(sys.argv[1:], stdin=s, capture_output=True, start_new_session=True)
sys.stdout.buffer.write(p.stdout)
sys.stderr.buffer.write(p.stderr)
print("rc=%d" % p.returncode)
' ssh -F "$SSHCFG" -tt lab 'stty -a'
`},
	{"ssh -tt: escapes from a pipe", `
printf 'one\n~~two\n~?three\n' | ssh -tt lab 'read a; read b; read c; echo "got $a $b $c"'; echo "rc=$?"
printf '~.' | ssh -tt lab 'read a; echo never'; echo "rc=$?"
printf '~.\n' | ssh -e none -tt lab 'read a; echo "got $a"'; echo "rc=$?"
`},
	{"ssh -O", `
ssh -O check lab 2>&1 | sed 's/pid=[0-9]*/pid=N/'; echo "rc=${PIPESTATUS[0]}"
ssh lab true
ssh -O check lab 2>&1 | sed 's/pid=[0-9]*/pid=N/'; echo "rc=${PIPESTATUS[0]}"
ssh -o ControlPath=none -O check lab; echo "rc=$?"
`},
	{"interactive ssh in tmux: escapes, exit status", `
S=abx-SIDE-$(basename $HOME)
pane() { tmux -L $S capture-pane -p -J; }
wait_for() { for i in $(seq 1 400); do pane | grep -q -- "$1" && return 0; sleep 0.05; done; echo "never saw $1:"; pane; return 1; }
tmux -L $S new-session -d -x 120 -y 50 "ssh -F $SSHCFG lab; echo exit=\$? > $PWD/rc; read x"
trap 'tmux -L $S kill-server 2>/dev/null' EXIT
tmux -L $S send-keys 'PS1="P> "; echo $((6*7))' Enter
wait_for '[$>] 42$'
tmux -L $S send-keys Enter '~?'
wait_for 'Note that escapes'
pane | sed -n '/Supported escape sequences/,/Note that escapes/p'
tmux -L $S resize-window -x 100 -y 40 2>/dev/null || tmux -L $S resize-pane -x 100 -y 40
tmux -L $S send-keys Enter 'stty size' Enter
wait_for '40 100$'
tmux -L $S send-keys 'exit 3' Enter
wait_for 'closed\.'
pane | grep 'closed\.'
cat rc
`},
	{"rsync", `
mkdir -p "src/with space/deep" back
for i in $(seq 1 200); do echo "file $i" > "src/with space/f$i"; done
head -c 3000000 /dev/urandom > src/big
rsync -a --delete src/ lab:clients-SIDE/rs/; echo "rc=$?"
rm "src/with space/f7"; echo changed > src/big
touch -d 2021-01-01 src/big "src/with space"
rsync -ai --delete src/ lab:clients-SIDE/rs/ | sort; echo "rc=${PIPESTATUS[0]}"
rsync -a lab:clients-SIDE/rs/ back/; echo "rc=$?"
diff -r src back && echo same
rsync -a lab:clients-SIDE/nonexistent/ back/ 2>&1 | sed 's/\[[a-z]*=[0-9.]*\]/[VERSION]/'; echo "rc=${PIPESTATUS[0]}"
`},
	{"git over ssh", `
ssh lab 'git init -q --bare clients-SIDE/repo.git'
git init -q -b main work && cd work
GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z git -c user.name=t -c user.email=t@e commit -q --allow-empty -m first
git remote add origin lab:clients-SIDE/repo.git
git push -q origin main 2>&1; echo "push rc=$?"
cd .. && git clone -q lab:clients-SIDE/repo.git clone 2>&1; echo "clone rc=$?"
git -C clone log --format=%s
git ls-remote lab:clients-SIDE/repo.git | cut -f2
git ls-remote lab:clients-SIDE/missing.git 2>&1 | sed 's/^fatal: .*/fatal: .../'; echo "rc=${PIPESTATUS[0]}"
`},
	{"scp", `
mkdir -p tree/sub && echo one > tree/sub/a && echo two > f && chmod 640 f && touch -d 2020-01-02 f
ssh lab 'mkdir -p clients-SIDE/scp'
scp f lab:clients-SIDE/scp/; echo "rc=$?"
scp -p f lab:clients-SIDE/scp/p; echo "rc=$?"
scp -r tree lab:clients-SIDE/scp/; echo "rc=$?"
ssh lab 'cd clients-SIDE/scp && ls -lR --time-style=+%Y | cut -c1-10,35-'
mkdir down && scp -r lab:clients-SIDE/scp down/; echo "rc=$?"
scp -p 'lab:clients-SIDE/scp/p' down/p2 && stat -c '%a %Y' down/p2
scp 'lab:/etc/host*' down/; echo "rc=$?"; ls down
scp lab:clients-SIDE/nonexistent down/; echo "rc=$?"
scp lab:/etc/shadow down/; echo "rc=$?"
scp f lab:/nonexistent/dir/; echo "rc=$?"
S=$(type -P scp) # as run by its path, scp names it in its messages
$S -F $SSHCFG lab:clients-SIDE/nonexistent down/ 2>&1 | sed "s|^$S:|ABSOLUTE-SCP:|"; echo "rc=${PIPESTATUS[0]}"
$S -F $SSHCFG -r lab:clients-SIDE/nonexistent down/ 2>&1 | sed "s|^$S:|ABSOLUTE-SCP:|"; echo "rc=${PIPESTATUS[0]}"
`},
	{"scp and sftp onto what is there", `
ssh lab 'mkdir -p clients-SIDE/x && cd clients-SIDE/x && echo old > target && ln -s target link && echo old > h1 && ln h1 h2 &&
  mkdir rodir && echo old > rodir/w && chmod 666 rodir/w && chmod 555 rodir && printf 0123456789ABCDEF > larger && echo rf > rf && chmod 640 rf && mkdir -m 700 priv'
echo NEW > c && chmod 666 c && printf 0123456789 > full && echo old > ltarget && ln -s ltarget llink && echo old > lh1 && ln lh1 lh2
scp c lab:clients-SIDE/x/link; echo "1 rc=$?"
scp c lab:clients-SIDE/x/h1; echo "2 rc=$?"
scp c lab:clients-SIDE/x/rodir/w; echo "3 rc=$?"
scp -p c lab:clients-SIDE/x/pc; echo "4 rc=$?"
scp c lab:clients-SIDE/x/nodir/; echo "5 rc=$?"
scp c c lab:clients-SIDE/x/rf; echo "6 rc=$?"
scp lab:clients-SIDE/x/rf llink; echo "7 rc=$?"
scp lab:clients-SIDE/x/rf lh1; echo "8 rc=$?"
scp lab:clients-SIDE/x/rf/ slash; echo "9 rc=$?"
scp -r lab:clients-SIDE/x/priv privback; echo "10 rc=$?"
scp c lab:clients-SIDE/x/rodir/new; echo "11 rc=$?"
printf -- '-reput full clients-SIDE/x/larger\n-put c clients-SIDE/x/nod2/\nget clients-SIDE/x/rf rf-got\n' | sftp -b - lab; echo "12 rc=$?"
printf 'get clients-SIDE/x/rf\n' | sftp -N -b - lab; echo "13 rc=$?"
stat -c '%n %F %a %h %s' llink ltarget lh1 lh2 rf-got privback; cat ltarget lh2
ssh lab 'cd clients-SIDE/x && stat -c "%n %F %a %h %s" target link h1 h2 rodir/w pc rf larger; cat target h2 rodir/w; chmod 755 rodir'
`},
	{"sftp -b", `
mkdir -p d/sub && echo x > d/sub/y && echo z > z
ssh lab 'mkdir -p clients-SIDE/sftp'
cat > batch <<'B'
cd clients-SIDE/sftp
put z
put -p z zp
put -r d
-put nonexistent
mkdir m
rename z z2
chmod 600 z2
ln -s z2 link
ls
ls -l
lls
pwd
df -h .
get z2 got
get -r d dback
rm z2
-rm nonexistent
help
version
B
sftp -b batch lab 2>&1 | sed -e 's/^ *[0-9.]\{1,\}[KMGTP]\{0,1\}B .*/DF (the numbers change)/' -e 's/[0-9]\{1,\}\(\.[0-9]\)\{0,1\}[KMGT]\{0,1\}  */N /g' -e 's/^ *Size.*/SIZE/' | grep -v '^Remote working\|^sftp> lls\|^batch\|^d$\|^got\|^dback\|^z$' ; echo "rc=${PIPESTATUS[0]}"
sftp -b - lab <<'B'; echo "rc=$?"
cd clients-SIDE/sftp
get zp zp-back
B
cat zp-back
printf 'cd clients-SIDE/sftp\nls -1\n' | sftp -b - lab; echo "rc=$?"
printf 'cd /nonexistent\nls\n' | sftp -b - lab; echo "rc=$?"
`},
	{"paths of ssh's own process", `
# ssh reads these as its own (stdin, its descriptors), the daemon must not.
command ssh -F /dev/stdin lab 'echo config read from stdin' < "$SSHCFG"; echo "rc=$?"
ssh -i /dev/fd/3 -o ControlPath="$HOME/.ssh/cp2-%C" lab 'echo logged in' 3<"$SSHCFG"; echo "rc=$?"
ssh -O exit -o ControlPath="$HOME/.ssh/cp2-%C" lab 2>/dev/null
`},
	{"sftp batch as it comes", `
echo one > f && ssh lab 'mkdir -p clients-SIDE/b'
printf 'put f clients-SIDE/b/stdin\n' | sftp -b /dev/stdin lab; echo "rc=$?"
mkfifo fifo && { printf 'put f clients-SIDE/b/fifo\n' > fifo & }
sftp -b fifo lab; echo "rc=$?"
sftp -b <(printf 'put f clients-SIDE/b/procsub\n') lab; echo "rc=$?"
# A caller that writes the next command once it has read the last one's
# output: sftp runs each as it reads it. (read -t only bounds a failure.)
coproc SF { sftp -b - lab 2>&1; }
pid=$SF_PID in=${SF[1]}
echo 'put f clients-SIDE/b/coproc' >&"$in"
read -t 30 -r line <&"${SF[0]}"; echo "read: $line"
echo 'ls -1 clients-SIDE/b' >&"$in"
exec {in}>&-
cat <&"${SF[0]}"; wait "$pid"; echo "rc=$?"
# Over 512 KiB, from a file and from a pipe: sftp's local commands.
{ for i in $(seq 1 9000); do echo "# padding $i ............................................................"; done
  echo '!echo bang'; echo 'lumask 077'; echo 'get clients-SIDE/b/stdin got'; } > big
(umask 027; sftp -b - lab < big | tail -4; echo "rc=${PIPESTATUS[0]}"; stat -c '%a' got; rm got)
(umask 027; cat big | sftp -b - lab | tail -4; echo "rc=${PIPESTATUS[1]}"; stat -c '%a' got)
`},
}

// eowScript defines eow, which pipes 50 MB into ssh (the function
// named) to a command that reads 100 bytes, closes its stdin and runs on
// until the writer is done, 3 s at most.
func eowScript(ssh string) string {
	return `
eow() {
  { head -c 50000000 /dev/zero && "$REAL_SSH" -F "$SSHCFG" -n -o ControlPath=none lab 'touch clients-SIDE/wrote-all'; } |
    ` + ssh + ` lab 'head -c 100 >/dev/null; exec 0<&-; for i in $(seq 1 30); do [ -e clients-SIDE/wrote-all ] && break; sleep 0.1; done; echo ran on'
  echo "rc=${PIPESTATUS[*]}"
}
`
}

// TestClientsLikeOpenSSH runs each client case with the real OpenSSH
// binaries and through the shims (first on PATH; a private daemon),
// in two setups: the user's ssh_config asks for multiplexing
// (ControlMaster auto, a ControlPath, ControlPersist), which the bridge
// serves, and no Control options, which go to the real binaries. Output,
// exit status and the resulting files must be the same. With
// multiplexing, the muxClientCases also run: the real ssh (REAL_SSH in
// the script) as a client of the master, which the daemon is on the
// shims side.
func TestClientsLikeOpenSSH(t *testing.T) {
	requireLab(t)
	requireBridge(t)
	for _, prog := range []string{"rsync", "git"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("%s not installed (scripts/setup.sh installs it)", prog)
		}
	}
	for _, mux := range []bool{true, false} {
		setup := "multiplexing"
		if !mux {
			setup = "no Control options"
		}
		t.Run(setup, func(t *testing.T) {
			d := newPrivateDaemon(t)
			cases := clientCases
			if mux {
				cases = append(cases[:len(cases):len(cases)], muxClientCases...)
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					var got [2]clientRun
					for i, side := range []string{"openssh", "shims"} {
						got[i] = runClientCase(t, tc, side, mux, d)
					}
					want, shim := got[0], got[1]
					if shim.stdout != want.stdout || shim.stderr != want.stderr {
						t.Errorf("through the shims:\n%s\n--- stderr:\n%s\nwith OpenSSH:\n%s\n--- stderr:\n%s", shim.stdout, shim.stderr, want.stdout, want.stderr)
					}
					if shim.files != want.files {
						t.Errorf("remote files through the shims:\n%s\nwith OpenSSH:\n%s", shim.files, want.files)
					}
				})
			}
			if mux {
				st := d.mustStatus(t)
				if len(st.Targets) == 0 {
					t.Errorf("the daemon served nothing with multiplexing asked for")
				}
			}
		})
	}
}

type clientRun struct{ stdout, stderr, files string }

var sshNoise = regexp.MustCompile(`(?m)^Warning: Permanently added .*\r?\n`)

// runClientCase runs tc's script as side ("openssh" or "shims") in a
// fresh HOME whose ssh_config names the lab, and returns its output with
// the side's own names replaced, and a listing of what it left on the
// target.
func runClientCase(t *testing.T, tc clientCase, side string, mux bool, d *privateDaemon) clientRun {
	t.Helper()
	home, err := os.MkdirTemp(suite.work, "home-")
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(home, "work")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("Host lab\n  HostName 127.0.0.1\n  Port %s\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  BatchMode yes\n",
		suite.lab.Port, suite.lab.User, suite.lab.Key)
	if mux {
		cfg += "  ControlMaster auto\n  ControlPath " + home + "/.ssh/cm-%C\n  ControlPersist 30\n"
	}
	// ssh reads ~/.ssh/config from the passwd entry's home, not $HOME:
	// each client is given this file with -F.
	cfgFile := filepath.Join(home, ".ssh", "config")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	prelude := fmt.Sprintf(`export SSHCFG=%[1]s REAL_SSH=%[2]s LABPORT=%[3]s
ssh() { command ssh -F %[1]s "$@"; }
scp() { command scp -F %[1]s "$@"; }
sftp() { command sftp -F %[1]s "$@"; }
export RSYNC_RSH="ssh -F %[1]s" GIT_SSH_COMMAND="ssh -F %[1]s"
`, cfgFile, suite.realSSH, suite.lab.Port)
	remoteDir := "clients-" + side
	remoteHome := "/home/" + suite.lab.User
	path := suite.basePATH
	if side == "shims" {
		path = suite.shims + string(os.PathListSeparator) + path
	}
	run := func(script string) (string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir = work
		cmd.Env = append(cleanEnv(os.Environ()), append([]string{"HOME=" + home, "PATH=" + path, "LANG=C.UTF-8", "HOME_REMOTE=" + remoteHome}, d.env()...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil && ctx.Err() != nil {
			t.Fatalf("%s: %s timed out; stderr:\n%s", side, tc.name, stderr.String())
		}
		norm := strings.NewReplacer(remoteDir, "clients-SIDE", home, "HOME")
		return norm.Replace(stdout.String()), norm.Replace(sshNoise.ReplaceAllString(stderr.String(), ""))
	}
	// The target's directory, afresh; the real ssh, not the case's.
	clean := exec.Command(suite.realSSH, "-F", "/dev/null", "-i", suite.lab.Key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-p", suite.lab.Port, suite.lab.User+"@127.0.0.1", "rm -rf "+remoteDir+" && mkdir "+remoteDir)
	if out, err := clean.CombinedOutput(); err != nil {
		t.Fatalf("clearing %s on the target: %v\n%s", remoteDir, err, out)
	}
	stdout, stderr := run(prelude + strings.ReplaceAll(tc.script, "SIDE", side))
	// A tmux server the script started, even if it was cut short.
	_ = exec.Command("tmux", "-L", "abx-"+side+"-"+filepath.Base(home), "kill-server").Run()
	// Masters the real ssh left behind, stopped; the daemon's stop with it.
	_, _ = run(prelude + "ssh -O exit lab 2>/dev/null")
	files, _ := run(fmt.Sprintf("cd / && %s -F /dev/null -i %s -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -p %s %s@127.0.0.1 'cd %s && find . -printf \"%%p %%M %%s\\n\" | sort'",
		suite.realSSH, suite.lab.Key, suite.lab.Port, suite.lab.User, remoteDir))
	return clientRun{stdout: stdout, stderr: stderr, files: files}
}
