#!/usr/bin/env bash
# Builds, on idle CPU only, what the release rehearsal (make release-snapshot)
# would otherwise spend its first half on: its tools (.ci/tools.sh, into their
# cache) and every package of every binary goreleaser.yaml builds, for each of
# its platforms (into the Go build cache, with the same flags, so that
# goreleaser and ko then mostly link). make test runs it beside the e2e beds
# (.ci/test.sh); it changes nothing that decides a result: the rehearsal still
# builds, signs and checks everything itself.
set -euo pipefail
cd "$(dirname "$0")/.."
# SCHED_IDLE and no heavy-build lock: .ci/heavy-build.sh.
export PINNIPED_HEAVY_BUILD=idle
t0=$SECONDS
for tool in goreleaser cosign cyclonedx-gomod krew validate-krew-manifest; do
	.ci/tools.sh "$tool" >/dev/null
done
echo "release-prep: tools in $((SECONDS - t0)) s"
t0=$SECONDS
# goreleaser.yaml's builds: the CLI's two binaries on three systems and two
# architectures, the agent on Linux (goreleaser and ko alike), and all three
# again as the FIPS flavour on Linux; -o /dev/null
# keeps only the compiled packages, which are what takes the time.
cli=(./cmd/pinniped ./cmd/pinniped-engine)
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do
	for main in "${cli[@]}"; do
		GOOS=${platform%/*} GOARCH=${platform#*/} CGO_ENABLED=0 \
			chrt --idle 0 go build -trimpath -o /dev/null "$main"
	done
done
for arch in amd64 arm64; do
	GOOS=linux GOARCH=$arch CGO_ENABLED=0 chrt --idle 0 go build -trimpath -o /dev/null ./cmd/pinniped-agent
done
# The FIPS flavour, Linux only: GOFIPS140 changes every package that
# depends on crypto, so it is a build cache of its own.
for arch in amd64 arm64; do
	for main in "${cli[@]}" ./cmd/pinniped-agent; do
		GOOS=linux GOARCH=$arch CGO_ENABLED=0 GOFIPS140=v1.0.0 chrt --idle 0 go build -trimpath -o /dev/null "$main"
	done
done
echo "release-prep: packages for every platform in $((SECONDS - t0)) s"
