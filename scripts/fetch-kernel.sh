#!/usr/bin/env bash
# Fetch the pinned Debian bookworm generic amd64 kernel and cache its bzImage
# and its module tree: .cache/kernels/lib/modules/KVER, the default
# --modules-dir of --kernel .cache/kernels/vmlinuz-KVER. The .deb is kept in
# the cache, so the tree can be extracted again without a download.
# Prints the path of the cached vmlinuz. Needs apt-get and dpkg-deb (Debian).
# The package is pinned by name, version and SHA256; a pinned version can
# vanish from the archive, in which case this fails and says so.
set -euo pipefail
PKG=linux-image-6.1.0-57-amd64
VER=6.1.192-3
SHA256=14d219d01e1283261817d961dbb3895cb5b4288d0de10e0ba0632a0d993e15bf
KVER=6.1.0-57-amd64

top=$(cd "$(dirname "$0")/.." && pwd)
cache="$top/.cache/kernels"
out="$cache/vmlinuz-$KVER"
mods="$cache/lib/modules/$KVER"
deb="$cache/${PKG}_${VER}_amd64.deb"
if [ -s "$out" ] && [ -f "$mods/.complete" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
if [ -s "$deb" ] && [ "$(sha256sum "$deb" | cut -d' ' -f1)" = "$SHA256" ]; then
	cp "$deb" .
else
	rm -f "$deb" # absent or not the pinned package: download it
fi
if ls ./*.deb >/dev/null 2>&1; then
	:
elif ! apt-get download "$PKG=$VER" >/dev/null 2>&1; then
	apt-get update -qq >/dev/null 2>&1 || true
	apt-get download "$PKG=$VER" >/dev/null 2>&1 || {
		echo "fetch-kernel: cannot download $PKG=$VER (pinned version gone from the archive?)" >&2
		exit 1
	}
fi
got_deb=$(ls ./*.deb)
got=$(sha256sum "$got_deb" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
	echo "fetch-kernel: $got_deb: sha256 $got, pinned $SHA256" >&2
	exit 1
fi
if [ ! -s "$deb" ]; then
	cp "$got_deb" "$deb.tmp" && mv "$deb.tmp" "$deb"
fi
if [ ! -s "$out" ]; then
	# ./boot is at the front of the data tar: stop after the one file.
	dpkg-deb --fsys-tarfile "$got_deb" 2>/dev/null | tar -x --occurrence=1 "./boot/vmlinuz-$KVER" 2>/dev/null || true
	[ -s "./boot/vmlinuz-$KVER" ] || { echo "fetch-kernel: $got_deb has no ./boot/vmlinuz-$KVER" >&2; exit 1; }
	mv "./boot/vmlinuz-$KVER" "$out.tmp" && mv "$out.tmp" "$out"
fi
if [ ! -f "$mods/.complete" ]; then
	# The whole module tree: 4,023 .ko files, about 390 MB unpacked. The
	# package ships no modules.dep (depmod writes it at install time), so
	# kpsim finds modules by walking the tree. Unpacked beside the cache
	# and moved into place whole.
	dpkg-deb --fsys-tarfile "$got_deb" | tar -x "./lib/modules/$KVER" || {
		echo "fetch-kernel: cannot extract ./lib/modules/$KVER from $got_deb" >&2
		exit 1
	}
	touch "./lib/modules/$KVER/.complete"
	rm -rf "$mods"
	mkdir -p "$(dirname "$mods")"
	mv "./lib/modules/$KVER" "$mods"
fi
echo "$out"
