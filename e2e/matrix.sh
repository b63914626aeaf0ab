#!/usr/bin/env bash
# `make e2e-matrix`: the core end-to-end checks on every Kubernetes minor the
# bed has a toolchain for (e2e/tools/kube/*), both profiles, one bed at a
# time (the figures and timings of one run must not skew another's), then
# one table, versions x checks, with the commit and the date.
#
# It takes hours (a toolchain build of 10-14 min per minor the first time, then
# ~10-15 min per minor and profile), so it stays out of `make test` and is
# resumable: each (minor, profile) run's result is kept under
# $PINNIPED_MATRIX_DIR/<commit>/ and a run that passed is not repeated for the
# same commit. A failed one is run again.
#
#   PINNIPED_MATRIX_VERSIONS  minors to run (default: all, oldest first), e.g. "1.32 1.37"
#   PINNIPED_MATRIX_PROFILES  default "kubeadm managed"
#   PINNIPED_MATRIX_CHECKS    a subset of the checks below (default: all), e.g.
#                             "TestNodeReady TestInstallExchangeLoginUninstall"
#                             for a quick look; such a run's results and
#                             table are kept apart from a whole one's (the
#                             table under the results unless
#                             PINNIPED_MATRIX_TABLE says where)
#   PINNIPED_MATRIX_DIR       results (default /var/lib/pinniped-e2e/matrix)
#   PINNIPED_MATRIX_TABLE     where to write the table as Markdown as well
#                             (default docs/tested-versions.md)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) != 0 ]]; then
	echo "e2e/matrix.sh: FAIL: the e2e test bed needs root (network namespace, bridges, cgroups, kubelet)" >&2
	exit 1
fi

# The checks: each a test of the e2e suite, run whole. The table's columns
# are these, in this order (e2e/cmd/matrixtable names them).
checks=(
	TestNodeReady                     # the bed is the version asked for
	TestInstallExchangeLoginUninstall # pinniped install, the exchange, get kubeconfig, kubectl, uninstall
	TestHelm                          # the Helm charts, an upgrade under load
	TestLogin                         # browser login through kubectl's exec plugin, the keyring, the file fallback
	TestTUI                           # browser and device login at a terminal
	TestImpersonationProxy            # the proxy: get, watch, logs -f, exec, port-forward
	TestIdentityArrivesUnchanged      # what the API server's audit log shows through every path
	TestLongLived                     # long-lived streams through renewals
	TestUpstreamKubeconfigs           # kubeconfigs upstream Pinniped wrote
	TestDoctor                        # pinniped doctor, all OK, then each link broken
	TestUpgradeAndRollbackUnderLoad   # pinniped install of another build under load
)
if [[ -n ${PINNIPED_MATRIX_CHECKS:-} ]]; then
	chosen=()
	for c in $PINNIPED_MATRIX_CHECKS; do
		if [[ " ${checks[*]} " != *" $c "* ]]; then
			echo "e2e/matrix.sh: PINNIPED_MATRIX_CHECKS: $c is not a check; the checks are: ${checks[*]}" >&2
			exit 2
		fi
		chosen+=("$c")
	done
	checks=("${chosen[@]}")
fi
# A subset's results, and its table, are kept apart from a whole run's: a
# quick look must never stand in for a row, nor rewrite the docs' table.
subset=
if [[ -n ${PINNIPED_MATRIX_CHECKS:-} ]]; then
	subset="subset-$(echo "${checks[*]}" | sha256sum | cut -c1-12)"
fi
run_re="^($(
	IFS='|'
	echo "${checks[*]}"
))\$"

# The results are kept per state of the code they ran on: the last commit
# of everything but the table this writes (committing the table must not
# make the next run start again), plus a hash of uncommitted changes.
table=docs/tested-versions.md
commit=$(git log -1 --format=%h --abbrev=12 -- . ":!$table")
if [[ -n $(git status --porcelain --untracked-files=no -- . ":!$table") ]]; then
	commit="$commit-dirty-$(git diff HEAD -- . ":!$table" | sha256sum | cut -c1-12)"
fi
dir="${PINNIPED_MATRIX_DIR:-/var/lib/pinniped-e2e/matrix}/$commit${subset:+/$subset}"
if [[ -n $subset ]]; then
	table=${PINNIPED_MATRIX_TABLE:-$dir/table.md}
fi
mkdir -p "$dir"
versions=${PINNIPED_MATRIX_VERSIONS:-$(cd e2e/tools/kube && echo 1.* | tr ' ' '\n' | sort -V)}
checked=
for v in $versions; do
	v=${v#v}
	if [[ ! -f e2e/tools/kube/$v/go.mod ]]; then
		echo "e2e/matrix.sh: Kubernetes $v: no toolchain; the minors are: $(cd e2e/tools/kube && echo 1.*)" >&2
		exit 2
	fi
	checked+="$v "
done
versions=$checked
profiles=${PINNIPED_MATRIX_PROFILES:-kubeadm managed}
start=$SECONDS
status=0
for v in $versions; do
	for p in $profiles; do
		out="$dir/$v-$p"
		# The toolchain's module counts as much as the commit: a run that
		# passed is kept only for the module it ran with.
		# So do the checks run: a quick look at a few is no whole row.
		key=$({
			cat "e2e/tools/kube/$v/go.mod" "e2e/tools/kube/$v/go.sum" 2>/dev/null
			echo "${checks[*]}"
		} | sha256sum | cut -c1-12)
		if [[ -f "$out.passed" && "$(cat "$out.key" 2>/dev/null)" == "$key" ]]; then
			echo "e2e/matrix.sh: Kubernetes $v, $p: passed before at this commit ($out.json)" >&2
			continue
		fi
		rm -f "$out.passed" "$out.failed" "$out.release" "$out.json"
		echo "$key" >"$out.key"
		echo "e2e/matrix.sh: === Kubernetes $v, profile $p ===" >&2
		t0=$SECONDS
		# A minor whose toolchain does not build fails its row, not the run.
		if ! bindir=$(PINNIPED_E2E_KUBE_VERSION=$v e2e/scripts/build-tools.sh | tail -n1) ||
			! "$bindir/kube-apiserver" --version >"$out.release"; then
			echo $((SECONDS - t0)) >"$out.failed"
			status=1
			echo "e2e/matrix.sh: Kubernetes $v: its toolchain did not build (see above)" >&2
			continue
		fi
		# go test -json: the events name each test and its outcome; its
		# human output (the -v lines) is in them too, as Output events.
		if PINNIPED_E2E_KUBE_VERSION=$v PINNIPED_E2E_PROFILES=$p PINNIPED_E2E_SERIAL=1 \
			GO_TEST_FLAGS="-json -run $run_re" e2e/run.sh >"$out.json"; then
			echo $((SECONDS - t0)) >"$out.passed"
		else
			echo $((SECONDS - t0)) >"$out.failed"
			status=1
			echo "e2e/matrix.sh: Kubernetes $v, $p FAILED; its events are in $out.json" >&2
		fi
	done
done
echo "e2e/matrix.sh: done in $((SECONDS - start))s" >&2
go run ./e2e/cmd/matrixtable --dir "$dir" --commit "$commit" --versions "$versions" --profiles "$profiles" \
	--checks "${checks[*]}" --kube-dir e2e/tools/kube --markdown "${PINNIPED_MATRIX_TABLE:-$table}"
if [[ -n $subset ]]; then
	echo "e2e/matrix.sh: a subset of the checks: its table is in ${PINNIPED_MATRIX_TABLE:-$table}, not in docs/" >&2
fi
exit $status
