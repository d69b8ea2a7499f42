#!/usr/bin/env bash
# Makes sure PostgreSQL server binaries (initdb, postgres) are on this machine. Used by `make run` and `make test`.
# As root on Debian/Ubuntu it installs the distribution's `postgresql` package without creating or starting the
# distribution's own cluster (Wheelhouse runs its own, in its data directory). Otherwise it prints the command.
set -euo pipefail

have_binaries() {
  if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then return 0; fi
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && return 0
  done
  return 1
}

if have_binaries; then exit 0; fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "PostgreSQL server binaries are missing. Install them, then run this again:" >&2
  echo "    sudo apt-get update && sudo apt-get install -y postgresql" >&2
  exit 1
fi

echo "Installing the PostgreSQL server package (apt-get install postgresql)..." >&2
# Do not create or start the distribution's default cluster: we only want the binaries.
mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/wheelhouse.conf
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql >/dev/null
have_binaries || { echo "postgresql installed but initdb/postgres still not found" >&2; exit 1; }
