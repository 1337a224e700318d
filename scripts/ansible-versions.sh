#!/usr/bin/env bash
# ansible-versions.sh — the ansible-core version matrix, installed into a
# cache outside the repository from the peer packages (no pip, no network).
#
#     scripts/ansible-versions.sh list           # versions this machine can run
#     scripts/ansible-versions.sh bin VERSION    # install if needed; print a dir
#                                                # holding ansible-playbook,
#                                                # ansible and ansible-config
#     scripts/ansible-versions.sh all            # install every version
#     scripts/ansible-versions.sh mitogen        # unpack Mitogen; print its
#                                                # strategy plugin dir
#
#     PATH=$(scripts/ansible-versions.sh bin 2.19):$PATH ansible-playbook ...
#
# VERSION is 2.14 (Debian 12's package, /usr/bin), 2.16, 2.18, 2.19 or 2.22.
# Settings:
#
#     AB_PEERS          the peer packages (default ../shared/peers next to
#                       the repository, else /work/shared/peers)
#     AB_ANSIBLE_CACHE  where versions are unpacked (default
#                       /var/cache/ansible-bridge/ansible-core)
#
# Each version runs with Debian's pure-Python dependencies (jinja2, yaml,
# packaging, resolvelib, cryptography, pulled in by Debian's ansible-core).
# 2.22 needs Python >= 3.12: the newest pyenv Python >= 3.12 is used, with
# /usr/lib/python3/dist-packages after the unpacked tree on PYTHONPATH.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
CACHE=${AB_ANSIBLE_CACHE:-/var/cache/ansible-bridge/ansible-core}
VERSIONS=(2.14 2.16 2.18 2.19 2.22)
# WRAPPERS is the format of the bin/ wrappers. 3: sys.argv[0] is the
# wrapper's absolute path before ansible.cli is imported, so that 2.22's
# SSH_ASKPASS (the `ansible` next to argv[0]) is this version's ansible,
# not Debian's /usr/bin/ansible, and sees that it runs as the askpass.
# 4: the unpacked tree is byte-compiled.
WRAPPERS=4

die() {
	echo "ansible-versions.sh: $*" >&2
	exit 1
}

peers() {
	local d
	for d in "${AB_PEERS:-}" "$repo/../shared/peers" /work/shared/peers; do
		if [[ -n $d && -d $d/ansible-core ]]; then
			(cd "$d" && pwd)
			return
		fi
	done
	return 1
}

# package prints the peer file a version comes from.
package() {
	local p
	p=$(peers) || return 1
	case $1 in
	2.16) echo "$p/ansible-core/ansible-core-2.16-src.tar.gz" ;;
	2.18) echo "$p/ansible-core/ansible-core-2.18-src.tar.gz" ;;
	2.19) echo "$p/ansible-core/ansible-core_2.19.11-0+deb13u1_all.deb" ;;
	2.22) echo "$p/ansible-core/ansible-core_2.22.0~beta2-1_all.deb" ;;
	*) return 1 ;;
	esac
}

# python312 prints a Python >= 3.12 for 2.22's controller.
python312() {
	local root py
	root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
	# pyenv's shims answer for versions that are not selected: check each.
	for py in "$root"/versions/3.13*/bin/python3 "$root"/versions/3.12*/bin/python3 \
		/root/.pyenv/versions/3.1[23]*/bin/python3 "$(command -v python3.13)" "$(command -v python3.12)"; do
		[[ -x $py ]] && "$py" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && { echo "$py"; return; }
	done
	return 1
}

available() {
	case $1 in
	2.14) command -v ansible-playbook >/dev/null 2>&1 || [[ -x /usr/bin/ansible-playbook ]] ;;
	2.22) [[ -f $(package "$1" 2>/dev/null || echo /nonexistent) ]] && python312 >/dev/null ;;
	*) [[ -f $(package "$1" 2>/dev/null || echo /nonexistent) ]] ;;
	esac
}

# install unpacks VERSION into the cache (once; atomically) and writes its
# bin dir.
install_version() {
	local v=$1 pkg dest tmp py lib extra=""
	if [[ $v == 2.14 ]]; then
		[[ -x /usr/bin/ansible-playbook ]] || die "2.14 is Debian's ansible-core: run scripts/setup.sh"
		echo /usr/bin
		return
	fi
	pkg=$(package "$v") || die "unknown version $v (have: ${VERSIONS[*]})"
	[[ -f $pkg ]] || die "$pkg not found (set AB_PEERS)"
	dest=$CACHE/$v
	# .source names the package and the wrappers' format: a cache made by
	# an older version of this script is made again.
	local stamp="$pkg $WRAPPERS"
	if [[ -x $dest/bin/ansible-playbook && $dest/.source -nt $pkg ]] && [[ $(cat "$dest/.source") == "$stamp" ]]; then
		echo "$dest/bin"
		return
	fi
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/.$v.XXXXXX")
	case $pkg in
	*.tar.gz)
		tar -xzf "$pkg" -C "$tmp"
		lib=$(dirname "$(find "$tmp" -maxdepth 3 -type d -path '*/lib/ansible' | head -n1)")
		;;
	*.deb)
		dpkg-deb -x "$pkg" "$tmp/root"
		lib=$tmp/root/usr/lib/python3/dist-packages
		;;
	esac
	[[ -d $lib/ansible ]] || die "no ansible package in $pkg"
	lib=${lib/#$tmp/$dest}
	py=/usr/bin/python3
	if [[ $v == 2.22 ]]; then
		py=$(python312) || die "2.22 needs a Python >= 3.12 (pyenv)"
		extra=:/usr/lib/python3/dist-packages
	fi
	mkdir -p "$tmp/bin"
	local tool mod
	for tool in ansible-playbook:playbook ansible:adhoc ansible-config:config ansible-inventory:inventory; do
		mod=${tool#*:}
		tool=${tool%%:*}
		cat >"$tmp/bin/$tool" <<EOF
#!/bin/sh
# ansible-core $v from $pkg
PYTHONPATH=$lib$extra\${PYTHONPATH:+:\$PYTHONPATH} exec $py -c 'import sys; sys.argv[0] = "$dest/bin/$tool"; from ansible.cli.$mod import main; sys.exit(main())' "\$@"
EOF
		chmod 0755 "$tmp/bin/$tool"
	done
	echo "$stamp" >"$tmp/.source"
	rm -rf "$dest"
	mv "$tmp" "$dest"
	# Compiled once here: with PYTHONDONTWRITEBYTECODE (set on some
	# machines) every run would compile ansible's ~2,800 files again,
	# about 5 % of a short playbook's time.
	"$py" -m compileall -q -j0 "$lib" >/dev/null || die "byte-compiling $lib failed"
	if ! "$dest/bin/ansible-playbook" --version >/dev/null; then
		rm -rf "$dest"
		die "ansible-core $v does not start"
	fi
	echo "$dest/bin"
}

# mitogen unpacks the peer Mitogen tarball once and prints the directory
# for ANSIBLE_STRATEGY_PLUGINS (strategy mitogen_linear).
mitogen() {
	local p pkg dest tmp
	p=$(peers) || die "no peer packages (set AB_PEERS)"
	pkg=$(ls "$p"/mitogen/mitogen-*.tar.gz | head -n1)
	[[ -f $pkg ]] || die "no Mitogen tarball in $p/mitogen"
	dest=$CACHE/mitogen-$(basename "$pkg" .tar.gz)
	if [[ ! -d $dest ]]; then
		mkdir -p "$CACHE"
		tmp=$(mktemp -d "$CACHE/.mitogen.XXXXXX")
		tar -xzf "$pkg" -C "$tmp"
		mv "$tmp" "$dest"
	fi
	dirname "$(find "$dest" -path '*ansible_mitogen/plugins/strategy/mitogen_linear.py' | head -n1)"
}

case ${1:-} in
mitogen)
	mitogen
	;;
list)
	for v in "${VERSIONS[@]}"; do
		available "$v" && echo "$v"
	done
	;;
bin)
	[[ -n ${2:-} ]] || die "usage: $0 bin VERSION"
	install_version "$2"
	;;
all)
	for v in "${VERSIONS[@]}"; do
		if available "$v"; then
			install_version "$v" >/dev/null
			echo "$v: $("$(install_version "$v")/ansible-playbook" --version | sed -n 1p)"
		else
			echo "$v: not available here" >&2
		fi
	done
	;;
*)
	sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
