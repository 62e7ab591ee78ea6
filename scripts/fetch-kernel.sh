#!/usr/bin/env bash
# Fetch the pinned Debian bookworm generic amd64 kernel and cache its bzImage.
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
if [ -s "$out" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$cache"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
if ! apt-get download "$PKG=$VER" >/dev/null 2>&1; then
	apt-get update -qq >/dev/null 2>&1 || true
	apt-get download "$PKG=$VER" >/dev/null 2>&1 || {
		echo "fetch-kernel: cannot download $PKG=$VER (pinned version gone from the archive?)" >&2
		exit 1
	}
fi
deb=$(ls ./*.deb)
got=$(sha256sum "$deb" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
	echo "fetch-kernel: $deb: sha256 $got, pinned $SHA256" >&2
	exit 1
fi
# ./boot is at the front of the data tar: stop after the one file.
dpkg-deb --fsys-tarfile "$deb" 2>/dev/null | tar -x --occurrence=1 "./boot/vmlinuz-$KVER" 2>/dev/null || true
[ -s "./boot/vmlinuz-$KVER" ] || { echo "fetch-kernel: $deb has no ./boot/vmlinuz-$KVER" >&2; exit 1; }
mv "./boot/vmlinuz-$KVER" "$out.tmp" && mv "$out.tmp" "$out"
echo "$out"
