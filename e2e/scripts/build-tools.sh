#!/usr/bin/env bash
# Builds the test bed's pinned toolchain from the Go module proxy into a cache
# outside the repository: one Kubernetes minor's binaries (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl) from
# e2e/tools/kube/<minor>, and what every version shares (etcd and pause from
# e2e/tools; Dex, the test Supervisor and oidcop from modules of their own).
# Each part is cached under its own version and a hash of its module, so only
# the first run of a version pays its build (10-14 minutes on 2 cores).
#
# Prints the binary directory on the last line of stdout.
#   PINNIPED_E2E_KUBE_VERSION  the Kubernetes minor, e.g. 1.35 (default: the
#                              newest, $default_minor below; see e2e/tools/kube)
#   PINNIPED_E2E_CACHE         cache root (default $HOME/.cache/pinniped-e2e)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=.ci/lib.sh
. "$here/../.ci/lib.sh"
heavy="$here/../.ci/heavy-build.sh"
tools="$here/tools"
cache="${PINNIPED_E2E_CACHE:-$HOME/.cache/pinniped-e2e}"
# Root runs this toolchain (kubelet, kube-apiserver, etcd...): its cache, and
# the Go caches the build writes into, must be root's alone (.ci/lib.sh).
pinniped_require_root_env build-tools.sh "the toolchain cache=$cache"
# As root, a umask that lets group or others write would make the toolchain
# fail the check at the end (and rightly): build it 0755 whatever the caller's.
if [[ $(id -u) == 0 ]]; then umask 022; fi
# The bed's Kubernetes when none is asked for: the newest minor.
default_minor=1.37
minor="${PINNIPED_E2E_KUBE_VERSION:-$default_minor}"
minor="${minor#v}"
kube="$tools/kube/$minor"
if [[ ! $minor =~ ^1\.[0-9]+$ || ! -f $kube/go.mod || ! -f $kube/go.sum ]]; then
	echo "build-tools.sh: PINNIPED_E2E_KUBE_VERSION=$minor: no such toolchain; the minors are: $(cd "$tools/kube" && echo 1.* | tr ' ' '\n' | sort -V | tr '\n' ' ')" >&2
	echo "(add one with e2e/scripts/kube-module.sh v1.<minor>.<patch>)" >&2
	exit 2
fi
k8s_version="$(cd "$kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
# Any change of the pinned versions gives a new directory. Our own small mains (dex, supervisor, oidcop, pause)
# are rebuilt in place when their sources change (see the .stamp files).
shared="$cache/shared/$(cd "$tools" && cat go.mod go.sum | sha256sum | cut -c1-12)"
bin="$cache/bin/$k8s_version-$(cd "$kube" && cat go.mod go.sum | sha256sum | cut -c1-12)"
mkdir -p "$bin" "$shared"
# One build of a toolchain at a time: make test starts this early in the
# background on idle CPU (.ci/test.sh), and e2e/run.sh's own call then waits
# here for it to finish (getting the CPU the wait leaves free) instead of
# building the same binaries again beside it. A lock per version and one for
# the shared tools (always taken in that order): a version already built is
# not held up by another one's build.
exec 9>"$bin/.build.lock"
flock 9

# Heavy builds take turns on this 2-core machine: each build below runs under
# the heavy-build lock (.ci/heavy-build.sh).
# The version Kubernetes' own release process would stamp (kubectl version,
# the API server's /version), from the module's tag.
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor#1.}"

build() { # out-dir name module-dir package ldflags [source-dir]
	local out=$1 name=$2 dir=$3 pkg=$4 ldflags=$5 src=${6:-} stamp=""
	if [[ -n "$src" ]]; then
		stamp="$(cd "$src" && cat $(find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) | sort) | sha256sum | cut -c1-16)"
	fi
	# Only a regular file the build wrote counts (-x alone follows links).
	if [[ -f "$out/$name" && ! -L "$out/$name" && -x "$out/$name" && "$(cat "$out/.$name.stamp" 2>/dev/null)" == "$stamp" ]]; then return 0; fi
	echo "building $name ($pkg)" >&2
	local start=$SECONDS
	# Static binaries: the kube-controller-manager and pause binaries go into images
	# with nothing else in them.
	(cd "$dir" && CGO_ENABLED=0 "$heavy" go build -trimpath -ldflags "$ldflags" -o "$out/.$name.tmp" "$pkg")
	mv "$out/.$name.tmp" "$out/$name"
	echo "$stamp" >"$out/.$name.stamp"
	echo "built $name in $((SECONDS - start))s" >&2
}

for cmd in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy \
	kubectl; do # kubectl at the cluster's version, so tests never depend on (or skew against) a host kubectl
	build "$bin" "$cmd" "$kube" "k8s.io/kubernetes/cmd/$cmd" "$kube_ldflags"
done
exec 8>"$shared/.build.lock"
flock 8
build "$shared" etcd "$tools" go.etcd.io/etcd/server/v3 "-s -w"
build "$shared" pause "$tools" ./cmd/pause "-s -w" "$tools/cmd/pause"
# Dex has its own module: its dependencies are newer than Kubernetes' and must not
# change the versions Kubernetes is built with.
build "$shared" dex "$tools/dex" . "-s -w" "$tools/dex"
# The test double of upstream Pinniped's Supervisor (fosite-based), also its own module.
build "$shared" supervisor "$tools/supervisor" . "-s -w" "$tools/supervisor"
# A second OpenID provider with token revocation (zitadel/oidc's example OP), its own module.
build "$shared" oidcop "$tools/oidcop" . "-s -w" "$tools/oidcop"
# The shared binaries join each version's directory as hard links (one
# cache, one file system), so a bed finds its whole toolchain in one place.
pinniped_require_root_owned_tree build-tools.sh "the shared tools" "$shared"
for name in etcd pause dex supervisor oidcop; do
	if [[ -L "$shared/$name" ]]; then
		echo "build-tools.sh: $shared/$name is a symbolic link, not a binary this script built; remove $shared to have it rebuilt" >&2
		exit 1
	fi
	# Linked again only when it is another file: a running bed keeps its
	# binaries in place.
	if [[ ! "$bin/$name" -ef "$shared/$name" ]]; then
		ln -f "$shared/$name" "$bin/$name"
	fi
done

# Checked when found as well as when built: the cache may be older than
# the check, or changed since.
pinniped_require_root_owned_tree build-tools.sh "the toolchain" "$bin"

# Stable names for people and scripts: current-<minor> for each minor,
# current for the default one (what `testbed up` uses unless told).
ln -sfn "$bin" "$cache/bin/current-$minor"
if [[ $minor == "$default_minor" ]]; then
	ln -sfn "$bin" "$cache/bin/current"
fi
echo "$bin"
