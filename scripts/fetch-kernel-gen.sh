#!/usr/bin/env bash
# Fetch a pinned Debian kernel of a later generation (KVER=6.12 or 7.3)
# into .cache/kernels/KVER/, each package unpacked with its paths as
# shipped (merged /usr): the bzImage, the config beside it and the module
# tree (.ko.xz); with DBG=1 also the -dbg package's unstripped vmlinux and
# real System.map (a 1.0-1.2 GB download; only those two files are kept).
# Prints the path of the vmlinuz.
#
# The suites (trixie for 6.12, experimental for 7.3) are not in the
# machine's apt sources: a private apt configuration under
# .cache/kernels/.apt adds them, with the archive address taken from the
# machine's own sources (never written into the repository).
# Every package is pinned by name, version and SHA256; a pinned version
# can vanish from the archive, in which case this says so in one line and
# fails (the tests that need the kernel then skip).
set -euo pipefail
KVER=${1:-${KVER:?KVER=6.12 or 7.3}}
DBG=${DBG:-0}
top=$(cd "$(dirname "$0")/.." && pwd)
cache="$top/.cache/kernels"

# name=version sha256 [files to keep from a -dbg package]
case "$KVER" in
6.12)
	SUITE=trixie
	PKGS=("linux-image-6.12.117+deb13-amd64=6.12.117-1 ca712d36790184f6ac125ce2b20ea4e2202ae6bb7817b7de268f1f0115ccda73")
	DBGPKG="linux-image-6.12.117+deb13-amd64-dbg=6.12.117-1 92537ddee62d004a3fe316373d75cba68f8eda1fe975b05968ac5dd5848b1ffa"
	DBGFILES="./usr/lib/debug/boot/vmlinux-6.12.117+deb13-amd64 ./usr/lib/debug/boot/System.map-6.12.117+deb13-amd64"
	VMLINUZ=boot/vmlinuz-6.12.117+deb13-amd64
	;;
7.3)
	SUITE=experimental
	PKGS=("linux-binary-7.3-amd64=7.3~rc7-1~exp1 a427422f7d200f39f253882e0703a04b6a48b92dbfa46d00f1257151ee0da05c"
		"linux-base-7.3-amd64=7.3~rc7-1~exp1 c7944da51717723bf6ffa5ce39193a6b7a11707be39c446a0b2b34b6341b80a3"
		"linux-modules-7.3-amd64=7.3~rc7-1~exp1 3c3cb040797c989838f1f0d1667b5a1246ec6d0eee45c944e04de06db140dd00")
	DBGPKG="linux-image-7.3-amd64-dbg=7.3~rc7-1~exp1 abbb69d645588ecf8f79a5d47cf4629cfcc4cfe43c5ddf39c525c3acdc971cee"
	DBGFILES="./usr/lib/debug/lib/modules/7.3-amd64/vmlinux ./usr/lib/debug/lib/modules/7.3-amd64/System.map"
	VMLINUZ=usr/lib/modules/7.3-amd64/vmlinuz
	;;
*)
	echo "fetch-kernel-gen: KVER=$KVER: want 6.12 or 7.3 (6.1 is scripts/fetch-kernel.sh: make real-kernel)" >&2
	exit 2
	;;
esac
root="$cache/$KVER"
mkdir -p "$root" "$cache/debs"

# The private apt configuration: the machine's archive address with SUITE.
aptdir="$cache/.apt"
aptconf="$aptdir/apt.conf"
setup_apt() {
	mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial"
	local uri=""
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' "$f")
		[ -n "$uri" ] && break
	done
	if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
		uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list)
	fi
	[ -n "$uri" ] || { echo "fetch-kernel: no Debian archive in the machine's apt sources" >&2; exit 1; }
	printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' "$uri" "$SUITE" >"$aptdir/sources-$SUITE.list"
	cat >"$aptconf.$SUITE" <<CONF
Dir::Etc::SourceList "$aptdir/sources-$SUITE.list";
Dir::Etc::SourceParts "/nonexistent";
Dir::State::Lists "$aptdir/lists";
Dir::Cache "$aptdir/cache";
APT::Get::List-Cleanup "false";
CONF
	APT_CONFIG="$aptconf.$SUITE" apt-get update -qq >/dev/null 2>&1 || {
		echo "fetch-kernel: apt-get update for $SUITE failed" >&2
		exit 1
	}
}
# set up once per run: fetch runs in $(...) subshells, so a file marks it.
apt_ready="$aptdir/.ready-$SUITE-$$"
trap 'rm -f "$apt_ready"' EXIT

# fetch NAME=VERSION SHA256: the .deb into $cache/debs, checked; prints its path.
fetch() {
	local spec=$1 sha=$2 name ver deb
	name=${spec%%=*}
	ver=${spec#*=}
	deb="$cache/debs/${name}_${ver}_amd64.deb"
	if [ -s "$deb" ] && [ "$(sha256sum "$deb" | cut -d' ' -f1)" = "$sha" ]; then
		echo "$deb"
		return
	fi
	if [ ! -f "$apt_ready" ]; then
		setup_apt
		touch "$apt_ready"
	fi
	local tmp
	tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
	(cd "$tmp" && APT_CONFIG="$aptconf.$SUITE" apt-get download "$spec" >/dev/null 2>&1) || {
		rm -rf "$tmp"
		echo "fetch-kernel: cannot download $spec from $SUITE (pinned version gone from the archive?)" >&2
		exit 1
	}
	local got
	got=$(ls "$tmp"/*.deb 2>/dev/null | head -1)
	[ -n "$got" ] || {
		rm -rf "$tmp"
		echo "fetch-kernel: apt-get download $spec left no .deb" >&2
		exit 1
	}
	if [ "$(sha256sum "$got" | cut -d' ' -f1)" != "$sha" ]; then
		echo "fetch-kernel: $spec: sha256 $(sha256sum "$got" | cut -d' ' -f1), pinned $sha" >&2
		rm -rf "$tmp"
		exit 1
	fi
	mv "$got" "$deb"
	rm -rf "$tmp"
	echo "$deb"
}

for p in "${PKGS[@]}"; do
	# shellcheck disable=SC2086
	set -- $p
	# The marker names the version: a re-pin unpacks the new package.
	mark="$root/.complete-${1%%=*}_${1#*=}"
	[ -f "$mark" ] && continue
	deb=$(fetch "$1" "$2")
	dpkg-deb -x "$deb" "$root" 2>/dev/null || {
		echo "fetch-kernel: cannot unpack $deb into $root" >&2
		exit 1
	}
	touch "$mark"
done
if [ "$DBG" = 1 ]; then
	# shellcheck disable=SC2086
	set -- $DBGPKG
	mark="$root/.complete-${1%%=*}_${1#*=}"
	if [ ! -f "$mark" ]; then
		deb=$(fetch "$1" "$2")
		# shellcheck disable=SC2086
		dpkg-deb --fsys-tarfile "$deb" 2>/dev/null | tar -x -C "$root" $DBGFILES 2>/dev/null || {
			echo "fetch-kernel: cannot extract the debug vmlinux and System.map from $deb" >&2
			exit 1
		}
		rm -f "$deb" # 1 GB; only the two files are kept
		touch "$mark"
	fi
fi
echo "$root/$VMLINUZ"
