#!/bin/bash
# Regenerates ../generated.jsonl: runs stock ansible-playbook against a fake
# ssh (fakessh, also used as sftp/scp) that logs its argv and answers just
# enough of Ansible's protocol. Each scenario below is a tag and the
# arguments given to ansible-playbook; every become wrapper the fake ssh
# sees is written as {"tag", "args", "cmd"}.
#
# Usage: testdata/gen/generate.sh   (needs ansible-core and community.general)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
for p in ssh sftp scp; do ln -s "$here/fakessh" "$work/bin/$p"; done
printf 't ansible_host=127.0.0.1 ansible_connection=ssh ansible_python_interpreter=/usr/bin/python3 ansible_user=deploy\n' >"$work/inv"
out="$here/../generated.jsonl"
: >"$out"

run() { # tag, pipelining(0|1), ansible-playbook args...
	local tag=$1 pipe=$2
	shift 2
	FAKESSH_LOG="$work/log" ANSIBLE_PIPELINING=$pipe ANSIBLE_TIMEOUT=2 \
		ANSIBLE_HOST_KEY_CHECKING=False ANSIBLE_NOCOLOR=1 PATH="$work/bin:$PATH" \
		timeout 120 ansible-playbook -i "$work/inv" "$here/playbook.yml" "$@" >"$work/out" 2>&1 || true
	python3 - "$tag" "$pipe" "$work/log" "$out" "$@" <<'PY'
import json, sys
tag, pipe, log, out, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
n = 0
with open(log) as f, open(out, "a") as o:
    for line in f:
        d = json.loads(line)
        if d["prog"] == "ssh" and d["argv"] and "BECOME-SUCCESS-" in d["argv"][-1]:
            o.write(json.dumps({"tag": tag, "pipelining": pipe == "1", "args": args, "cmd": d["argv"][-1]}, ensure_ascii=False) + "\n")
            n += 1
print("%-28s %d wrappers" % (tag, n), file=sys.stderr)
PY
	rm -f "$work/log"
}
pw=(-e ansible_become_password=secret)

# sudo
run sudo-default 0
run sudo-default-pipelining 1
run sudo-password 0 "${pw[@]}"
run sudo-password-pipelining 1 "${pw[@]}"
run sudo-user 0 -e ansible_become_user=nobody
run sudo-user-password 1 -e ansible_become_user=nobody "${pw[@]}"
run sudo-empty-user 1 -e ansible_become_user=
run sudo-empty-flags 1 -e ansible_become_flags=
run sudo-empty-flags-password 1 -e ansible_become_flags= "${pw[@]}"
run sudo-bundled 1 -e ansible_become_flags=-HSn
run sudo-bundled-password 1 -e ansible_become_flags=-HSn "${pw[@]}"
run sudo-long 1 -e 'ansible_become_flags="--set-home --stdin --non-interactive"'
run sudo-long-password 1 -e 'ansible_become_flags="--set-home --stdin --non-interactive"' "${pw[@]}"
run sudo-preserve-env 1 -e 'ansible_become_flags="-E -H -S -n"'
run sudo-preserve-env-list 1 -e 'ansible_become_flags="--preserve-env=PATH,LANG -H -S -n"'
run sudo-login 1 -e 'ansible_become_flags="-i -S -n"'
run sudo-group 1 -e 'ansible_become_flags="-H -S -n -g adm"' -e ansible_become_user=nobody
run sudo-user-in-flags 1 -e 'ansible_become_flags="-H -S -n -unobody"' -e ansible_become_user=
run sudo-quoted-prompt-flag 1 -e "ansible_become_flags='-H -S -n --prompt=\"my prompt\"'"
run sudo-exe-path 1 -e ansible_become_exe=/usr/bin/sudo
run sudo-exe-path-password 0 -e ansible_become_exe=/usr/bin/sudo "${pw[@]}"
run sudo-bash 0 -e ansible_shell_executable=/bin/bash
run sudo-bash-password 1 -e ansible_shell_executable=/bin/bash "${pw[@]}"
run sudo-dzdo-plugin 1 -e ansible_become_method=community.general.dzdo -e ansible_become_exe=sudo -e 'ansible_become_flags="-H -S -n"' "${pw[@]}"
run sudo-quoted-prompt-flag-password 1 -e "ansible_become_flags='-H -S -n --prompt=\"my prompt\"'" "${pw[@]}"
run sudo-preserve-env-long 1 -e 'ansible_become_flags="--preserve-env -H -S -n"' "${pw[@]}"

# su
run su-default 0 -e ansible_become_method=su
run su-default-pipelining 1 -e ansible_become_method=su
run su-password 1 -e ansible_become_method=su "${pw[@]}"
run su-user 1 -e ansible_become_method=su -e ansible_become_user=nobody
run su-empty-user 1 -e ansible_become_method=su -e ansible_become_user=
run su-dash 1 -e ansible_become_method=su -e ansible_become_flags=-
run su-dash-empty-user 1 -e ansible_become_method=su -e ansible_become_flags=- -e ansible_become_user=
run su-login 1 -e ansible_become_method=su -e ansible_become_flags=-l
run su-login-long 1 -e ansible_become_method=su -e ansible_become_flags=--login
run su-preserve 1 -e ansible_become_method=su -e ansible_become_flags=-m
run su-shell 1 -e ansible_become_method=su -e 'ansible_become_flags="-s /bin/bash"'
run su-shell-long 1 -e ansible_become_method=su -e ansible_become_flags=--shell=/bin/bash -e ansible_become_user=
run su-exe-path 1 -e ansible_become_method=su -e ansible_become_exe=/bin/su "${pw[@]}"
run su-bash 0 -e ansible_become_method=su -e ansible_shell_executable=/bin/bash

# doas (community.general)
run doas-default 0 -e ansible_become_method=community.general.doas
run doas-default-pipelining 1 -e ansible_become_method=community.general.doas
run doas-password 1 -e ansible_become_method=community.general.doas "${pw[@]}"
run doas-user 1 -e ansible_become_method=community.general.doas -e ansible_become_user=nobody
run doas-user-password 0 -e ansible_become_method=community.general.doas -e ansible_become_user=nobody "${pw[@]}"
run doas-flags-n 1 -e ansible_become_method=community.general.doas -e ansible_become_flags=-n -e ansible_become_user=root
run doas-exe-path 1 -e ansible_become_method=community.general.doas -e ansible_become_exe=/usr/bin/doas "${pw[@]}"

# Not handled: other plugins, unknown tools and flags.
run neg-dzdo 1 -e ansible_become_method=community.general.dzdo
run neg-pbrun 1 -e ansible_become_method=community.general.pbrun
run neg-machinectl 1 -e ansible_become_method=community.general.machinectl
run neg-ksu 1 -e ansible_become_method=community.general.ksu -e ansible_become_user=root
run neg-pfexec 1 -e ansible_become_method=community.general.pfexec
run neg-pmrun 1 -e ansible_become_method=community.general.pmrun
run neg-sesu 1 -e ansible_become_method=community.general.sesu
run neg-sudosu 1 -e ansible_become_method=community.general.sudosu
run neg-sesu-as-su 1 -e ansible_become_method=community.general.sesu -e ansible_become_exe=su
run neg-sudo-wrapper-exe 1 -e ansible_become_exe=/usr/local/bin/mysudo
run neg-sudo-unknown-flag 1 -e 'ansible_become_flags="-H -S -n -k"'
run neg-sudo-timeout-flag 1 -e 'ansible_become_flags="-H -S -n -T 60"'
run neg-sudo-env-assignment 1 -e 'ansible_become_flags="-H -S -n FOO=bar"'
run neg-sudo-expansion 1 -e 'ansible_become_flags="-H -S -n -u $USER"'
run neg-su-fast 1 -e ansible_become_method=su -e ansible_become_flags=-f
run neg-su-pty 1 -e ansible_become_method=su -e ansible_become_flags=--pty
run neg-su-as-sudo 1 -e ansible_become_method=su -e ansible_become_exe=sudo
run neg-sudo-as-su 1 -e ansible_become_exe=su
run neg-doas-shell 1 -e ansible_become_method=community.general.doas -e ansible_become_flags=-s
