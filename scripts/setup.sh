#!/usr/bin/env bash
# setup.sh — install the Debian 12 packages that ansible-bridge's lab,
# integration tests and CI need. Idempotent: when every package is already
# installed it does not touch apt at all.
#
# make demo and make test run it first; as root on a bare Debian 12
# machine it installs what is missing, naming it. When everything is there
# it changes nothing and needs no root (well under a second).
#
# Go itself is not installed here: CI provides it at /usr/local/go.
#
# Deliberately NOT installed: acl (setfacl/getfacl). Ansible uses setfacl to
# hand its temp files to an unprivileged become_user; without it stock
# ansible-core fails `become_user: nobody` when pipelining is off ("Failed to
# set permissions on the temporary files ..."). That failure is the stock
# behaviour on a minimal target and the corpus pins it: the integration tests
# expect that task to fail in both the stock and the bridge run. If acl is
# present the tests still pass (they compare stock with bridge), but the
# expected-failure assertion is relaxed, so this script warns about it.
set -euo pipefail

PKGS=(
	openssh-server  # the lab's sshd
	openssh-client  # ssh, scp, sftp, ssh-keygen: the stock runs and fallback
	ansible-core    # ansible-playbook 2.14 (bookworm)
	python3         # target interpreter and Ansible itself
	pyflakes3       # make lint: the agent's Python (interp/*.py)
	sudo            # become_method: sudo
	sshpass         # ansible_password logins
	fuse3           # fusermount3 for the bridge's debug mount
	tmux            # scripts/demo.sh and manual debugging
	make            # Makefile targets used by .ci/run
	gcc             # the shim's C front (fakessh/front) and the bench's floor
	libc6-dev       # their static link
	musl-tools      # musl-gcc: links them against musl, which starts without glibc's cpuid probes (~0.4 ms an exec in a VM)
	procps          # pgrep/pkill, used by the lab and the tests
	python3-ansible-runner # integration: jobs laid out as AWX runs them
	bubblewrap      # integration: an execution environment's conditions
	rsync           # integration: real clients through the shims
	git             # integration: real clients through the shims
	tcsh            # integration: the target zoo's login shells
	fish
	busybox
	ca-certificates # HTTPS to the Go module proxy
)

# Every check first: nothing on the machine changes before they pass.
missing=()
for p in "${PKGS[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	if [[ $status != installed ]]; then
		missing+=("$p")
	fi
done
if { ((${#missing[@]} > 0)) || [[ ! -d /run/sshd ]]; } && [[ $(id -u) -ne 0 ]]; then
	[[ -d /run/sshd ]] || missing+=("(the directory /run/sshd)")
	echo "setup.sh: missing: ${missing[*]}; run as root (sudo) to install" >&2
	exit 1
fi

if ((${#missing[@]} == 0)); then
	echo "setup.sh: all packages present: ${PKGS[*]}"
else
	echo "setup.sh: installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The packaged sshd service is not used by the lab (scripts/lab.sh runs its
# own sshd on 127.0.0.1:2222), but sshd needs its privilege separation
# directory, which only the service unit creates.
[[ -d /run/sshd ]] || install -d -m 0755 /run/sshd

if command -v setfacl >/dev/null 2>&1; then
	echo "setup.sh: warning: setfacl (package acl) is installed; the corpus" \
		"was recorded without it (become_user: nobody without pipelining" \
		"then succeeds in both runs instead of failing in both)" >&2
fi

command -v go >/dev/null || [[ -x /usr/local/go/bin/go ]] ||
	echo "setup.sh: warning: Go not found (on PATH or /usr/local/go/bin): install Go 1.26 from https://go.dev/dl/ to build" >&2
