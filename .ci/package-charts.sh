#!/usr/bin/env bash
# Packages the Helm charts (install/chart) for a release of VERSION into OUTDIR,
# with the chart version, appVersion and the image listed for mirroring all set
# to VERSION, then lints the packages. `make release-snapshot` runs it with the
# snapshot's version; a release pushes the packages to an OCI registry
# (.github/workflows/release.yml).
#
#   .ci/package-charts.sh VERSION OUTDIR
set -euo pipefail
version=${1:?usage: package-charts.sh VERSION OUTDIR}
out=${2:?usage: package-charts.sh VERSION OUTDIR}
repo="$(cd "$(dirname "$0")/.." && pwd)"
helm=$("$repo/.ci/tools.sh" helm)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
for chart in pinniped-crds pinniped; do
	cp -r "$repo/install/chart/$chart" "$work/"
	# The image a mirror must copy is this release's, not the repository's "latest".
	sed -i "s|image: ghcr.io/pinniped-kit/pinniped-agent:latest|image: ghcr.io/pinniped-kit/pinniped-agent:${version#v}|" "$work/$chart/Chart.yaml"
	"$helm" package "$work/$chart" --version "${version#v}" --app-version "${version#v}" -d "$out" >/dev/null
	"$helm" lint --strict "$out/$chart-${version#v}.tgz" >/dev/null
done
echo "charts: $(cd "$out" && ls ./*.tgz | tr '\n' ' ')"
