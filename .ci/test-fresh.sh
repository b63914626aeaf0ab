#!/usr/bin/env bash
# `make test-fresh`: runs the README's test command as a newcomer would, from a clean
# clone of HEAD with an empty HOME, module cache, build cache and tool caches, so a
# failure that only an empty cache shows (a tool's download lines read as output, a
# module nobody fetched, a tool nobody built) shows here before it shows to a newcomer.
#
# It reuses nothing the tests depend on, with one exception it says out loud: the test
# bed's Kubernetes toolchain (kube-apiserver, kubelet, etcd, Dex; ~15 minutes cold),
# which is built from the Go modules in e2e/tools and keyed by their go.mod and go.sum.
#   PINNIPED_FRESH_TOOLCHAIN=reuse (default)  reuse $HOME/.cache/pinniped-e2e if it exists
#   PINNIPED_FRESH_TOOLCHAIN=cold             build the toolchain too, in the empty HOME
#   PINNIPED_FRESH_TOOLCHAIN=/some/dir        use that toolchain cache
# System packages (apt) are shared with the machine: the scripts install what is missing.
# PINNIPED_FRESH_KEEP=1 keeps the temporary directory for a look afterwards.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=.ci/lib.sh
. "$repo/.ci/lib.sh"
start=$SECONDS

if [[ -n "$(git -C "$repo" status --porcelain)" ]]; then
	echo "test-fresh: note: uncommitted changes are not tested; this runs the committed HEAD ($(git -C "$repo" rev-parse --short HEAD))" >&2
fi

tmp="$(mktemp -d /var/tmp/pinniped-fresh.XXXXXX)"
cleanup() {
	local rc=$?
	if [[ "${PINNIPED_FRESH_KEEP:-}" == 1 ]]; then
		echo "test-fresh: kept $tmp" >&2
	else
		# The module cache is read-only by design; the go tool knows how to remove it.
		GOMODCACHE="$tmp/gomodcache" go clean -modcache >/dev/null 2>&1 || true
		chmod -R u+w "$tmp" 2>/dev/null || true
		rm -rf "$tmp"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$tmp/home"
# The clone alone: the repository needs nothing beside it.
git clone --quiet --no-local "$repo" "$tmp/src/pinniped"

toolchain_note="built cold in the empty HOME"
case "${PINNIPED_FRESH_TOOLCHAIN:-reuse}" in
cold) ;;
reuse)
	if [[ -d "$HOME/.cache/pinniped-e2e/bin" ]]; then
		export PINNIPED_E2E_CACHE="$HOME/.cache/pinniped-e2e"
		toolchain_note="REUSED from $PINNIPED_E2E_CACHE (PINNIPED_FRESH_TOOLCHAIN=cold builds it too, ~15 min more)"
	fi
	;;
*)
	export PINNIPED_E2E_CACHE="$PINNIPED_FRESH_TOOLCHAIN"
	if [[ -d "$PINNIPED_E2E_CACHE/bin/current" ]]; then
		toolchain_note="REUSED from $PINNIPED_E2E_CACHE"
	else
		toolchain_note="built cold into $PINNIPED_E2E_CACHE (kept for later runs)"
	fi
	;;
esac
# The one thing outside $tmp the run uses: as root it runs that toolchain,
# so it must be root's alone (.ci/lib.sh). Refused here rather than by the
# run's own check, half an hour in. The caller's HOME and Go caches are not
# checked: the run points all of them into $tmp.
if [[ -n ${PINNIPED_E2E_CACHE:-} ]]; then
	pinniped_require_trusted test-fresh "the Kubernetes toolchain to reuse (PINNIPED_FRESH_TOOLCHAIN)=$PINNIPED_E2E_CACHE"
fi
echo "test-fresh: clean clone of $(git -C "$repo" rev-parse --short HEAD) in $tmp/src/pinniped" >&2
echo "test-fresh: empty HOME, GOMODCACHE, GOCACHE and tool caches; Kubernetes toolchain $toolchain_note" >&2

# Everything a cache could live under points into $tmp. GOFLAGS and GOPROXY stay as the
# machine has them: a newcomer's machine has its own.
status=0
(
	cd "$tmp/src/pinniped"
	env -u XDG_CACHE_HOME -u XDG_CONFIG_HOME -u XDG_DATA_HOME -u PINNIPED_TOOLS_CACHE \
		HOME="$tmp/home" GOPATH="$tmp/go" GOMODCACHE="$tmp/gomodcache" GOCACHE="$tmp/gocache" \
		bash .ci/run
) || status=$?

took=$((SECONDS - start))
if ((status == 0)); then
	echo "test-fresh: PASSED in $((took / 60)) min $((took % 60)) s (toolchain $toolchain_note)" >&2
else
	echo "test-fresh: FAILED (exit $status) after $((took / 60)) min $((took % 60)) s" >&2
fi
exit "$status"
