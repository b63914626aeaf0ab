#!/usr/bin/env bash
# `make release-snapshot`: a rehearsal of the release, every artifact built
# and checked, nothing published.
#   1. goreleaser runs a real release (not --snapshot, so every step runs as
#      it will at release) of a throwaway tag on a temporary clone of this
#      tree (uncommitted changes included), in a network namespace with
#      nothing but loopback: archives, checksums, an SBOM per binary
#      (cyclonedx-gomod), the krew manifest and the Homebrew cask; checksums.txt
#      signed by .ci/cosign-sign.sh with a key made for this run and thrown
#      away; the GitHub release step switched off (PINNIPED_RELEASE_REHEARSAL);
#      and ko's multi-arch agent image with its SBOMs, pushed to a registry of
#      e2e/cmd/imagecheck's own, which answers for ghcr.io and cgr.dev there
#      (a stand-in base) and then checks the image it received;
#   2. the signature checked as a user would (cosign verify-blob), then every
#      file in checksums.txt against its sum, and every binary's SBOM;
#   3. the Helm charts packaged with the rehearsal's version (dist/charts);
#   4. the krew manifest validated by krew's own validator (.ci/krew-check.sh).
# The artifacts end up in dist/. Needs root for the network namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) != 0 ]]; then
	echo "release-snapshot: needs root (the rehearsal runs in a network namespace of its own)" >&2
	exit 1
fi
# shellcheck source=.ci/lib.sh
. .ci/lib.sh
# Refused before anything runs: a HOME or Go cache of another account's
# would get root-owned module directories (go mod download, below) and hand
# root the tools it runs (.ci/lib.sh, README.md "Running the checks as root").
pinniped_require_root_env release-snapshot
tools=.ci/tools.sh
goreleaser=$("$tools" goreleaser)
cosign=$("$tools" cosign)
cdx=$("$tools" cyclonedx-gomod)

work=$(mktemp -d)
# dist/ is the developer's, handed back (to the owner of the repository) by
# finish, as the last thing this script does however it ends. Every step
# after the rehearsal writes into dist/ as root (dist/charts), so a hand-back
# any earlier leaves root's files behind and the developer's `make clean`
# fails on them; and a failure must hand back what was made as well.
owner=$(stat -c %u:%g .)
made_dist=
finish() {
	local rc=$?
	rm -rf "$work" || true
	# -R without -L: links inside dist/ are changed themselves, never followed.
	if [[ -n $made_dist && -d dist && ! -L dist ]]; then
		chown -R "$owner" dist || rc=1
	fi
	exit "$rc"
}
trap finish EXIT
keys=$work/keys
mkdir -m 0700 "$keys"
# An empty password: the key lives only as long as this script.
export COSIGN_PASSWORD=
(cd "$keys" && unshare --net -- "$cosign" generate-key-pair >/dev/null)
# Pure Go, so names resolve by the namespace's /etc/hosts whatever the host's nsswitch says.
CGO_ENABLED=0 go build -o "$work/imagecheck" ./e2e/cmd/imagecheck

# The tree to release: HEAD, or a commit of the working tree (tracked and
# untracked files, as `git add -A` would take them). Made in the clone, with
# an index of its own: this script runs as root, and must write nothing into
# the developer's repository.
head=$(git rev-parse HEAD)
src=$work/src
git clone --quiet --shared --no-checkout . "$src"
# git as it is here, with the clone's objects: this repository's own
# excludes and the settings that decide what counts as changed.
gitw=(git --git-dir="$src/.git" --work-tree="$PWD")
for key in core.fileMode core.autocrlf core.symlinks core.excludesFile core.ignoreCase; do
	if v=$(git config --get "$key"); then
		gitw+=(-c "$key=$v")
	fi
done
if [[ -f $(git rev-parse --git-path info/exclude) ]]; then
	cp "$(git rev-parse --git-path info/exclude)" "$src/.git/info/exclude"
fi
export GIT_INDEX_FILE=$work/index
"${gitw[@]}" read-tree "$head"
"${gitw[@]}" add -A
tree=$(git --git-dir="$src/.git" write-tree)
unset GIT_INDEX_FILE
commit=$head
if [[ $tree != "$(git --git-dir="$src/.git" rev-parse "$head^{tree}")" ]]; then
	commit=$(GIT_AUTHOR_NAME=rehearsal GIT_AUTHOR_EMAIL=rehearsal@localhost GIT_COMMITTER_NAME=rehearsal \
		GIT_COMMITTER_EMAIL=rehearsal@localhost git --git-dir="$src/.git" commit-tree --no-gpg-sign -p "$head" \
		-m "release rehearsal of a working tree" "$tree")
	echo "release-snapshot: rehearsing the working tree, uncommitted changes included" >&2
fi
git -C "$src" checkout --quiet --detach "$commit"
# A prerelease tag no release will ever have; krew wants semver (a g before
# the hash keeps an all-digit hash from reading as a number). Named to
# goreleaser outright: a real tag on the same commit must not win.
tag=v0.0.0-rehearsal.g$(git -C "$src" rev-parse --short=12 HEAD)
git -C "$src" update-ref "refs/tags/$tag" HEAD
version=${tag#v}
# Everything the build needs, fetched now: the release itself has no network.
(cd "$src" && go mod download)

printf '127.0.0.1 localhost\n127.0.0.1 ghcr.io cgr.dev\n' >"$work/hosts"
rc=0
(cd "$src" && unshare --net --mount -- sh -c 'ip link set lo up && mount --bind "$0" /etc/hosts && exec "$@"' "$work/hosts" \
	"$work/imagecheck" -version "$version" -cosign "$cosign" -- \
	env -u GORELEASER_PREVIOUS_TAG PATH="$(dirname "$cdx"):$PATH" PINNIPED_SIGN_KEY="$keys/cosign.key" \
	PINNIPED_RELEASE_REHEARSAL=1 GORELEASER_CURRENT_TAG="$tag" \
	"$goreleaser" release -f goreleaser.yaml --clean) || rc=$?
made_dist=1
rm -rf dist
if [[ -d $src/dist ]]; then
	# -T: onto dist itself, never into a directory a link named dist points at.
	mv -T "$src/dist" dist
fi
if ((rc != 0)); then
	[[ -d dist ]] && echo "release-snapshot: what the rehearsal made before it failed is in dist/" >&2
	echo "release-snapshot: the rehearsal failed (exit $rc)" >&2
	exit "$rc"
fi

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
# Each binary a user downloads is of its archive's flavour: the FIPS ones
# built with Go's FIPS 140-3 module v1.0.0, the others with none (the
# build settings Go recorded, go version -m's stdout). The tar.gz archives:
# the zips are Windows', which has the ordinary flavour alone.
fips_bins=0
unpacked="$work/unpacked"
for archive in dist/*.tar.gz; do
	d="$unpacked/$(basename "$archive" .tar.gz)"
	mkdir -p "$d"
	tar -xzf "$archive" -C "$d"
	while IFS= read -r bin; do
		if ! info=$(go version -m "$bin"); then
			echo "release-snapshot: ${bin#"$d"/} in $archive has no Go build information" >&2
			exit 1
		fi
		module=$(awk '$1 == "build" && index($2, "GOFIPS140=") == 1 { print substr($2, 11) }' <<<"$info")
		case $archive in
		dist/*-fips_*)
			[[ $module == v1.0.0-* ]] || { echo "release-snapshot: ${bin#"$d"/} in $archive (the FIPS flavour) was built with GOFIPS140=${module:-nothing}" >&2; exit 1; }
			fips_bins=$((fips_bins + 1))
			;;
		*) [[ -z $module ]] || { echo "release-snapshot: ${bin#"$d"/} in $archive (the ordinary flavour) was built with GOFIPS140=$module" >&2; exit 1; } ;;
		esac
	done < <(find "$d" -type f -name 'pinniped*')
done
rm -rf "$unpacked"
# goreleaser.yaml: the CLI's two binaries and the agent, for amd64 and arm64.
if [[ $fips_bins -ne 6 ]]; then
	echo "release-snapshot: $fips_bins binaries of the FIPS flavour in the archives, want 6" >&2
	exit 1
fi
echo "release-snapshot: checksums.txt signed and verified; every file matches its sum; each of the $bins binaries has its SBOM; the $fips_bins in the FIPS flavour's archives are built with its module, the others not"

.ci/package-charts.sh "$version" dist/charts
.ci/krew-check.sh dist
