#!/bin/bash
# ab.sh: the bench's playbooks with two builds of the bridge and Mitogen,
# interleaved round after round, on one machine: what "unchanged or faster"
# and "within 5 % of an earlier ratio" mean when the machine's speed moves
# from day to day (a single make bench compares modes, not code).
#
#   scripts/ab.sh OLDREV [ROUNDS] [PLAYBOOKS] [PIPELINING...]
#     e.g. scripts/ab.sh 015d7df 3 "loop tasks become" True False
#
# Needs the lab (scripts/lab.sh up; eval "$(scripts/lab.sh env)") and
# ansible-playbook on PATH (PATH="$(scripts/ansible-versions.sh bin 2.22):$PATH"
# for another version). Builds OLDREV (a worktree) and the work tree into
# $AB_DIR (default /var/tmp/ab), and prints one line per run to stdout:
#   playbook round build pipelining rc wall-seconds
# then the medians and ratios. The playbooks and inventory come from a
# scripts/bench run with -keep, made once into $AB_DIR/bench. OLDREV stays
# checked out in $AB_DIR/src-OLDREV (git worktree remove it when done).
set -euo pipefail
old=${1:?usage: scripts/ab.sh OLDREV [ROUNDS] [PLAYBOOKS] [PIPELINING...]}
rounds=${2:-3}
books=${3:-loop tasks become}
shift $(($# < 3 ? $# : 3))
pipes=("$@")
[ ${#pipes[@]} -gt 0 ] || pipes=(True)
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${AB_DIR:-/var/tmp/ab}
mkdir -p "$dir"

build() { # build REV|work DIR
	local src=$root
	if [ "$1" != work ]; then
		src=$dir/src-$1
		[ -d "$src" ] || git -C "$root" worktree add -q --detach "$src" "$1"
	fi
	mkdir -p "$2/sock" && chmod 700 "$2/sock"
	(cd "$src" && CGO_ENABLED=0 go build -ldflags='-s -w' -o "$2/ansible-bridge" . &&
		CGO_ENABLED=0 go build -ldflags='-s -w' -o "$2/ansible-bridge-shim" ./fakessh/cmd/ansible-bridge-shim)
	ANSIBLE_BRIDGE_SOCKET=$2/sock/bridge.sock "$2/ansible-bridge" shims "$2/shims" >/dev/null
}
build "$old" "$dir/old"
build work "$dir/new"

if [ ! -f "$dir/bench/inv.ini" ]; then
	scratch=$(cd "$root" && go run ./scripts/bench -modes floor-pipelining -playbooks loop -n 100 -keep 2>&1 | sed -n 's/^bench: scratch directory kept: //p')
	mkdir -p "$dir/bench"
	cp "$scratch"/*.yml "$scratch/ansible.cfg" "$dir/bench/"
	# The bench puts a relay in front of sshd; these runs go to sshd itself.
	sed "s/ansible_port=[0-9]*/ansible_port=${AB_PORT:-2222}/" "$scratch"/inventory-*.ini >"$dir/bench/inv.ini"
	rm -rf "$scratch"
fi
mitogen=$(ls -d /var/cache/ansible-bridge/ansible-core/mitogen-*/mitogen/ansible_mitogen/plugins/strategy 2>/dev/null | head -1)

run() { # run BUILD PLAYBOOK PIPELINING: prints rc and wall seconds
	local cp start rc=0
	cp=$(mktemp -d /tmp/ab-cp.XXXX)
	start=$(date +%s.%N)
	(
		export ANSIBLE_CONFIG=$dir/bench/ansible.cfg ANSIBLE_HOST_KEY_CHECKING=False ANSIBLE_NOCOLOR=1 \
			ANSIBLE_SSH_CONTROL_PATH_DIR=$cp ANSIBLE_PIPELINING=$3
		if [ "$1" = mitogen ]; then
			export ANSIBLE_STRATEGY_PLUGINS=$mitogen ANSIBLE_STRATEGY=mitogen_linear
		else
			export ANSIBLE_BRIDGE_SOCKET=$dir/$1/sock/bridge.sock PATH=$dir/$1/shims:$PATH
			"$dir/$1/ansible-bridge" stop >/dev/null 2>&1 || true
		fi
		ansible-playbook -i "$dir/bench/inv.ini" "$dir/bench/$2.yml" >"$dir/last-$1.log" 2>&1 || rc=$?
		[ "$1" = mitogen ] || "$dir/$1/ansible-bridge" stop >/dev/null 2>&1 || true
		exit $rc
	) || rc=$?
	rm -rf "$cp"
	echo "$rc $(echo "$(date +%s.%N) - $start" | bc)"
}

out=$dir/runs.txt
: >"$out"
for pb in $books; do
	for r in $(seq "$rounds"); do
		for p in "${pipes[@]}"; do
			for b in old new mitogen; do
				[ "$b" = mitogen ] && { [ -n "$mitogen" ] && [ "$p" = True ] || continue; }
				echo "$pb $r $b $p $(run $b "$pb" "$p")" | tee -a "$out"
			done
		done
	done
done
python3 - "$out" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    pb, _, build, pipe, rc, wall = line.split()
    if rc == "0":
        runs[pb, build, pipe].append(float(wall))
med = {k: statistics.median(v) for k, v in runs.items()}
for (pb, build, pipe), m in sorted(med.items()):
    if build != "new":
        continue
    old, mito = med.get((pb, "old", pipe)), med.get((pb, "mitogen", pipe))
    line = f"{pb} pipelining={pipe}: old {old:.2f} s, new {m:.2f} s, new/old {m / old:.3f}"
    if mito:
        line += f"; ÷ Mitogen {mito:.2f} s: old {old / mito:.3f}, new {m / mito:.3f}"
    print(line)
EOF
