#!/usr/bin/env bash
# Builds the pinned developer tools from the Go module proxy into a cache
# outside the repository, keyed by version, and prints the binary's path.
# Only the first call for a version pays for the build.
#
#   .ci/tools.sh golangci-lint     -> path of the binary
set -euo pipefail

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
if [ ! -x "$bin" ]; then
  echo "building $name $ver (first run only; cached in $dir)" >&2
  mkdir -p "$dir"
  # The lock keeps heavy builds from running side by side on a 2-core machine.
  GOBIN="$dir" GOFLAGS=-mod=mod CGO_ENABLED=0 flock /tmp/pinniped-heavy-build.lock \
    go install "$pkg@$ver" >&2
fi
echo "$bin"
