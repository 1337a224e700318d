package integration

// muxClientCases are client cases in which the real ssh (REAL_SSH) is a
// multiplexing client (PROTOCOL.mux) of the master that the case's first
// `ssh lab true` made: on the openssh side a real `ssh -M` master, on the
// shims side the daemon, which must then serve the real client exactly as
// the real master does: sessions, their exit status and streams, the
// terminal from the passed descriptors, SendEnv and SetEnv, escapes,
// -W, -L/-R/-D forwards and `-O check|forward|cancel|stop|exit`. They run
// only in the multiplexing setup; without a ControlPath there is no
// master to be a client of.
//
// Each script starts with muxHelpers and waits only for conditions, each
// in a bounded loop.
var muxClientCases = withHelpers(muxHelpers, []clientCase{
	{"mux client: sessions", `
ssh lab true; check_master
mssh lab 'echo via-mux; echo to-err >&2; exit 5'; echo "rc=$?"
mssh lab 'echo out; echo err >&2' 2>/dev/null; echo "rc=$?"
mssh lab 'echo out; echo err >&2' >/dev/null; echo "rc=$?"
printf 'a\nb' | mssh lab 'cat; echo; echo after-eof'; echo "rc=$?"
head -c 3000000 /dev/zero | mssh lab 'wc -c'; echo "rc=$?"
mssh -n lab 'cat; echo stdin closed'; echo "rc=$?"
mssh lab 'echo before; kill -9 $$; echo after'; echo "rc=$?"
mssh lab 'kill -TERM $$'; echo "rc=$?"
mssh lab 'exit 255'; echo "rc=$?"
mssh -s lab sftp </dev/null | od -c; echo "rc=${PIPESTATUS[0]}"
python3 -c '
import subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
p.stdin.write(b"\0\0\0\5\1\0\0\0\3"); p.stdin.flush()
d = p.stdout.read(9)
p.stdin.close(); p.stdout.read()
print("sftp: type", d[4], "version", int.from_bytes(d[5:9], "big"), "rc", p.wait())
' "$REAL_SSH" -F "$SSHCFG" -s lab sftp
mssh -s lab no-such-subsystem </dev/null; echo "rc=$?"
check_master
`},
	// The master stops relaying the client's stdin when the remote
	// command closes its own (eow@openssh.com), and closes its copy: the
	// client's is left open, so the writer blocks until the client exits.
	{"mux client: the remote command closes its stdin", eowScript("mssh") + `
ssh lab true; check_master
eow
check_master
`},
	// A client sends the variables its SendEnv names; the master passes on
	// those its own SendEnv names. A client's SetEnv is not sent (a
	// master's would be, but -o SetEnv makes the shim fall back, by design).
	{"mux client: SendEnv and SetEnv", `
export LC_FOO=foo LC_BAR=bar LC_BAZ=baz
ssh lab true; check_master
mssh -o SendEnv=LC_FOO -o SetEnv=LC_QUX=qux lab 'echo "1 ${LC_FOO-unset} ${LC_BAR-unset} ${LC_QUX-unset}"'
ssh -O exit lab 2>&1; gone
ssh -o 'SendEnv=LC_FOO LC_BAR' lab 'echo "2 ${LC_FOO-unset} ${LC_BAR-unset} ${LC_QUX-unset}"'; check_master
mssh lab 'echo "3 ${LC_FOO-unset} ${LC_BAR-unset} ${LC_QUX-unset}"'
mssh -o SendEnv=LC_FOO lab 'echo "4 ${LC_FOO-unset} ${LC_BAR-unset} ${LC_QUX-unset}"'
mssh -o 'SendEnv=LC_*' -o SetEnv=LC_QUX=client lab 'echo "5 ${LC_FOO-unset} ${LC_BAR-unset} ${LC_BAZ-unset} ${LC_QUX-unset}"'
LC_FOO=changed mssh -o 'SendEnv=LC_*' lab 'echo "6 ${LC_FOO-unset}"'
`},
	// The master reads the modes and the size from the descriptor the
	// client passed: none from a pipe, the pty's own from a pty.
	{"mux client: the terminal's modes", `
ssh lab true; check_master
echo hi | mssh -T lab 'stty -a 2>&1; tty'; echo "rc=$?"
echo hi | mssh -tt lab 'stty -a; tty | sed "s/[0-9]*$/N/"'; echo "rc=$?"
printf 'hello\nworld\n' | mssh -tt lab 'read a; read b; echo "got $a $b"'; echo "rc=$?"
TERM=vt100 python3 -c '
import os, pty, subprocess, sys, termios, fcntl, struct
m, s = pty.openpty()
a = termios.tcgetattr(s)
a[3] &= ~termios.ECHO
termios.tcsetattr(s, termios.TCSANOW, a)
fcntl.ioctl(s, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
p = subprocess.run(sys.argv[1:], stdin=s, capture_output=True, start_new_session=True)
sys.stdout.buffer.write(p.stdout)
sys.stderr.buffer.write(p.stderr)
print("rc=%d" % p.returncode)
' "$REAL_SSH" -F "$SSHCFG" -tt lab 'stty -a; echo "TERM=$TERM"'
`},
	// -O stop: the master stops listening but finishes the session it
	// serves, and the next ssh logs in itself. -O exit ends the sessions.
	{"mux client: -O check, stop, exit", `
ssh lab true; check_master
mssh -O check lab 2>&1 | sed 's/pid=[0-9]*/pid=N/'; echo "rc=${PIPESTATUS[0]}"
mkfifo in1 in2
mssh lab 'echo ready; read x; echo "got $x"; exit 4' < in1 > out1 2>&1 & p1=$!
exec 3> in1
wait_file out1 ready
mssh -O stop lab; echo "rc=$?"
gone
mssh -O check lab 2>&1 | sed 's/pid=[0-9]*/pid=N/'; echo "rc=${PIPESTATUS[0]}"
echo hello >&3; exec 3>&-
wait $p1; echo "rc=$?"; cat out1
mssh lab 'echo after stop'; echo "rc=$?"
mssh -O check lab 2>&1 | sed 's/pid=[0-9]*/pid=N/'; echo "rc=${PIPESTATUS[0]}"
mssh -O exit lab; echo "rc=$?"
gone
mssh -O check lab; echo "rc=$?"
ssh lab true; check_master
mssh lab 'echo ready; read x; echo "got $x"' < in2 > out2 2>&1 & p2=$!
exec 4> in2
wait_file out2 ready
mssh -O exit lab; echo "rc=$?"
wait $p2; echo "rc=$?"; exec 4>&-; cat out2
gone
mssh -O check lab; echo "rc=$?"
mssh -O bogus lab; echo "rc=$?"
`},
	// A master whose control socket went (a tmp cleaner) serves no new
	// client: -O check finds nothing, and the next ssh logs in itself, as
	// the user it names, and is the master from then on. A relative
	// ControlPath is the client's directory's.
	{"mux client: a removed control socket, a relative ControlPath", `
F="-o ControlPath=$HOME/.ssh/cm-fixed"
ssh $F lab whoami
rm $HOME/.ssh/cm-fixed
mssh $F -O check lab 2>&1 | sed "s|$HOME|HOME|"; echo "rc=${PIPESTATUS[0]}"
ssh $F -o User=$AB_PWUSER lab whoami; echo "rc=$?"
ssh $F lab whoami
mssh $F -O check lab 2>&1 | sed 's/pid=[0-9]*/pid=N/'
mssh $F -O exit lab 2>&1
mkdir -p rel-a rel-b
(cd rel-a && ssh -o ControlPath=cm-rel lab whoami && ssh -o ControlPath=cm-rel -O check lab 2>&1 | sed 's/pid=[0-9]*/pid=N/')
(cd rel-b && ssh -o ControlPath=cm-rel -o User=$AB_PWUSER lab whoami)
(cd rel-a && ssh -o ControlPath=cm-rel -O exit lab; cd ../rel-b && ssh -o ControlPath=cm-rel -O exit lab) 2>&1
`},
	{"mux client: -W", `
ssh lab true; check_master
mssh -W 127.0.0.1:$LABPORT lab </dev/null | cut -c1-8; echo "rc=${PIPESTATUS[0]}"
mssh -W 127.0.0.1:1 lab </dev/null; echo "rc=$?"
mssh -o ControlPath=none -o "ProxyCommand=$REAL_SSH -F $SSHCFG -W %h:%p lab" lab 'echo through the jump'; echo "rc=$?"
check_master
`},
	// A forward stays in the master after the client that asked for it
	// exits; a second -O forward of the same one is fine, a second cancel
	// fails (and ssh still exits 0). A forward the master cannot bind
	// makes the client log in itself (and fail the same).
	{"mux client: -L, -O forward, -O cancel", `
ssh lab true; check_master
L=$(freeport)
mssh -f -N -L $L:127.0.0.1:$LABPORT lab; echo "rc=$?"
banner $L
mssh -O cancel -L $L:127.0.0.1:$LABPORT lab; echo "rc=$?"
banner $L
mssh -O forward -L $L:127.0.0.1:$LABPORT lab; echo "rc=$?"
mssh -O forward -L $L:127.0.0.1:$LABPORT lab; echo "rc=$?"
banner $L
mssh -O cancel -L $L:127.0.0.1:$LABPORT lab; echo "rc=$?"
mssh -O cancel -L $L:127.0.0.1:$LABPORT lab; echo "rc=$?"
mssh -L $L:127.0.0.1:1 lab 'echo session with a forward'; echo "rc=$?"
banner $L
mssh -o ExitOnForwardFailure=yes -f -N -L 127.0.0.1:$LABPORT:127.0.0.1:1 lab; echo "rc=$?"
check_master
`},
	// -D: a SOCKS5 CONNECT to the lab's sshd, and to a closed port. -R:
	// the target (this machine) connects back through the forward; the
	// port -O forward -R 0 allocates is printed, and it is cancelled as
	// port 0, not as the number it got (OpenSSH's own quirk).
	{"mux client: -D, -R", `
ssh lab true; check_master
D=$(freeport)
mssh -f -N -D $D lab; echo "rc=$?"
banner $D $LABPORT
banner $D 1
mssh -O cancel -D $D lab; echo "rc=$?"
banner $D $LABPORT
R=$(freeport)
mssh -f -N -R $R:127.0.0.1:$LABPORT lab; echo "rc=$?"
mssh lab "$(declare -f banner); banner $R"
mssh -O cancel -R $R:127.0.0.1:$LABPORT lab; echo "rc=$?"
mssh lab "$(declare -f banner); banner $R"
A=$(mssh -O forward -R 0:127.0.0.1:$LABPORT lab); echo "rc=$?"
[ "$A" -gt 0 ] && mssh lab "$(declare -f banner); banner $A"
mssh -O cancel -R $A:127.0.0.1:$LABPORT lab; echo "rc=$?"
mssh -O cancel -R 0:127.0.0.1:$LABPORT lab; echo "rc=$?"
mssh lab "$(declare -f banner); banner $A"
check_master
`},
	// The master handles the client's escapes and writes to the client's
	// stderr (kept in e1, e2): a mux client's own list, ~C ~^Z ~& ~V
	// refused, ~R, ~B, ~~; a resize; the exit status; ~. ends the session
	// with 255. (~# is left out: its channel numbers are the master's.)
	{"mux client: interactive, in tmux", `
S=abx-SIDE-$(basename $HOME)
pane() { tmux -L $S capture-pane -p -J; }
wait_for() { for i in $(seq 1 400); do pane | grep -q -- "$1" && return 0; sleep 0.05; done; echo "never saw $1:"; pane; return 1; }
ssh lab true; check_master
tmux -L $S new-session -d -x 120 -y 50 "$REAL_SSH -F $SSHCFG lab 2>$PWD/e1; echo exit=\$? >> $PWD/rc; $REAL_SSH -F $SSHCFG lab 2>$PWD/e2; echo exit=\$? >> $PWD/rc; read x"
trap 'tmux -L $S kill-server 2>/dev/null' EXIT
tmux -L $S send-keys 'PS1="P> "; echo $((6*7))' Enter
wait_for '^\($ \)\?42$'
tmux -L $S send-keys Enter '~?'
wait_file e1 'Note that escapes'
tmux -L $S send-keys Enter '~C'
wait_file e1 'not available'
tmux -L $S send-keys Enter '~R'
tmux -L $S send-keys Enter '~' C-z
wait_file e1 'Z escape'
tmux -L $S send-keys Enter '~&'
tmux -L $S send-keys Enter '~V'
tmux -L $S send-keys Enter '~B'
tmux -L $S send-keys Enter 'read x; echo "got[$x]"' Enter '~~.' Enter
wait_for 'got\[~\.\]$'
tmux -L $S resize-window -x 100 -y 40 2>/dev/null || tmux -L $S resize-pane -x 100 -y 40
tmux -L $S send-keys Enter 'stty size' Enter
wait_for '40 100$'
tmux -L $S send-keys 'exit 3' Enter
wait_file rc 'exit=3'
tmux -L $S send-keys 'PS1="Q> "; echo $((6*8))' Enter
wait_for '^\($ \)\?48$'
tmux -L $S send-keys Enter '~.'
wait_file rc 'exit=255'
tr -d '\r' < e1; echo ---; tr -d '\r' < e2; cat rc
`},
	// What the remote command sees when its client dies: without a
	// terminal its stdout breaks, with one it gets SIGHUP.
	{"mux client: killed while its command runs", `
wait_remote() { for i in $(seq 1 100); do mssh lab "cat clients-SIDE/$1 2>/dev/null" | grep -q . && return 0; sleep 0.1; done; echo "the remote never wrote $1"; return 1; }
ssh lab true; check_master
for sig in TERM KILL; do
  for tty in -T -tt; do
    m=m-$sig$tty
    "$REAL_SSH" -F "$SSHCFG" $tty lab "trap 'echo HUP >> clients-SIDE/$m; exit' HUP; trap '' PIPE; echo started; while echo tick; do sleep 0.05; done; echo stdout-broke >> clients-SIDE/$m" > out 2> err </dev/null &
    pid=$!
    wait_file out started
    kill -$sig $pid; { wait $pid; } 2>/dev/null; echo "$sig $tty rc=$?"
    wait_remote $m
    mssh lab "cat clients-SIDE/$m"
    tr -d '\r' < err
  done
done
check_master
`},
})

// muxHelpers are the mux cases' shell helpers: mssh, the real ssh (a
// client of the master when there is one); check_master, which says
// whether the master is the side's own (a real ssh with OpenSSH, a
// process the daemon started through the shims, so that a shims run served by a real master
// the real ssh made cannot pass); CP, the ControlPath, and gone,
// which waits until the master has removed it; wait_file FILE TEXT;
// freeport, a local port free a moment ago; and banner PORT [SOCKS-PORT],
// which prints the first 8 bytes a connection to 127.0.0.1:PORT (through
// SOCKS5 to 127.0.0.1:SOCKS-PORT if given) reads.
const muxHelpers = `
mssh() { command "$REAL_SSH" -F "$SSHCFG" "$@"; }
CP=$(mssh -G lab 2>/dev/null | sed -n 's/^controlpath //p')
check_master() {
  pid=$(mssh -O check lab 2>&1 | sed -n 's/^Master running (pid=\([0-9]*\)).*/\1/p')
  if [ -z "$pid" ]; then who=none
  elif ss -xlpn | grep -F "$ANSIBLE_BRIDGE_SOCKET " | grep -q "pid=$(ps -o ppid= -p $pid | tr -d ' '),"; then who=the-daemon
  else who=an-ssh; fi
  case SIDE:$who in openssh:an-ssh|shims:the-daemon) echo "master: the side's own";; *) echo "master: $who";; esac
}
gone() { for i in $(seq 1 200); do [ -e "$CP" ] || return 0; sleep 0.05; done; echo "the master left its socket"; }
wait_file() { for i in $(seq 1 400); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done; echo "never saw $2 in $1"; return 1; }
freeport() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
banner() { python3 -c '
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    if len(sys.argv) > 2:
        s.sendall(b"\x05\x01\x00")
        assert s.recv(2) == b"\x05\x00"
        s.sendall(b"\x05\x01\x00\x01\x7f\x00\x00\x01" + int(sys.argv[2]).to_bytes(2, "big"))
        r = s.recv(10)
        print("socks reply", r[1] if r else "none")
except OSError as e:
    print("connect:", e.strerror); sys.exit(1)
print(s.recv(8).decode() or "closed")
' "$@"; }
`

// withHelpers returns cases with helpers put before each script.
func withHelpers(helpers string, cases []clientCase) []clientCase {
	out := make([]clientCase, len(cases))
	for i, tc := range cases {
		out[i] = clientCase{tc.name, helpers + tc.script}
	}
	return out
}
