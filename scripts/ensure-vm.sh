#!/usr/bin/env bash
# Makes sure the IPVS backend's VM test (agents/proxy/ipvs) can boot Debian's kernel under qemu: installs
# qemu-system-x86 and busybox-static when missing, and unpacks the kernel package that linux-image-amd64 depends on
# (downloaded with apt-get download, never installed) into .cache/vm/<version>/, with the kernel's ELF vmlinux
# extracted from its vmlinuz (qemu boots an uncompressed ELF image twice as fast). .cache/vm/current names the
# version the test uses. A second run finds everything in place and does nothing. Used by `make test`. As root on
# Debian/Ubuntu it installs what is missing; otherwise it prints the command.
set -euo pipefail

cd "$(dirname "$0")/.."
cache=.cache/vm
export DEBIAN_FRONTEND=noninteractive

can_apt() { [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; }

updated=
apt_update() {
  if [ -z "$updated" ]; then
    echo "ensure-vm: apt-get update" >&2
    apt-get update -qq
    updated=1
  fi
}

# The packages: qemu-system-x86_64 (qemu-system-x86) and a static busybox for the initramfs.
missing=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
[ "$(dpkg-query -W -f='${Status}' busybox-static 2>/dev/null)" = "install ok installed" ] || missing+=(busybox-static)
command -v xz >/dev/null 2>&1 || missing+=(xz-utils)
command -v zstd >/dev/null 2>&1 || missing+=(zstd)
if [ ${#missing[@]} -gt 0 ]; then
  if ! can_apt; then
    echo "The IPVS VM test needs: ${missing[*]}. Install them, then run this again:" >&2
    echo "    sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "ensure-vm: installing ${missing[*]} (apt-get install)" >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
    apt_update
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  }
fi

# The kernel package linux-image-amd64 depends on, e.g. linux-image-6.1.0-57-amd64.
kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}'; }
pkg=$(kernel_pkg || true)
if [ -z "$pkg" ]; then
  can_apt || { echo "ensure-vm: apt-cache knows no linux-image-amd64; run apt-get update as root" >&2; exit 1; }
  apt_update
  pkg=$(kernel_pkg)
fi
[ -n "$pkg" ] || { echo "ensure-vm: linux-image-amd64 depends on no linux-image package" >&2; exit 1; }
version=${pkg#linux-image-}
dir=$cache/$version
if [ -s "$dir/vmlinux" ] && [ -d "$dir/root/lib/modules/$version" ] && [ "$(cat "$cache/current" 2>/dev/null)" = "$version" ]; then
  exit 0 # in place
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ ! -d "$dir/root/lib/modules/$version" ]; then
  echo "ensure-vm: downloading $pkg (apt-get download; not installed)" >&2
  (cd "$tmp" && { apt-get download -q "$pkg" >/dev/null 2>&1 || { can_apt && apt_update && apt-get download -q "$pkg" >/dev/null; }; })
  deb=$(ls "$tmp"/*.deb)
  echo "ensure-vm: unpacking $(basename "$deb") into $dir/root" >&2
  mkdir -p "$tmp/root"
  dpkg-deb -x "$deb" "$tmp/root"
  rm -f "$deb"
  rm -rf "$dir"
  mkdir -p "$dir"
  mv "$tmp/root" "$dir/root"
fi

# extract-vmlinux (the kernel's scripts/extract-vmlinux): find a compressed payload's magic in vmlinuz, decompress
# from there, keep the first result that is an ELF file.
vmlinuz=$(ls "$dir"/root/boot/vmlinuz-* | head -n1)
echo "ensure-vm: extracting the ELF vmlinux from $(basename "$vmlinuz")" >&2
is_elf() { [ "$(head -c4 "$1" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; }
try() { # magic (as grep -P bytes), decompressor...
  local magic=$1
  shift
  local pos
  for pos in $(LC_ALL=C grep -aboP "$magic" "$vmlinuz" | cut -d: -f1); do
    tail -c+$((pos + 1)) "$vmlinuz" | "$@" >"$tmp/vmlinux" 2>/dev/null || true
    if [ -s "$tmp/vmlinux" ] && is_elf "$tmp/vmlinux"; then
      echo "ensure-vm: vmlinuz holds a $1 payload at byte $pos" >&2
      return 0
    fi
  done
  return 1
}
try '\x28\xb5\x2f\xfd' zstd -dc ||
  try '\xfd\x37\x7a\x58\x5a\x00' xz -dc ||
  try '\x1f\x8b\x08' gzip -dc ||
  try '\x02\x21\x4c\x18' lz4 -dc ||
  try '\x42\x5a\x68' bzip2 -dc || {
  echo "ensure-vm: no known compressed kernel in $vmlinuz" >&2
  exit 1
}
mv "$tmp/vmlinux" "$dir/vmlinux"
echo "$version" >"$cache/current"
# Older versions' directories are dropped: one kernel is enough.
for old in "$cache"/*/; do
  [ "$old" = "$dir/" ] || { echo "ensure-vm: removing $old" >&2; rm -rf "$old"; }
done
echo "ensure-vm: kernel $version ready in $dir ($(du -sh "$dir" | cut -f1))" >&2
