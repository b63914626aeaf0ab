#!/usr/bin/env bash
# Builds the pinned developer tools from the Go module proxy into a cache
# outside the repository, keyed by version, and prints the binary's path.
# Only the first call for a version pays for the build.
#
#   .ci/tools.sh golangci-lint     -> path of the binary
#
# As root, the cache, the Go caches the build writes into, and the binary
# itself must be root's alone, or it refuses (.ci/lib.sh): root runs what it
# prints, and a binary another account can replace is that account's program.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=.ci/lib.sh
. "$here/lib.sh"

declare -A PKG=(
  [golangci-lint]=github.com/golangci/golangci-lint/v2/cmd/golangci-lint
  [goreleaser]=github.com/goreleaser/goreleaser/v2
  [controller-gen]=sigs.k8s.io/controller-tools/cmd/controller-gen
  [helm]=helm.sh/helm/v4/cmd/helm
  [krew]=sigs.k8s.io/krew/cmd/krew
  [validate-krew-manifest]=sigs.k8s.io/krew/cmd/validate-krew-manifest
  [cyclonedx-gomod]=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
  [cosign]=github.com/sigstore/cosign/v3/cmd/cosign
)
declare -A VERSION=(
  [golangci-lint]=v2.15.0
  [goreleaser]=v2.15.1
  [controller-gen]=v0.19.0
  [helm]=v4.3.1
  [krew]=v0.4.3
  [validate-krew-manifest]=v0.4.3
  [cyclonedx-gomod]=v1.10.0
  [cosign]=v3.1.3
)

name=${1:?usage: tools.sh golangci-lint|goreleaser|controller-gen|helm|krew|validate-krew-manifest|cyclonedx-gomod|cosign}
pkg=${PKG[$name]:?unknown tool $name}
ver=${VERSION[$name]}
cache=${PINNIPED_TOOLS_CACHE:-$HOME/.cache/pinniped-tools}
dir="$cache/$name@$ver"
bin="$dir/$(basename "$pkg")"
[ "$name" = goreleaser ] && bin="$dir/goreleaser"
pinniped_require_root_env tools.sh "the tools cache=$cache"
if [ ! -x "$bin" ]; then
  echo "building $name $ver (first run only; cached in $dir)" >&2
  # As root, a umask that lets group or others write would make the cache
  # fail the check below (and rightly): build it 0755 whatever the caller's.
  if [ "$(id -u)" = 0 ]; then umask 022; fi
  mkdir -p "$dir"
  # The lock keeps heavy builds from running side by side on a 2-core machine.
  GOBIN="$dir" GOFLAGS=-mod=mod CGO_ENABLED=0 "$here/heavy-build.sh" \
    go install "$pkg@$ver" >&2
fi
# Checked when found as well as when built: the cache may be older than
# this check, or changed since.
pinniped_require_trusted tools.sh "$name's binary=$bin"
echo "$bin"
