#!/usr/bin/env bash
# lab.sh — a loopback SSH lab for ansible-bridge's integration tests.
#
#     scripts/lab.sh up      # create users and keys, start sshd, verify
#     scripts/lab.sh env     # print shell exports for the tests
#     scripts/lab.sh status  # is the lab's sshd running?
#     scripts/lab.sh down    # stop the lab's sshd, remove the no-Python chroot
#     scripts/lab.sh purge   # down, then remove the users, their homes, the
#                            # sudoers file and $AB_LAB
#
#     eval "$(scripts/lab.sh env)" && go test ./integration/
#
# Must run as root (it creates users and a sudoers.d file). Settings:
#
#     AB_LAB        state directory            (default /tmp/ab-lab)
#     AB_PORT       sshd port on 127.0.0.1     (default 2222)
#     AB_NOPY_ROOT  chroot of user abnopy      (default /srv/ab-lab-nopy-$AB_PORT;
#                   sshd wants every component root-owned and not group- or
#                   world-writable, so it cannot live under /tmp)
#
# For tests of lab.sh itself (integration/newcomer), so that they cannot
# touch the users and sudo configuration the real lab uses:
#
#     AB_USER_PREFIX  the users are PREFIXtest, PREFIXpw, PREFIXnopy and the
#                     sudoers file /etc/sudoers.d/PREFIX-lab (default ab)
#     AB_SUDOERS      the sudoers file `up` checks, includes and all, before
#                     it changes anything (default /etc/sudoers)
#
# What `up` sets up (idempotently):
#
#   - user abtest, shell /bin/sh, empty home (no rc files), passwordless
#     sudo. Never use root as the target user: its rc files and privileges
#     are atypical.
#   - user abpw, shell /bin/sh, password $AB_PASSWORD; its sudo REQUIRES
#     that password (timestamp_timeout=0, so every sudo asks again).
#   - user abnopy, shell /bin/sh, key login only, no sudo: a target without
#     Python. sshd chroots it (Match User + ChrootDirectory) into
#     $AB_NOPY_ROOT, which holds dash as /bin/sh, the few tools Ansible's
#     shell commands use (mkdir, chmod, rm, sleep, cat, dd, uname, env,
#     hostname, id, ls), sftp-server, the libraries they need, /dev/null,
#     /etc/passwd and /etc/group, and a home directory. No python.
#   - the target zoo: users abzbash, abzdash, abzbusybox, abztcsh and
#     abzfish with those login shells (where installed), key login only;
#     pyenv's Pythons ($AB_PYENV_VERSIONS) bind-mounted read-only on
#     /srv/ab-lab-pythons-$AB_PORT, with a wrapper per version in
#     /srv/ab-lab-pythons-$AB_PORT-bin ($AB_PYTHONS); a noexec tmpfs on
#     /srv/ab-lab-noexec-$AB_PORT; and a user per situation ($AB_ZOO_CASES),
#     shell /bin/bash, key login only: abzrtty, whose passwordless sudo
#     has requiretty; abzms (passwordless sudo), whose sessions sshd caps
#     at MaxSessions 2 (a Match block); abzboot, for a simulated reboot (the play kills its
#     sshd processes).
#   - user abznosftp, shell /bin/bash, key login only, whose ~/.bashrc prints
#     before its interactive check: its sftp subsystem is broken ("Received
#     message too long"), as on many a real target ($AB_NOSFTPUSER).
#   - user abznopty, shell /bin/bash, key login only, passwordless sudo:
#     sshd refuses it a terminal (PermitTTY no, a Match block), as a key
#     with no-pty or restrict.
#   - /etc/sudoers.d/ab-lab with the two rules and !requiretty, and
#     abzrtty's rule with requiretty, abzms's and abznopty's without.
#   - $AB_LAB/id_ed25519: the lab key, authorized for both users;
#     $AB_LAB/wrong_ed25519: a key authorized for no one (auth failures).
#     Both belong to the invoking user ($SUDO_USER or root), mode 0600.
#   - its own sshd (-D, own config, host key and pid file in $AB_LAB) on
#     127.0.0.1:$AB_PORT with password, keyboard-interactive and PAM enabled
#     and MaxSessions at its default of 10. Readiness is checked by reading
#     the SSH banner, not by sleeping. Where it can, it runs in a cgroup of
#     its own ($AB_TARGET_CGROUP), with every process of its sessions, so
#     that the bench can read what the targets' side cost in CPU.
#
# `up` ends by checking the lab with the real ssh: key login and sudo -n for
# abtest, a refused sudo -n and an accepted sudo password for abpw, password
# login for abpw, a refused login with the wrong key, and a key login for
# abnopy that finds a shell but no python.
#
# `down` stops sshd, removes $AB_NOPY_ROOT and unmounts the zoo's mounts;
# the users stay.
set -euo pipefail

LAB=${AB_LAB:-/tmp/ab-lab}
PORT=${AB_PORT:-2222}
PREFIX=${AB_USER_PREFIX:-ab}
[[ $PREFIX =~ ^[a-z][a-z0-9]{0,15}$ ]] || { echo "lab.sh: AB_USER_PREFIX=$PREFIX: want a lower-case name of at most 16 characters" >&2; exit 1; }
USER_NOPW=${PREFIX}test
USER_PW=${PREFIX}pw
USER_NOPY=${PREFIX}nopy
# A login sshd refuses a terminal (PermitTTY no in a Match block), with
# passwordless sudo: what ssh -tt does then (integration TestNoPTYLikeOpenSSH).
USER_NOPTY=${PREFIX}znopty
# The target zoo (integration/zoo_test.go): a user per login shell, key
# login only. BusyBox's sh is a symlink named sh (busybox picks its applet
# from the name).
ZOO_SHELLS=(bash:/bin/bash dash:/bin/dash busybox:/usr/local/libexec/ab-lab/sh tcsh:/usr/bin/tcsh fish:/usr/bin/fish)
# And a user per situation: NAME:USER.
ZOO_CASES=(requiretty:${PREFIX}zrtty maxsessions:${PREFIX}zms reboot:${PREFIX}zboot)
# A user whose sftp subsystem its ~/.bashrc breaks (integration/nosftp_test.go);
# not a zoo case: every command's output starts with the line it prints.
USER_NOSFTP=${PREFIX}znosftp
# pyenv's Pythons, where the machine has them, readable by the lab's users
# through a read-only bind mount (/root is 0700).
PYENV_VERSIONS=${AB_PYENV_VERSIONS:-/root/.pyenv/versions}
# Not from AB_PYTHONS: that is what `env` prints, the wrappers' directory.
PYTHONS=/srv/ab-lab-pythons-$PORT
# A tmpfs mounted noexec, for a remote tmp where nothing can be executed.
NOEXEC=/srv/ab-lab-noexec-$PORT
SUDOERS_MAIN=${AB_SUDOERS:-/etc/sudoers}
NOPY_ROOT=${AB_NOPY_ROOT:-/srv/ab-lab-nopy-$PORT}
# What abnopy's chroot holds besides /bin/sh: what Ansible's shell
# commands run (temp dirs, transfers, discovery, cleanup) and what the
# tests call, then sftp-server for the sftp and scp transfer methods.
NOPY_TOOLS=(mkdir chmod rm sleep cat dd uname env hostname id ls)
SFTP_SERVER=/usr/lib/openssh/sftp-server
PASSWORD=abpw-Secret-123
SUDOERS=/etc/sudoers.d/$PREFIX-lab
SSHD=/usr/sbin/sshd

die() {
	echo "lab.sh: $*" >&2
	exit 1
}

log() {
	echo "lab.sh: $*" >&2
}

need_root() {
	[[ $(id -u) -eq 0 ]] || die "must run as root (creates users, sudoers.d, sshd)"
}

# owner prints the user that should own the lab keys: whoever invoked us,
# through sudo or not.
owner() {
	if [[ -n ${SUDO_USER:-} ]] && id -u "$SUDO_USER" >/dev/null 2>&1; then
		echo "$SUDO_USER"
	else
		id -un
	fi
}

# port_open succeeds when anything accepts a connection on 127.0.0.1:$PORT.
port_open() {
	(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null
}

# banner_ok succeeds when an SSH server answers on 127.0.0.1:$PORT.
banner_ok() {
	# A subshell, so that a refused connection cannot end this script.
	(
		exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
		IFS= read -r -t 2 line <&3 || exit 1
		[[ $line == SSH-2.0-* ]]
	) 2>/dev/null
}

# sshd_pid prints the pid of the lab's sshd if it is running.
sshd_pid() {
	local pid
	[[ -s $LAB/sshd.pid ]] || return 1
	pid=$(<"$LAB/sshd.pid")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[[ -r /proc/$pid/cmdline ]] || return 1
	# Only our sshd: its command line names our config file.
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "-f $LAB/sshd_config" || return 1
	echo "$pid"
}

keygen() { # path comment
	local key=$1 comment=$2
	if [[ ! -s $key || ! -s $key.pub ]]; then
		rm -f "$key" "$key.pub"
		ssh-keygen -q -t ed25519 -N '' -C "$comment" -f "$key"
	fi
}

make_user() { # name [login shell]
	local u=$1 sh=${2:-/bin/sh}
	if ! id -u "$u" >/dev/null 2>&1; then
		# An empty skeleton: no .bashrc/.profile in the home directory.
		install -d -m 0755 "$LAB/skel"
		useradd --create-home --skel "$LAB/skel" --shell "$sh" --user-group "$u"
		log "created user $u"
	fi
	[[ $(getent passwd "$u" | cut -d: -f7) == "$sh" ]] || usermod --shell "$sh" "$u"
	local home
	home=$(getent passwd "$u" | cut -d: -f6)
	install -d -m 0700 -o "$u" -g "$u" "$home/.ssh"
	local ak=$home/.ssh/authorized_keys pub
	pub=$(<"$LAB/id_ed25519.pub")
	# Append, so that labs in several AB_LAB directories can coexist.
	if ! grep -qxF -- "$pub" "$ak" 2>/dev/null; then
		echo "$pub" >>"$ak"
	fi
	chown "$u:$u" "$ak"
	chmod 0600 "$ak"
}

# check_sudoers fails, naming the file and the reason, when sudo's
# configuration ($SUDOERS_MAIN and what it includes) does not parse.
# visudo -c also rejects files of mode 0644, which sudo itself accepts:
# those are reported, not fatal.
check_sudoers() {
	local out bad
	if out=$(visudo -c -f "$SUDOERS_MAIN" 2>&1); then
		return 0
	fi
	if grep -v -e 'bad permissions' -e 'parsed OK' <<<"$out" | grep -q .; then
		bad=$(grep -oE '(/[^ :]+)(:[0-9]+)*: syntax error|parse error in [^ ]+' <<<"$out" |
			sed -E 's/^parse error in //; s/(:[0-9]+)*: syntax error$//' | sort -u | tr '\n' ' ')
		die "sudo's configuration does not parse${bad:+ (${bad% })}; fix or remove that file, then rerun. visudo -c -f $SUDOERS_MAIN says:"$'\n'"$out"
	fi
	log "note: visudo -c complains about file modes that sudo accepts:"$'\n'"$out"
}

write_sudoers() {
	local tmp
	tmp=$(mktemp)
	cat >"$tmp" <<EOF
# ansible-bridge loopback lab (scripts/lab.sh). Safe to delete.
Defaults:$USER_NOPW !requiretty
Defaults:$USER_PW !requiretty, timestamp_timeout=0
$USER_NOPW ALL=(ALL:ALL) NOPASSWD: ALL
$USER_PW ALL=(ALL:ALL) ALL
# The zoo's requiretty and MaxSessions cases.
Defaults:${PREFIX}zrtty requiretty
${PREFIX}zrtty ALL=(ALL:ALL) NOPASSWD: ALL
Defaults:${PREFIX}zms !requiretty
${PREFIX}zms ALL=(ALL:ALL) NOPASSWD: ALL
Defaults:$USER_NOPTY !requiretty
$USER_NOPTY ALL=(ALL:ALL) NOPASSWD: ALL
EOF
	visudo -q -c -f "$tmp" >/dev/null || die "generated sudoers file is invalid"
	install -m 0440 -o root -g root "$tmp" "$SUDOERS"
	rm -f "$tmp"
	check_sudoers
}

# preflight checks everything `up` can check before it changes anything:
# tools, sudo's configuration, the chroot path, and that the port is free
# unless this lab's own sshd holds it.
preflight() {
	local tool
	command -v "$SSHD" >/dev/null || die "$SSHD missing: run scripts/setup.sh"
	command -v visudo >/dev/null || die "visudo missing: run scripts/setup.sh (package sudo)"
	[[ -x $SFTP_SERVER ]] || die "$SFTP_SERVER missing: run scripts/setup.sh"
	for tool in "${NOPY_TOOLS[@]}" ssh ssh-keygen sshpass useradd chpasswd; do
		command -v "$tool" >/dev/null || die "$tool not found: run scripts/setup.sh"
	done
	check_sudoers
	# Ansible's stock behaviour with a tty-less sudo is what the corpus
	# records; a global requiretty would change it.
	if grep -rqsE '^[[:space:]]*Defaults([[:space:]]|,)(.*[^!])?requiretty' /etc/sudoers /etc/sudoers.d/; then
		die "'Defaults requiretty' is set in /etc/sudoers or /etc/sudoers.d; remove it"
	fi
	case $NOPY_ROOT in
	/tmp/* | /var/tmp/* | /dev/shm/*) die "AB_NOPY_ROOT=$NOPY_ROOT: sshd refuses a chroot under a world-writable directory" ;;
	/*) ;;
	*) die "AB_NOPY_ROOT=$NOPY_ROOT is not absolute" ;;
	esac
	if ! sshd_pid >/dev/null && port_open; then
		die "127.0.0.1:$PORT is taken by another server; set AB_PORT to a free port (e.g. sudo AB_PORT=2299 make demo)"
	fi
}

write_sshd_config() { # path
	cat >"$1" <<EOF
# ansible-bridge loopback lab (scripts/lab.sh). Generated; do not edit.
Port $PORT
ListenAddress 127.0.0.1
HostKey $LAB/ssh_host_ed25519_key
PidFile $LAB/sshd.pid
AllowUsers $USER_NOPW $USER_PW $USER_NOPY ${PREFIX}z*
PermitRootLogin no
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication yes
KbdInteractiveAuthentication yes
UsePAM yes
# The OpenSSH default, stated because the bridge multiplexes sessions on one
# connection and must live within it.
MaxSessions 10
# The bench's fleet scenario logs in to 50 targets at once (all this sshd);
# the default 10:30:100 would drop some of the stock runs' logins.
MaxStartups 100
# As in Debian's stock /etc/ssh/sshd_config.
AcceptEnv LANG LC_*
PrintMotd no
X11Forwarding no
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel VERBOSE
# A target without Python: abnopy lives in a chroot that has none.
Match User $USER_NOPY
	ChrootDirectory $NOPY_ROOT
# The zoo's MaxSessions case.
Match User ${PREFIX}zms
	MaxSessions 2
# A login that gets no terminal.
Match User $USER_NOPTY
	PermitTTY no
EOF
}

# chroot_copy copies programs and the shared libraries they load (ldd's
# list, the dynamic loader included) into the chroot at their own paths.
# Files already there and equal are left alone (install -C), so that a
# rerun of `up` does not rewrite a program a session is running.
chroot_copy() { # file...
	local f lib
	for f in "$@"; do
		install -C -D -m 0755 "$f" "$NOPY_ROOT$f"
		for lib in $(ldd "$f" | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
			install -C -D -m 0755 "$lib" "$NOPY_ROOT$lib"
		done
	done
}

# make_nopy_root builds (or refreshes) abnopy's chroot. Every directory
# sshd walks to it is root-owned and 0755; only the home belongs to abnopy.
make_nopy_root() {
	local d tool path
	case $NOPY_ROOT in
	/tmp/* | /var/tmp/* | /dev/shm/*) die "AB_NOPY_ROOT=$NOPY_ROOT: sshd refuses a chroot under a world-writable directory" ;;
	/*) ;;
	*) die "AB_NOPY_ROOT=$NOPY_ROOT is not absolute" ;;
	esac
	install -d -m 0755 -o root -g root "$NOPY_ROOT"
	# Debian's merged /usr, so that /bin/sh and /lib64/ld-linux-*.so.2 are
	# where the programs look for them.
	for d in bin lib lib64 sbin; do
		install -d -m 0755 -o root -g root "$NOPY_ROOT/usr/$d"
		[[ -L $NOPY_ROOT/$d ]] || ln -s "usr/$d" "$NOPY_ROOT/$d"
	done
	install -d -m 0755 -o root -g root "$NOPY_ROOT/etc" "$NOPY_ROOT/dev" "$NOPY_ROOT/home"
	install -d -m 1777 -o root -g root "$NOPY_ROOT/tmp"
	chroot_copy "$(readlink -f /bin/sh)"
	ln -sfn "$(basename "$(readlink -f /bin/sh)")" "$NOPY_ROOT/usr/bin/sh"
	for tool in "${NOPY_TOOLS[@]}"; do
		path=$(command -v "$tool") || die "$tool not found"
		chroot_copy "$(readlink -f "$path")"
		[[ $(readlink -f "$path") == /usr/bin/$tool ]] ||
			ln -sfn "$(readlink -f "$path")" "$NOPY_ROOT/usr/bin/$tool"
	done
	[[ -x $SFTP_SERVER ]] || die "$SFTP_SERVER missing: run scripts/setup.sh"
	chroot_copy "$SFTP_SERVER"
	if [[ ! -c $NOPY_ROOT/dev/null ]]; then
		rm -f "$NOPY_ROOT/dev/null"
		mknod -m 0666 "$NOPY_ROOT/dev/null" c 1 3
	fi
	getent passwd root "$USER_NOPY" >"$NOPY_ROOT/etc/passwd"
	getent group root "$USER_NOPY" >"$NOPY_ROOT/etc/group"
	chmod 0644 "$NOPY_ROOT/etc/passwd" "$NOPY_ROOT/etc/group"
	local home
	home=$(getent passwd "$USER_NOPY" | cut -d: -f6)
	install -d -m 0755 -o "$USER_NOPY" -g "$USER_NOPY" "$NOPY_ROOT$home"
	if find "$NOPY_ROOT" -name 'python*' | grep -q .; then
		die "$NOPY_ROOT holds a python"
	fi
}

# sshd_cgroup is the cgroup the lab's sshd runs in, and with it every
# process of its sessions (interpreters, modules): the bench reads the
# targets' CPU from it. cgroup v2's unified tree, or v1's cpuacct.
sshd_cgroup() {
	if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
		echo "/sys/fs/cgroup/ab-lab-$PORT"
	elif [[ -d /sys/fs/cgroup/cpuacct ]]; then
		echo "/sys/fs/cgroup/cpuacct/ab-lab-$PORT"
	else
		return 1
	fi
}

# count_sshd moves the lab's sshd into sshd_cgroup where that can be done
# (not in every container); without it the bench reports no target CPU.
count_sshd() {
	local cg pid
	cg=$(sshd_cgroup) || return 0
	pid=$(sshd_pid) || return 0
	if mkdir -p "$cg" 2>/dev/null && echo "$pid" >"$cg/cgroup.procs" 2>/dev/null; then
		log "sshd's CPU, and its sessions', counted in $cg"
	else
		log "no cgroup for sshd here: the bench reports no target CPU"
	fi
}

# target_cgroup prints sshd_cgroup if it exists (for env).
target_cgroup() {
	local cg
	if cg=$(sshd_cgroup) && [[ -d $cg ]]; then
		echo "$cg"
	fi
}

up() {
	need_root
	# Everything that can fail is checked before anything changes.
	preflight
	install -d -m 0755 "$LAB"
	local who
	who=$(owner)

	keygen "$LAB/id_ed25519" ab-lab
	keygen "$LAB/wrong_ed25519" ab-lab-wrong
	chown "$who" "$LAB/id_ed25519" "$LAB/id_ed25519.pub" "$LAB/wrong_ed25519" "$LAB/wrong_ed25519.pub"
	chmod 0600 "$LAB/id_ed25519" "$LAB/wrong_ed25519"
	if [[ ! -s $LAB/ssh_host_ed25519_key ]]; then
		rm -f "$LAB/ssh_host_ed25519_key" "$LAB/ssh_host_ed25519_key.pub"
		ssh-keygen -q -t ed25519 -N '' -C ab-lab-host -f "$LAB/ssh_host_ed25519_key"
	fi
	chmod 0600 "$LAB/ssh_host_ed25519_key"

	make_user "$USER_NOPW"
	make_user "$USER_PW"
	make_user "$USER_NOPY"
	# abtest logs in by key only: '*' is "no password" without the "locked"
	# '!' that some PAM/sshd combinations refuse even for keys.
	usermod -p '*' "$USER_NOPW"
	usermod -p '*' "$USER_NOPY"
	make_user "$USER_NOPTY" /bin/bash
	usermod -p '*' "$USER_NOPTY"
	make_nopy_root
	make_zoo
	echo "$USER_PW:$PASSWORD" | chpasswd
	write_sudoers

	write_sshd_config "$LAB/sshd_config.new"
	install -d -m 0755 /run/sshd
	"$SSHD" -t -f "$LAB/sshd_config.new" || die "sshd rejects $LAB/sshd_config.new"
	local maxs
	maxs=$("$SSHD" -T -f "$LAB/sshd_config.new" -C user=$USER_NOPW,host=localhost,addr=127.0.0.1 |
		awk '$1 == "maxsessions" {print $2}')
	[[ $maxs == 10 ]] || die "sshd MaxSessions is ${maxs:-unset}, want the default 10"

	local pid
	if pid=$(sshd_pid) && cmp -s "$LAB/sshd_config.new" "$LAB/sshd_config"; then
		rm -f "$LAB/sshd_config.new"
		log "sshd already running (pid $pid)"
	else
		if [[ -n ${pid:-} ]]; then
			lock_lab
			stop_sshd
			unlock_lab
		fi
		mv "$LAB/sshd_config.new" "$LAB/sshd_config"
		if port_open; then
			die "127.0.0.1:$PORT is taken by another server; set AB_PORT to a free port"
		fi
		rm -f "$LAB/sshd.pid"
		# -D: no daemonizing, so the pid is ours; setsid+nohup detach it
		# from this shell and terminal.
		setsid nohup "$SSHD" -D -f "$LAB/sshd_config" -E "$LAB/sshd.log" \
			</dev/null >>"$LAB/sshd.out" 2>&1 &
	fi
	local i
	for ((i = 0; i < 100; i++)); do
		if banner_ok && sshd_pid >/dev/null; then
			break
		fi
		sleep 0.1
	done
	banner_ok || die "sshd did not come up on 127.0.0.1:$PORT (see $LAB/sshd.log)"
	sshd_pid >/dev/null || die "sshd answers on $PORT but $LAB/sshd.pid is not ours"
	log "sshd listening on 127.0.0.1:$PORT (pid $(sshd_pid))"
	count_sshd
	verify
}

# make_zoo makes a user for each login shell the machine has (the others
# are left out, and the zoo test skips them) and mounts pyenv's Pythons.
make_zoo() {
	if [[ -x /bin/busybox ]]; then
		install -d -m 0755 /usr/local/libexec/ab-lab
		ln -sfn /bin/busybox /usr/local/libexec/ab-lab/sh
	fi
	local z name sh
	for z in "${ZOO_SHELLS[@]}"; do
		name=${z%%:*} sh=${z#*:}
		[[ -x $sh ]] || continue
		make_user "${PREFIX}z$name" "$sh"
		usermod -p '*' "${PREFIX}z$name"
	done
	for z in "${ZOO_CASES[@]}"; do
		make_user "${z#*:}" /bin/bash
		usermod -p '*' "${z#*:}"
	done
	make_user "$USER_NOSFTP" /bin/bash
	usermod -p '*' "$USER_NOSFTP"
	local home
	home=$(getent passwd "$USER_NOSFTP" | cut -d: -f6)
	# shellcheck disable=SC2016 # expanded by the user's bash
	printf '%s\n' 'echo "Welcome to $(hostname)"' 'case $- in *i*) ;; *) return ;; esac' >"$home/.bashrc"
	chown "$USER_NOSFTP:$USER_NOSFTP" "$home/.bashrc"
	if [[ -d $PYENV_VERSIONS ]] && ! mountpoint -q "$PYTHONS"; then
		install -d -m 0755 "$PYTHONS"
		mount --bind "$PYENV_VERSIONS" "$PYTHONS"
		mount -o remount,bind,ro "$PYTHONS"
		log "mounted $PYENV_VERSIONS read-only on $PYTHONS"
	fi
	# pyenv's Pythons find libpython by their build path, under /root: a
	# wrapper per version names the mounted copy instead.
	if mountpoint -q "$PYTHONS"; then
		local v py
		install -d -m 0755 "$PYTHONS-bin"
		for v in "$PYTHONS"/*/; do
			v=${v%/}
			py=$(find "$v/bin" -maxdepth 1 -regex '.*/python[23]\.[0-9]+' | sort | head -n 1)
			[[ -n $py ]] || continue
			printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' "$v" "$py" >"$PYTHONS-bin/${py##*/}.new"
			chmod 0755 "$PYTHONS-bin/${py##*/}.new"
			mv "$PYTHONS-bin/${py##*/}.new" "$PYTHONS-bin/${py##*/}"
		done
	fi
	if ! mountpoint -q "$NOEXEC"; then
		install -d -m 0755 "$NOEXEC"
		mount -t tmpfs -o noexec,nosuid,nodev,mode=1777,size=64m ab-lab-noexec "$NOEXEC"
		log "mounted a noexec tmpfs on $NOEXEC"
	fi
}

# zoo_users lists the zoo's users as NAME=USER, for the tests.
zoo_users() {
	local z name out=()
	for z in "${ZOO_SHELLS[@]}"; do
		name=${z%%:*}
		id -u "${PREFIX}z$name" >/dev/null 2>&1 && out+=("$name=${PREFIX}z$name")
	done
	echo "${out[*]}"
}

# zoo_cases lists the zoo's situation users as NAME=USER, for the tests.
zoo_cases() {
	local z out=()
	for z in "${ZOO_CASES[@]}"; do
		id -u "${z#*:}" >/dev/null 2>&1 && out+=("${z%%:*}=${z#*:}")
	done
	echo "${out[*]}"
}

# lab_ssh runs the real ssh against the lab with no user config.
lab_ssh() {
	ssh -F none -o BatchMode=yes -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=10 \
		-p "$PORT" "$@"
}

verify() {
	lab_ssh -i "$LAB/id_ed25519" -o IdentitiesOnly=yes "$USER_NOPW@127.0.0.1" 'sudo -n true' ||
		die "verify: abtest key login + sudo -n failed"
	if lab_ssh -i "$LAB/id_ed25519" -o IdentitiesOnly=yes "$USER_PW@127.0.0.1" 'sudo -n true' 2>/dev/null; then
		die "verify: abpw's sudo works without a password"
	fi
	lab_ssh -i "$LAB/id_ed25519" -o IdentitiesOnly=yes "$USER_PW@127.0.0.1" \
		"echo '$PASSWORD' | sudo -S -p '' true" ||
		die "verify: abpw's sudo with its password failed"
	SSHPASS=$PASSWORD sshpass -e ssh -F none -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o PubkeyAuthentication=no \
		-o PreferredAuthentications=password,keyboard-interactive \
		-p "$PORT" "$USER_PW@127.0.0.1" true ||
		die "verify: abpw password login failed"
	if lab_ssh -i "$LAB/wrong_ed25519" -o IdentitiesOnly=yes "$USER_NOPW@127.0.0.1" true 2>/dev/null; then
		die "verify: the wrong key was accepted"
	fi
	lab_ssh -i "$LAB/id_ed25519" -o IdentitiesOnly=yes "$USER_NOPTY@127.0.0.1" 'sudo -n true' ||
		die "verify: $USER_NOPTY key login + sudo -n failed"
	# ssh -tt without a master: a refused terminal is fatal.
	if lab_ssh -tt -i "$LAB/id_ed25519" -o IdentitiesOnly=yes "$USER_NOPTY@127.0.0.1" true </dev/null 2>/dev/null; then
		die "verify: sshd gave $USER_NOPTY a terminal"
	fi
	local nopy nopy_home
	nopy_home=$(getent passwd "$USER_NOPY" | cut -d: -f6)
	# shellcheck disable=SC2016 # expanded by the remote shell
	nopy=$(lab_ssh -i "$LAB/id_ed25519" -o IdentitiesOnly=yes "$USER_NOPY@127.0.0.1" \
		'echo "shell ok in $(pwd)"; command -v python3 python python2 || echo "no python"') ||
		die "verify: abnopy key login into $NOPY_ROOT failed (see $LAB/sshd.log)"
	[[ $nopy == "shell ok in $nopy_home"$'\n'"no python" ]] ||
		die "verify: abnopy's login is not a shell without python: $nopy"
	log "verified: keys, passwords and sudo behave as the tests expect"
}

# lock_lab waits for any integration run to finish: never pull sshd or the
# chroot from under a running suite, which holds this lock for its whole run
# (see integration/main_test.go). The lock is released by unlock_lab.
lock_lab() {
	[[ -d $LAB ]] || return 0
	exec 9>>"$LAB/integration.lock"
	if ! flock -n 9; then
		log "waiting for the integration run holding $LAB/integration.lock"
		flock 9
	fi
}

unlock_lab() {
	exec 9>&- # nothing started later may inherit the lock
}

# stop_sshd stops the lab's sshd, if it runs; the caller holds the lock.
stop_sshd() {
	local pid i
	if ! pid=$(sshd_pid); then
		log "sshd not running"
		return 0
	fi
	kill "$pid"
	for ((i = 0; i < 100; i++)); do
		[[ -e /proc/$pid ]] || break
		sleep 0.1
	done
	[[ ! -e /proc/$pid ]] || die "sshd (pid $pid) did not exit"
	rm -f "$LAB/sshd.pid"
	log "sshd stopped"
}

down() {
	need_root
	lock_lab
	stop_sshd
	local cg
	cg=$(target_cgroup)
	if [[ -n $cg ]]; then
		rmdir "$cg" 2>/dev/null || log "$cg still holds processes; left in place"
	fi
	case $NOPY_ROOT in
	/*/*)
		if [[ -d $NOPY_ROOT ]]; then
			rm -rf --one-file-system -- "$NOPY_ROOT"
			log "removed $NOPY_ROOT"
		fi
		;;
	*) log "AB_NOPY_ROOT=$NOPY_ROOT looks unsafe to remove; left in place" ;;
	esac
	local m
	for m in "$PYTHONS" "$NOEXEC"; do
		if mountpoint -q "$m"; then
			umount --lazy "$m" && log "unmounted $m"
		fi
	done
	rm -rf -- "$PYTHONS-bin"
	unlock_lab
}

# purge undoes everything up made: sshd stopped, the chroot, the users
# and their homes, the sudoers file, and the state directory.
purge() {
	down
	local u
	for u in "$USER_NOPW" "$USER_PW" "$USER_NOPY" "$USER_NOPTY" $(zoo_users | sed -E 's/[^ =]+=//g') $(zoo_cases | sed -E 's/[^ =]+=//g') "$USER_NOSFTP"; do
		if id -u "$u" >/dev/null 2>&1; then
			pkill -KILL -u "$u" 2>/dev/null || true
			userdel -r "$u" 2>/dev/null || userdel "$u"
			log "removed user $u"
		fi
	done
	rm -f "$SUDOERS"
	case $LAB in
	/*/*) rm -rf --one-file-system -- "$LAB" ;;
	*) log "AB_LAB=$LAB looks unsafe to remove; left in place" ;;
	esac
	log "purged: users, $SUDOERS and $LAB removed"
}

env_() {
	cat <<EOF
export AB_LAB='$LAB'
export AB_PORT='$PORT'
export AB_KEY='$LAB/id_ed25519'
export AB_WRONG_KEY='$LAB/wrong_ed25519'
export AB_USER='$USER_NOPW'
export AB_PWUSER='$USER_PW'
export AB_PASSWORD='$PASSWORD'
export AB_NOPYUSER='$USER_NOPY'
export AB_NOPTYUSER='$(id -u "$USER_NOPTY" >/dev/null 2>&1 && echo "$USER_NOPTY")'
export AB_ZOO='$(zoo_users)'
export AB_ZOO_CASES='$(zoo_cases)'
export AB_NOSFTPUSER='$(id -u "$USER_NOSFTP" >/dev/null 2>&1 && echo "$USER_NOSFTP")'
export AB_PYTHONS='$(mountpoint -q "$PYTHONS" && echo "$PYTHONS-bin")'
export AB_NOEXEC='$(mountpoint -q "$NOEXEC" && echo "$NOEXEC")'
export AB_TARGET_CGROUP='$(target_cgroup)'
EOF
}

status() {
	local pid
	if pid=$(sshd_pid) && banner_ok; then
		echo "lab up: sshd pid $pid on 127.0.0.1:$PORT, state in $LAB"
	else
		echo "lab down"
		return 1
	fi
}

case ${1:-} in
up) up ;;
down) down ;;
purge) purge ;;
env) env_ ;;
status) status ;;
*)
	echo "usage: $0 up|down|purge|env|status" >&2
	exit 2
	;;
esac
