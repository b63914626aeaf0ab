#!/usr/bin/env bash
# `make test`: every check CI runs (.ci/run runs exactly `make test`), in
# stages, and the time of each at the end, whether it passed or not:
#   check             formatting, vet, generated files, lint, the charts
#   unit              unit tests (race), the test tools' own tests, fuzzing
#   e2e               the end-to-end tests on two real beds at once
#   release-snapshot  the release rehearsal
# Much of that time a core is idle: check waits for module downloads, unit
# for its slower tests, and the e2e beds for credentials to expire and pods
# to roll. So from the start, in the background and on idle CPU only
# (SCHED_IDLE: every stage's processes always come first), the test bed's
# Kubernetes toolchain is built, then the release rehearsal's tools, then
# every binary's packages for every platform it releases
# (.ci/release-prep.sh). e2e and the rehearsal then find them built (e2e
# waits for a toolchain build still under way rather than start another).
# The background's failure fails nothing by itself: the stage that needs
# what it did not build builds it, and fails there in its own words.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -a names=() times=() results=()
start=$SECONDS
prep_pid=
prep_log=

report() {
	local rc=$? i
	if [[ -n $prep_pid ]] && kill -0 "$prep_pid" 2>/dev/null; then
		kill -- "-$prep_pid" 2>/dev/null || kill "$prep_pid" 2>/dev/null || true
		wait "$prep_pid" 2>/dev/null || true
	fi
	echo
	echo "make test: stages (wall clock, 2 cores)"
	for i in "${!names[@]}"; do
		printf '  %-34s %7s  %s\n' "${names[$i]}" "$(fmt "${times[$i]}")" "${results[$i]}"
	done
	printf '  %-34s %7s  %s\n' "total" "$(fmt $((SECONDS - start)))" "$([[ $rc == 0 ]] && echo passed || echo "FAILED (exit $rc)")"
	exit "$rc"
}
trap report EXIT
trap 'exit 130' INT TERM

fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# stage NAME CMD...: runs a stage, recording its time and outcome.
stage() {
	local name=$1 t0=$SECONDS rc=0
	shift
	names+=("$name")
	times+=(0)
	results+=("running")
	echo "make test: === $name ===" >&2
	"$@" || rc=$?
	times[${#times[@]} - 1]=$((SECONDS - t0))
	if ((rc == 0)); then results[${#results[@]} - 1]=passed; else results[${#results[@]} - 1]="FAILED (exit $rc)"; fi
	return "$rc"
}

prep_log=$(mktemp /tmp/pinniped-background-builds.XXXXXX.log)
prep_t0=$SECONDS
# A process group of its own, so the report can stop all of it.
set -m
PINNIPED_HEAVY_BUILD=idle bash -c 'e2e/scripts/build-tools.sh >/dev/null && exec .ci/release-prep.sh' >"$prep_log" 2>&1 &
prep_pid=$!
set +m

stage check make --no-print-directory check
stage unit make --no-print-directory unit
stage e2e make --no-print-directory e2e

# What the background did not finish by now is waited for here; its time
# beside the stages' says how much of it they hid.
wait_t0=$SECONDS
prep_rc=0
wait "$prep_pid" || prep_rc=$?
prep_pid=
names+=("  background builds (idle CPU)")
times+=($((SECONDS - prep_t0)))
if ((prep_rc == 0)); then
	results+=("toolchain, release tools, compiles; waited $(fmt $((SECONDS - wait_t0))) after e2e")
else
	results+=("failed (exit $prep_rc; the stages build what is missing): see below")
	tail -n 20 "$prep_log" >&2
fi
rm -f "$prep_log"

stage release-snapshot make --no-print-directory release-snapshot
