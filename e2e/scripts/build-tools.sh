#!/usr/bin/env bash
# Builds the test bed's pinned toolchain (Kubernetes v1.34.x, etcd, Dex, the test Supervisor, oidcop, pause) from the
# e2e/tools Go module into a cache outside the repository, keyed by the toolchain's
# version and a hash of the tools module, so only the first run pays the ~8 minute build.
#
# Prints the binary directory on the last line of stdout.
#   PINNIPED_E2E_CACHE   cache root (default $HOME/.cache/pinniped-e2e)
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
k8s_version="$(cd "$tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
# Any change of the pinned versions gives a new directory. Our own small mains (dex, supervisor, oidcop, pause)
# are rebuilt in place when their sources change (see the .stamp files).
key="$(cd "$tools" && cat go.mod go.sum | sha256sum | cut -c1-12)"
bin="$cache/bin/$k8s_version-$key"
mkdir -p "$bin"
# One build of a toolchain at a time: make test starts this early in the
# background on idle CPU (.ci/test.sh), and e2e/run.sh's own call then waits
# here for it to finish (getting the CPU the wait leaves free) instead of
# building the same binaries again beside it.
exec 9>"$bin/.build.lock"
flock 9

# Heavy builds take turns on this 2-core machine: each build below runs under
# the heavy-build lock (.ci/heavy-build.sh).
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$k8s_version" | cut -d. -f2)"

build() { # name module-dir package [source-dir]
	local name=$1 dir=$2 pkg=$3 src=${4:-} stamp=""
	if [[ -n "$src" ]]; then
		stamp="$(cd "$src" && cat $(find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) | sort) | sha256sum | cut -c1-16)"
	fi
	if [[ -x "$bin/$name" && "$(cat "$bin/.$name.stamp" 2>/dev/null)" == "$stamp" ]]; then return 0; fi
	echo "building $name ($pkg)" >&2
	local start=$SECONDS
	# Static binaries: the kube-controller-manager and pause binaries go into images
	# with nothing else in them.
	(cd "$dir" && CGO_ENABLED=0 "$heavy" go build -trimpath -ldflags "$ldflags" -o "$bin/.$name.tmp" "$pkg")
	mv "$bin/.$name.tmp" "$bin/$name"
	echo "$stamp" >"$bin/.$name.stamp"
	echo "built $name in $((SECONDS - start))s" >&2
}

build etcd "$tools" go.etcd.io/etcd/server/v3
build kube-apiserver "$tools" k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager "$tools" k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler "$tools" k8s.io/kubernetes/cmd/kube-scheduler
build kubelet "$tools" k8s.io/kubernetes/cmd/kubelet
build kube-proxy "$tools" k8s.io/kubernetes/cmd/kube-proxy
# kubectl at the cluster's version, so tests never depend on (or skew against) a host kubectl.
build kubectl "$tools" k8s.io/kubernetes/cmd/kubectl
build pause "$tools" ./cmd/pause "$tools/cmd/pause"
# Dex has its own module: its dependencies are newer than Kubernetes' and must not
# change the versions Kubernetes is built with.
build dex "$tools/dex" . "$tools/dex"
# The test double of upstream Pinniped's Supervisor (fosite-based), also its own module.
build supervisor "$tools/supervisor" . "$tools/supervisor"
# A second OpenID provider with token revocation (zitadel/oidc's example OP), its own module.
build oidcop "$tools/oidcop" . "$tools/oidcop"

# Checked when found as well as when built: the cache may be older than
# the check, or changed since.
pinniped_require_root_owned_tree build-tools.sh "the toolchain" "$bin"

# A stable name for "the current toolchain", for people and scripts.
ln -sfn "$bin" "$cache/bin/current"
echo "$bin"
