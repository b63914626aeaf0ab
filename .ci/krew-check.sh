#!/usr/bin/env bash
# Validates the release snapshot's krew plugin manifest (dist/krew/pinniped.yaml)
# with krew's own validator, which installs the plugin from each platform's
# archive with the real `kubectl krew` and checks it holds a license file.
# The archives are served from dist/ on 127.0.0.1 inside a network namespace
# of this script's own: what it runs has no network but that loopback.
#
#   .ci/krew-check.sh [DIST]      (run by `make release-snapshot`; needs root for the namespace)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dist=$(cd "${1:-$repo/dist}" && pwd)
if [[ $(id -u) != 0 ]]; then
	echo "krew-check: needs root (it runs krew in a network namespace of its own)" >&2
	exit 1
fi
validator=$("$repo/.ci/tools.sh" validate-krew-manifest)
krew=$("$repo/.ci/tools.sh" krew)
# kubectl at the test bed's pinned version (built once, cached).
kubectl="$("$repo/e2e/scripts/build-tools.sh" | tail -n1)/kubectl"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$repo" && go build -o "$work/krewcheck" ./e2e/cmd/krewcheck)
unshare --net -- sh -c 'ip link set lo up && exec "$@"' sh \
	"$work/krewcheck" -dist "$dist" -validator "$validator" -krew "$krew" -kubectl "$kubectl"
