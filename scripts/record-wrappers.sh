#!/usr/bin/env bash
# record-wrappers.sh — save the AnsiballZ wrappers each ansible-core version
# sends, as fixtures for package interp/ansiballz
# (interp/ansiballz/testdata/recorded/VERSION/MODE-MODULE.py.gz).
#
#     eval "$(scripts/lab.sh env)"; scripts/record-wrappers.sh [VERSION...]
#
# Logging shims first on PATH keep what the real binaries carry: with
# pipelining ("piped") the wrapper ssh gets on stdin for python, without it
# ("file") the file sftp puts as AnsiballZ_*.py. A playbook of command,
# stat and file tasks runs against the lab in both modes. Versions default
# to every one scripts/ansible-versions.sh lists.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(dirname "$here")/interp/ansiballz/testdata/recorded
: "${AB_PORT:?run eval \"\$(scripts/lab.sh env)\" first}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
cat >"$work/bin/ssh" <<'EOS'
#!/bin/bash
cmd="${@: -1}"
if [[ $cmd == *python* && $cmd != *AnsiballZ_* ]]; then
	exec /usr/bin/ssh "$@" < <(tee "$(mktemp "$WRAPPER_DIR/piped.XXXXXX")")
fi
exec /usr/bin/ssh "$@"
EOS
cat >"$work/bin/sftp" <<'EOS'
#!/bin/bash
batch=$(cat)
while read -r verb src dst; do
	[[ $verb == put && $dst == *AnsiballZ_* ]] || continue
	src=${src#[\'\"]}
	cp "${src%[\'\"]}" "$(mktemp "$WRAPPER_DIR/file.XXXXXX")"
done <<<"$batch"
exec /usr/bin/sftp "$@" < <(printf '%s\n' "$batch")
EOS
chmod +x "$work/bin/ssh" "$work/bin/sftp"
cat >"$work/inventory" <<EOF2
[lab]
target ansible_host=127.0.0.1 ansible_port=$AB_PORT ansible_user=$AB_USER ansible_ssh_private_key_file=$AB_KEY ansible_python_interpreter=/usr/bin/python3 ansible_ssh_common_args='-o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no'
EOF2
cat >"$work/playbook.yml" <<'EOF2'
- hosts: lab
  gather_facts: false
  tasks:
    - command: echo 'it'
    - stat: path=/etc/hostname
    - file: path=/tmp/ab-record-wrappers state=directory
    - file: path=/tmp/ab-record-wrappers state=absent
EOF2
versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || mapfile -t versions < <("$here/ansible-versions.sh" list)
for v in "${versions[@]}"; do
	bin=$("$here/ansible-versions.sh" bin "$v")
	rm -rf "${out:?}/$v"
	mkdir -p "$out/$v"
	for mode in file piped; do
		pipelining=False
		[[ $mode == piped ]] && pipelining=True
		dir=$work/$v-$mode
		mkdir "$dir"
		WRAPPER_DIR=$dir PATH=$work/bin:$PATH ANSIBLE_PIPELINING=$pipelining ANSIBLE_HOST_KEY_CHECKING=False \
			ANSIBLE_SSH_TRANSFER_METHOD=sftp "$bin/ansible-playbook" -i "$work/inventory" "$work/playbook.yml" >"$work/out" 2>&1 ||
			{ cat "$work/out" >&2; exit 1; }
		# The first wrapper of each module, named after it.
		for f in $(ls -tr "$dir"); do
			f=$dir/$f
			grep -qE '_ANSIBALLZ_WRAPPER|_ansiballz_main' "$f" || continue
			module=$(grep -oE -m1 'ansible\.modules\.[a-z_]+' "$f" | head -n1)
			module=${module#ansible.modules.}
			dest=$out/$v/$mode-$module.py.gz
			[[ -n $module && ! -e $dest ]] || continue
			gzip -9n <"$f" >"$dest"
		done
		echo "$v $mode: $(ls "$out/$v" | grep -c "^$mode-") wrappers"
	done
done
