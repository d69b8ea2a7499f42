#!/usr/bin/env bash
# Builds, when needed, upstream Kubernetes' end-to-end test binary (e2e.test, whose [Conformance] tests are the suite
# every certified distribution passes) and prints the absolute path of the cached binary on stdout (progress goes to
# stderr). Used by `make e2e-test`, and by `make conformance` to run the suite against Wheelhouse.
#
# Beside e2e.test, in the same directory, it builds the programs a run needs from the same module versions:
# `agnhost` (test/images/agnhost, the suite's all-purpose test image program) and `nnp` (test/images/nonewprivs,
# which prints its effective user: the no-new-privileges tests' image), both put into images by
# conformance/images, and `ginkgo` (the CLI that runs e2e.test as parallel processes).
#
# The version is whatever k8s.io/kubernetes version tools/conformance/go.mod requires; the binary is the test binary of
# its package k8s.io/kubernetes/test/e2e, compiled with `go test -c` exactly as upstream's `make WHAT=test/e2e/e2e.test`
# does. It is cached as .cache/bin/e2e.test-<hash>/e2e.test, where the hash covers tools/conformance/{go.mod,go.sum},
# this script (and so the build flags) and `go version`: change any of them and the next run rebuilds, otherwise the
# cached file is reused at once. .cache/bin/e2e.test is kept as a symlink to the current one for running it by hand.
#
# Dependencies come only from the committed go.sum (-mod=readonly): a missing or wrong sum is an error, never a
# silent update. The build goes into a temporary directory renamed into place, so two runs racing are harmless.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/tools/conformance"
out="$root/.cache/bin"
go="${GO:-go}"

# The tools module is built on its own: no go.work from outside, no toolchain switch, and -mod=readonly on every
# command (it overrides a -mod=mod in GOFLAGS). Static, like upstream's release builds.
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0

info="$(cd "$src" && "$go" list -mod=readonly -m -f '{{.Version}} {{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)"
read -r version released <<<"$info"
case "$version" in
  v1.*.*) ;;
  *) echo "e2e-test.sh: unexpected k8s.io/kubernetes version $version in tools/conformance/go.mod" >&2; exit 1 ;;
esac
minor="${version#v1.}"
minor="${minor%%.*}"

# The suite prints these with --version and logs them at start; as for kubectl, gitCommit is left empty rather than
# invented (the module proxy does not carry it) and buildDate is the module's release time, so the flags stay stable.
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitCommit= -X $pkg.gitTreeState=clean -X $pkg.buildDate=$released"
done

hash="$(
  {
    cat "$src/go.mod" "$src/go.sum" "${BASH_SOURCE[0]}"
    "$go" version
  } | sha256sum | cut -c1-16
)"
dir="$out/e2e.test-$hash"
bin="$dir/e2e.test"

if [ ! -x "$bin" ]; then
  [ -d "$dir" ] || rm -f "$dir" # a plain file there is never ours: builds only ever land as directories
  mkdir -p "$out"
  echo "building e2e.test $version (takes ~10-20 minutes cold)" >&2
  tmp="$(mktemp -d "$out/.e2e.test-$hash.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # The package is a dependency, so `go test -c` names it by import path; its test binary is the suite. The build
  # is large (some 2,800 packages), so it runs at a lower priority to leave the machine usable meanwhile.
  (cd "$src" && nice -n 10 "$go" test -c -mod=readonly -trimpath -buildvcs=false -ldflags "$ldflags" \
    -o "$tmp/e2e.test" k8s.io/kubernetes/test/e2e)
  (cd "$src" && nice -n 10 "$go" build -mod=readonly -trimpath -buildvcs=false -ldflags "$ldflags" \
    -o "$tmp/agnhost" k8s.io/kubernetes/test/images/agnhost)
  (cd "$src" && nice -n 10 "$go" build -mod=readonly -trimpath -buildvcs=false -ldflags "-s -w" \
    -o "$tmp/nnp" k8s.io/kubernetes/test/images/nonewprivs)
  (cd "$src" && nice -n 10 "$go" build -mod=readonly -trimpath -buildvcs=false -ldflags "-s -w" \
    -o "$tmp/ginkgo" github.com/onsi/ginkgo/v2/ginkgo)
  chmod 0755 "$tmp" "$tmp/e2e.test" "$tmp/agnhost" "$tmp/nnp" "$tmp/ginkgo"
  # rename(2) of the directory is atomic; if a racing run renamed its copy first, ours is dropped.
  if ! mv -T "$tmp" "$dir" 2>/dev/null && [ ! -x "$bin" ]; then
    echo "e2e-test.sh: could not move the build into $dir (a stray directory? remove it and retry)" >&2
    exit 1
  fi
  rm -rf "$tmp"
  trap - EXIT
  # Drop builds from older inputs (each is ~120 MB); the current one is never touched.
  find "$out" -maxdepth 1 -name 'e2e.test-*' ! -name "e2e.test-$hash" -exec rm -rf {} +
  echo "built $bin" >&2
fi

# Repoint the stable name atomically (a new symlink renamed over the old one) only when it is stale.
if [ "$(readlink "$out/e2e.test" 2>/dev/null || true)" != "e2e.test-$hash/e2e.test" ]; then
  link="$(mktemp -u "$out/.e2e.test-link.XXXXXX")"
  ln -s "e2e.test-$hash/e2e.test" "$link"
  mv -Tf "$link" "$out/e2e.test"
fi

echo "$bin"
