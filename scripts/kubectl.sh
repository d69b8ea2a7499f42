#!/usr/bin/env bash
# Builds, when needed, the pinned upstream kubectl that the e2e tests drive, and prints the absolute path of the
# cached binary on stdout (progress goes to stderr). Used by `make kubectl` and `make test`.
#
# The version is whatever k8s.io/kubectl version tools/kubectl/go.mod requires (module v0.X.Y is Kubernetes v1.X.Y).
# The binary is cached as .cache/bin/kubectl-<hash>/kubectl, where the hash covers tools/kubectl/{go.mod,go.sum,main.go},
# the build flags and `go version`: change any of them and the next run rebuilds, otherwise the cached file is reused
# at once. The file itself is named plain `kubectl` because kubectl puts the base name of argv[0] in its User-Agent
# ("kubectl/v1.37.2 (linux/amd64) kubernetes/unknown"), which servers use as the default field manager, so the tests
# see what a real kubectl sends. .cache/bin/kubectl is kept as a symlink to the current one for running it by hand.
#
# Dependencies come only from the committed go.sum (-mod=readonly): a missing or wrong sum is an error, never a
# silent update. The build goes into a temporary directory renamed into place, so two runs racing are harmless.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/tools/kubectl"
out="$root/.cache/bin"
go="${GO:-go}"

# The tools module is built on its own: no go.work from outside, no toolchain switch, and -mod=readonly on every
# command (it overrides a -mod=mod in GOFLAGS). Static, like upstream's release builds.
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0

info="$(cd "$src" && "$go" list -mod=readonly -m -f '{{.Version}} {{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubectl)"
read -r modversion released <<<"$info"
case "$modversion" in
  v0.*.*) ;;
  *) echo "kubectl.sh: unexpected k8s.io/kubectl version $modversion in tools/kubectl/go.mod" >&2; exit 1 ;;
esac
version="v1.${modversion#v0.}" # v0.37.2 -> v1.37.2
minor="${version#v1.}"
minor="${minor%%.*}"

# There is no upstream commit to name (the module proxy does not carry it), so gitCommit is left empty rather than
# invented; buildDate is the module's release time so the flags, and hence the cache key, stay stable.
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitCommit= -X $pkg.gitTreeState=clean -X $pkg.buildDate=$released"
done
buildflags="-mod=readonly -trimpath -buildvcs=false CGO_ENABLED=$CGO_ENABLED"

hash="$(
  {
    cat "$src/go.mod" "$src/go.sum" "$src/main.go"
    printf '%s\n' "$ldflags" "$buildflags"
    "$go" version
  } | sha256sum | cut -c1-16
)"
dir="$out/kubectl-$hash"
bin="$dir/kubectl"

if [ ! -x "$bin" ]; then
  [ -d "$dir" ] || rm -f "$dir" # a plain file there is never ours: builds only ever land as directories
  mkdir -p "$out"
  echo "building kubectl $version (takes ~1-3 minutes cold)" >&2
  tmp="$(mktemp -d "$out/.kubectl-$hash.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$src" && "$go" build -mod=readonly -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/kubectl" .)
  chmod 0755 "$tmp" "$tmp/kubectl"
  # rename(2) of the directory is atomic; if a racing run renamed its copy first, ours is dropped.
  if ! mv -T "$tmp" "$dir" 2>/dev/null && [ ! -x "$bin" ]; then
    echo "kubectl.sh: could not move the build into $dir (a stray directory? remove it and retry)" >&2
    exit 1
  fi
  rm -rf "$tmp"
  trap - EXIT
  # Drop builds from older inputs (each is ~60 MB); the current one is never touched.
  find "$out" -maxdepth 1 -name 'kubectl-*' ! -name "kubectl-$hash" -exec rm -rf {} +
  echo "built $bin" >&2
fi

# Repoint the stable name atomically (a new symlink renamed over the old one) only when it is stale.
if [ "$(readlink "$out/kubectl" 2>/dev/null || true)" != "kubectl-$hash/kubectl" ]; then
  link="$(mktemp -u "$out/.kubectl-link.XXXXXX")"
  ln -s "kubectl-$hash/kubectl" "$link"
  mv -Tf "$link" "$out/kubectl"
fi

echo "$bin"
