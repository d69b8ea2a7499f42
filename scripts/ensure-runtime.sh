#!/usr/bin/env bash
# Makes sure the container runtime of `make run`'s local node is on this machine: containerd, runc and the CNI
# plugins (the agent runs its own containerd when no system one answers). As root on Debian/Ubuntu it installs the
# missing packages; otherwise it says so and `make run` goes on with the process runtime (pods that give a command
# run as host processes; container images do not).
set -euo pipefail

missing=()
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || [ -x /opt/cni/bin/bridge ] || missing+=(containernetworking-plugins)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "The local node runs container images with: ${missing[*]}. Without them it uses the process runtime." >&2
  echo "To install them:  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 0
fi
echo "Installing ${missing[*]} for the local node's container runtime (apt-get install)..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
