#!/usr/bin/env bash
# Runs a command under the heavy-build lock, so that heavy builds (the test
# bed's Kubernetes, the agent, the e2e test binary, the pinned tools) take
# turns on a 2-core machine instead of running side by side. Every script
# and e2e/framework.go take the lock through here, so they cannot disagree on
# where it is; where that is (root's and other accounts' differ) is decided
# in .ci/lib.sh (pinniped_heavy_lock).
#
#   .ci/heavy-build.sh go build ./cmd/...   -> the command, once the lock is ours
#   .ci/heavy-build.sh --path               -> the lock's path
#
# PINNIPED_HEAVY_BUILD=idle: a build in the background that must never make
# the others wait (.ci/release-prep.sh, beside the e2e beds): it runs on idle
# CPU only (SCHED_IDLE, so it gets a core only when nothing else wants one)
# and without the lock, which it would otherwise hold for minutes while the
# beds' own builds queued behind it.
set -euo pipefail
# shellcheck source=.ci/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
lock=$(pinniped_heavy_lock)
if [[ ${1:-} == --path ]]; then
	echo "$lock"
	exit 0
fi
if [[ ${PINNIPED_HEAVY_BUILD:-} == idle ]]; then
	exec chrt --idle 0 "$@"
fi
exec flock "$lock" "$@"
