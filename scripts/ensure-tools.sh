#!/usr/bin/env bash
# Makes sure the commands the tests drive are on this machine: ip (iproute2) and nsenter (util-linux) for the
# agents' network-namespace e2e tests, nft for the proxy's test that an operator can list its tables, containerd + runc + the CNI plugins for the containerd runtime's tests, docker-registry for image pulls, curl for install.sh's tests, and Chromium with a text font for the
# dashboard's browser tests (web/browsertest; fonts-liberation so screenshots show readable text). Used by
# `make test`. As root on Debian/Ubuntu it installs the missing packages; otherwise it prints the command.
set -euo pipefail

missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v nsenter >/dev/null 2>&1 || missing+=(util-linux)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
# The containerd runtime's tests (agents/runtime/cri) start a real containerd with runc and the CNI plugins.
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
# Image pulls are tested against a real registry (agents/runtime/cri/registrytest): the CNCF distribution registry.
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v curl >/dev/null 2>&1 || missing+=(curl ca-certificates)
# The conformance suite's images (conformance/images) are made of Debian's programs: busybox, dig, nc, socat, bash,
# ip, ss, getent and curl, with their libraries; nginx comes from its .deb (apt-get download, dpkg-deb).
# (busybox-static: the images need a busybox that runs without libraries; ldd fails on a static program.)
bb="$(command -v busybox || true)"
{ [ -n "$bb" ] && ! ldd "$bb" >/dev/null 2>&1; } || missing+=(busybox-static)
command -v dig >/dev/null 2>&1 || missing+=(bind9-dnsutils)
[ -x /usr/bin/nc.openbsd ] || missing+=(netcat-openbsd)
command -v socat >/dev/null 2>&1 || missing+=(socat)
command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)
# web/browsertest also accepts chromium-browser or google-chrome (or $WHEELHOUSE_CHROMIUM); Debian's package is chromium.
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 ||
  command -v google-chrome >/dev/null 2>&1 || [ -n "${WHEELHOUSE_CHROMIUM:-}" ] || missing+=(chromium)
[ "$(dpkg-query -W -f='${Status}' fonts-liberation 2>/dev/null)" = "install ok installed" ] ||
  [ -n "$(fc-list 'Liberation Sans' 2>/dev/null)" ] || missing+=(fonts-liberation)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "The tests need: ${missing[*]}. Install them, then run this again:" >&2
  echo "    sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "Installing ${missing[*]} (apt-get install)..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
