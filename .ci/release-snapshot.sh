#!/usr/bin/env bash
# `make release-snapshot`: every release artifact built locally and checked,
# nothing published.
#   1. goreleaser --snapshot: archives, checksums, an SBOM per binary
#      (cyclonedx-gomod), the krew manifest and the Homebrew cask; checksums.txt
#      signed by .ci/cosign-sign.sh with a key made for this run and thrown away;
#   2. the signature checked as a user would (cosign verify-blob), then every
#      file in checksums.txt against its sum, and every binary's SBOM;
#   3. the Helm charts packaged with the snapshot's version (dist/charts);
#   4. the krew manifest validated by krew's own validator (.ci/krew-check.sh).
# Needs root for the network namespaces that keep signing and krew offline.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=.ci/tools.sh
goreleaser=$("$tools" goreleaser)
cosign=$("$tools" cosign)
cdx=$("$tools" cyclonedx-gomod)

keys=$(mktemp -d)
trap 'rm -rf "$keys"' EXIT
# An empty password: the key lives only as long as this script.
export COSIGN_PASSWORD=
(cd "$keys" && unshare --net -- "$cosign" generate-key-pair >/dev/null)

PATH="$(dirname "$cdx"):$PATH" PINNIPED_SIGN_KEY="$keys/cosign.key" \
	"$goreleaser" release -f goreleaser.yaml --snapshot --clean --skip=publish,ko

# What a user runs (README): the signature, then the sums.
unshare --net -- "$cosign" verify-blob --key "$keys/cosign.pub" --insecure-ignore-tlog=true \
	--bundle dist/checksums.txt.sigstore.json dist/checksums.txt
(cd dist && sha256sum --check --quiet --strict checksums.txt)
# One SBOM per binary built, each a CycloneDX document naming this module,
# each in checksums.txt (so under the signature).
bins=$(find dist -mindepth 2 -maxdepth 2 -type f -path 'dist/pinniped*_*/pinniped*' | wc -l)
sboms=0
for sbom in dist/*.cdx.json; do
	[[ -f $sbom ]] || continue
	if ! grep -q '"bomFormat": *"CycloneDX"' "$sbom" || ! grep -q 'github.com/pinniped-kit/pinniped' "$sbom"; then
		echo "release-snapshot: $sbom is not a CycloneDX SBOM of this module" >&2
		exit 1
	fi
	sboms=$((sboms + 1))
done
# Everything a user downloads is in the signed list.
listed=$(awk '{print $2}' dist/checksums.txt)
for f in dist/*.tar.gz dist/*.zip dist/*.cdx.json; do
	[[ -f $f ]] || continue
	grep -qxF "${f#dist/}" <<<"$listed" || { echo "release-snapshot: $f is not in checksums.txt, so not signed" >&2; exit 1; }
done
if [[ $sboms -eq 0 || $sboms -ne $bins ]]; then
	echo "release-snapshot: $sboms SBOMs for $bins binaries" >&2
	exit 1
fi
echo "release-snapshot: checksums.txt signed and verified; every file matches its sum; each of the $bins binaries has its SBOM"

version=$(grep -o '"version": *"[^"]*"' dist/metadata.json | head -1 | sed 's/.*: *"\(.*\)"/\1/')
test -n "$version"
.ci/package-charts.sh "$version" dist/charts
.ci/krew-check.sh dist
