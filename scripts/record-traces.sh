#!/usr/bin/env bash
# record-traces.sh — record the exact ssh/scp/sftp argv each ansible-core
# version sends, as fixtures for the command classifier and the become
# parser (bridge/testdata/traces/VERSION-MODE.log, one line per call:
# "ssh [arg] [arg] ...").
#
#     eval "$(scripts/lab.sh env)"; scripts/record-traces.sh [VERSION...]
#
# A logging shim first on PATH writes each call and execs the real binary;
# the playbook (module runs, a copy, become with sudo) runs against the
# lab with pipelining off ("default") and on ("pipelining"). Versions
# default to every one scripts/ansible-versions.sh lists.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(dirname "$here")/bridge/testdata/traces
: "${AB_PORT:?run eval \"\$(scripts/lab.sh env)\" first}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$out"
for prog in ssh scp sftp; do
	cat >"$work/bin/$prog" <<EOS
#!/bin/bash
{ printf '$prog'; for a in "\$@"; do printf ' [%s]' "\$a"; done; echo; } >>"\$TRACE_LOG"
exec /usr/bin/$prog "\$@"
EOS
	chmod +x "$work/bin/$prog"
done
cat >"$work/inventory" <<EOF2
[lab]
target ansible_host=127.0.0.1 ansible_port=$AB_PORT ansible_user=$AB_USER ansible_ssh_private_key_file=$AB_KEY ansible_python_interpreter=/usr/bin/python3 ansible_ssh_common_args='-o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no'
EOF2
cat >"$work/playbook.yml" <<'EOF2'
- hosts: lab
  gather_facts: false
  tasks:
    - command: hostname
    - copy: content="x" dest=/tmp/ab-record-traces.txt
    - command: id
      become: true
    - file: path=/tmp/ab-record-traces.txt state=absent
EOF2
versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || mapfile -t versions < <("$here/ansible-versions.sh" list)
for v in "${versions[@]}"; do
	bin=$("$here/ansible-versions.sh" bin "$v")
	for mode in default pipelining; do
		pipelining=False
		[[ $mode == pipelining ]] && pipelining=True
		log=$out/$v-$mode.log
		: >"$log"
		TRACE_LOG=$log PATH=$work/bin:$PATH ANSIBLE_PIPELINING=$pipelining ANSIBLE_HOST_KEY_CHECKING=False \
			ANSIBLE_SSH_TRANSFER_METHOD=sftp "$bin/ansible-playbook" -i "$work/inventory" "$work/playbook.yml" >"$work/out" 2>&1 ||
			{ cat "$work/out" >&2; exit 1; }
		echo "$v $mode: $(wc -l <"$log") calls"
	done
done
