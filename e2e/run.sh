#!/usr/bin/env bash
# CI entry point for the end-to-end tests (what `make e2e` runs):
#   1. installs the system packages the test bed needs (apt, idempotent),
#   2. builds the pinned toolchain (Kubernetes, etcd, Dex; cached by version outside the repo),
#   3. runs `go test -tags e2e ./e2e/` once per profile (kubeadm, managed), both at once
#      on beds of their own; each run brings its bed up in TestMain and tears it down at the end,
#   4. tears the beds down again on any exit (a test binary killed by -timeout cannot).
#
# Environment: PINNIPED_E2E_PROFILES (default "kubeadm managed"), PINNIPED_E2E_SERIAL=1
# (one profile after the other), PINNIPED_E2E_TIMEOUT
# (go test -timeout per profile, default 50m: a hang guard; both profiles together take about 30 minutes, more on empty caches), PINNIPED_E2E_CACHE (toolchain cache),
# PINNIPED_E2E_FIPS=only (make e2e-fips: pinniped's binaries built as the FIPS flavour, run with
# fips140=only; e2e/framework.go, FIPSOnly), GO_TEST_FLAGS (extra flags, e.g. "-run TestDex").
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) != 0 ]]; then
	echo "e2e/run.sh: FAIL: the e2e test bed needs root (network namespace, bridges, cgroups, kubelet)" >&2
	exit 1
fi

start=$SECONDS
e2e/scripts/install-deps.sh
# Before anything is built: it refuses a HOME or Go cache that is not root's
# alone, where root's files would land in another account's (.ci/lib.sh).
bindir="$(e2e/scripts/build-tools.sh | tail -n1)"
export PINNIPED_E2E_BIN_DIR="$bindir"
echo "e2e/run.sh: dependencies and toolchain ready in $((SECONDS - start))s ($bindir)" >&2

tmp="$(mktemp -d)"
go build -o "$tmp/testbed" ./e2e/cmd/testbed
# The profiles run at once, each on its own bed (network namespace, node,
# cgroup root and state directory are per bed): most of a profile's time is
# spent waiting for credentials to expire, pods to roll and clocks to pass,
# so two beds on two cores finish in a little more than the longer one
# alone. PINNIPED_E2E_SERIAL=1 runs them one after another, as do the
# benchmarks (PINNIPED_E2E_LOAD, PINNIPED_E2E_SOAK), whose figures another
# bed beside them would skew.
serial=
if [[ ${PINNIPED_E2E_SERIAL:-} == 1 || -n ${PINNIPED_E2E_LOAD:-}${PINNIPED_E2E_SOAK:-} ]]; then
	serial=1
fi
# The first profile writes as it goes; the others to a log each, shown whole
# when they end (or when this script stops early), so no two profiles' lines
# interleave.
logs="${PINNIPED_E2E_ARTIFACTS:-/tmp/pinniped-e2e-logs}/run-$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$logs"
beds=()
pids=()
profiles=()
shown=()
show_logs() {
	local i
	for i in "${!profiles[@]}"; do
		if [[ $i -gt 0 && -z ${shown[$i]:-} && -f "$logs/${profiles[$i]}.log" ]]; then
			shown[i]=1
			echo "e2e/run.sh: === output of profile ${profiles[$i]} (bed ci-${profiles[$i]}; kept in $logs) ===" >&2
			cat "$logs/${profiles[$i]}.log"
		fi
	done
}
cleanup() {
	show_logs
	for name in "${beds[@]}"; do
		"$tmp/testbed" down --name "$name" >&2 || echo "e2e/run.sh: teardown of bed $name failed; run: go run ./e2e/cmd/testbed down --name $name" >&2
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
# Each profile runs in the background in a process group of its own (job
# control, on only while it starts), with no terminal for stdin: a signal
# to this script stops both test runs before their beds are torn down, and
# a second one cannot cut the teardown short.
stopping=
stop() {
	[[ -z $stopping ]] || return 0
	stopping=1
	local pid
	# jobs -p too: a job started just before the signal may not be in pids yet.
	for pid in "${pids[@]}" $(jobs -p); do
		kill -TERM -- "-$pid" 2>/dev/null || true
	done
	# A second signal interrupts wait: wait again until each run has ended.
	for pid in "${pids[@]}" $(jobs -p); do
		while kill -0 "$pid" 2>/dev/null; do
			wait "$pid" || true
		done
	done
	exit 130
}
trap stop INT TERM HUP
launch() {
	set -m
	"$@" </dev/null &
	set +m
	pids+=($!)
}

# Compile the tests once, under the lock the other heavy builds take, so the
# profiles' go test runs find every package built and only link. (go vet's
# checks run in make lint.)
.ci/heavy-build.sh go test -tags e2e -vet=off -c -o "$tmp/e2e.test" ./e2e/
# The tests build the binaries themselves inside the bed's network
# namespace, where the module proxy is out of reach: fetch every module of
# this go.mod now. make test's unit step has done it already; a benchmark on
# a fresh machine has not. (A PINNIPED_BENCH_BASELINE commit is built from
# the same cache: one whose go.mod needs other modules fails to build.)
go mod download
# Two beds adding their network namespaces at the same moment can race on
# the first mount of /run/netns: mount it once here.
ip netns add "pinniped-run-$$"
ip netns delete "pinniped-run-$$"
run_profile() {
	local profile=$1 name="ci-$1"
	if [[ ${2:-} == --log ]]; then
		exec >"$3" 2>&1
	fi
	# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
	if ! PINNIPED_E2E_NAME="$name" PINNIPED_E2E_PROFILE="$profile" PINNIPED_E2E_STATE_DIR="/var/lib/pinniped-e2e/$name" \
		go test -tags e2e -vet=off -count=1 -timeout "${PINNIPED_E2E_TIMEOUT:-50m}" -v ${GO_TEST_FLAGS:-} ./e2e/; then
		echo "e2e/run.sh: profile $profile FAILED (the bed's logs were saved under ${PINNIPED_E2E_ARTIFACTS:-/tmp/pinniped-e2e-logs})" >&2
		return 1
	fi
	echo "e2e/run.sh: profile $profile passed" >&2
}
status=0
for profile in ${PINNIPED_E2E_PROFILES:-kubeadm managed}; do
	beds+=("ci-$profile")
	profiles+=("$profile")
	if [[ -n $serial ]]; then
		echo "e2e/run.sh: === profile $profile (bed ci-$profile) ===" >&2
		launch run_profile "$profile"
		wait "${pids[-1]}" || status=1
	elif [[ ${#pids[@]} == 0 ]]; then
		echo "e2e/run.sh: === profile $profile (bed ci-$profile), shown as it runs ===" >&2
		launch run_profile "$profile"
	else
		echo "e2e/run.sh: === profile $profile (bed ci-$profile) runs beside it; its output follows when it ends ===" >&2
		launch run_profile "$profile" --log "$logs/$profile.log"
	fi
done
if [[ -z $serial ]]; then
	for pid in "${pids[@]}"; do
		wait "$pid" || status=1
	done
fi
show_logs
echo "e2e/run.sh: done in $((SECONDS - start))s, status $status" >&2
exit $status
