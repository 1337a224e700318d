#!/usr/bin/env bash
# demo.sh — the same small playbook (30 `command: hostname` tasks) with
# stock ssh and through ansible-bridge, timed.
#
#     scripts/demo.sh            # as root; brings the loopback lab up
#
# Settings: AB_LAB, AB_PORT (see scripts/lab.sh), DEMO_TASKS (default 30),
# ANSIBLE_PIPELINING (default False, Ansible's default).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
TASKS=${DEMO_TASKS:-30}
PIPELINING=${ANSIBLE_PIPELINING:-False}
GO=${GO:-go}

# What can fail is checked before the lab changes the machine.
command -v "$GO" >/dev/null ||
	{ echo "demo.sh: go not found (PATH=$PATH; sudo resets PATH): install Go, or run make demo, which also looks in /usr/local/go/bin" >&2; exit 1; }
command -v ansible-playbook >/dev/null || { echo "demo.sh: ansible-playbook not found: run scripts/setup.sh" >&2; exit 1; }

scripts/lab.sh up
eval "$(scripts/lab.sh env)"

DEMO=$(mktemp -d "${TMPDIR:-/tmp}/ab-demo.XXXXXX")
BIN=$DEMO/ansible-bridge
export ANSIBLE_BRIDGE_SOCKET=$DEMO/sock/bridge.sock
export ANSIBLE_BRIDGE_LOG=$DEMO/daemon.log
cleanup() {
	"$BIN" stop >/dev/null 2>&1 || true
	for s in "$DEMO"/cp-*/*; do
		if [[ -S $s ]]; then
			ssh -F none -o ControlPath="$s" -O exit ab-lab >/dev/null 2>&1 || true
		fi
	done
	rm -rf "$DEMO"
}
trap cleanup EXIT

echo "building ansible-bridge"
CGO_ENABLED=0 "$GO" build -ldflags="-s -w" -o "$BIN" .
CGO_ENABLED=0 "$GO" build -ldflags="-s -w" -o "$DEMO/ansible-bridge-shim" ./fakessh/cmd/ansible-bridge-shim
"$BIN" shims "$DEMO/shims" >/dev/null

cat >"$DEMO/inventory.ini" <<EOF
t ansible_host=127.0.0.1 ansible_port=$AB_PORT ansible_user=$AB_USER ansible_ssh_private_key_file=$AB_KEY ansible_python_interpreter=/usr/bin/python3 ansible_ssh_common_args='-o UserKnownHostsFile=/dev/null'
EOF
{
	echo "- hosts: t"
	echo "  gather_facts: false"
	echo "  tasks:"
	for ((i = 1; i <= TASKS; i++)); do
		echo "    - command: hostname"
	done
} >"$DEMO/demo.yml"

# run LABEL [PATH-prefix]: runs the playbook with a fresh ControlPath
# directory and prints the wall time.
run() {
	local label=$1 prefix=${2:-} start end
	start=$(date +%s.%N)
	PATH=$prefix${prefix:+:}$PATH \
		ANSIBLE_SSH_CONTROL_PATH_DIR=$DEMO/cp-$label \
		ANSIBLE_HOST_KEY_CHECKING=False \
		ANSIBLE_PIPELINING=$PIPELINING \
		ansible-playbook -i "$DEMO/inventory.ini" "$DEMO/demo.yml" >"$DEMO/$label.out" 2>&1 ||
		{
			cat "$DEMO/$label.out"
			echo "demo: $label run failed" >&2
			exit 1
		}
	end=$(date +%s.%N)
	tail -n 3 "$DEMO/$label.out" | grep -E 'ok=' || true
	printf '%-8s %6.2f s\n' "$label" "$(python3 -c "print($end - $start)")"
}

echo "playbook: $TASKS x command: hostname, pipelining=$PIPELINING"
run stock
run bridge "$DEMO/shims"
echo "(the bridge's first run includes starting its daemon and connecting)"
run bridge2 "$DEMO/shims"
"$BIN" status 2>/dev/null || true
