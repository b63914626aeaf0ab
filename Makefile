# Developer entry points. `make test` is what CI runs (.ci/run), `make demo`
# is the local end-to-end demo.

SHELL := /usr/bin/env bash -o pipefail
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
# The commit goes into Go's build information (pinniped doctor compares the front's and the
# engine's), where git answers: auto would fail in a checkout git refuses.
BUILDVCS := $(shell git status --porcelain >/dev/null 2>&1 && echo auto || echo false)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
TOOLS   := .ci/tools.sh
FUZZTIME ?= 30s

# As root, refuse another account's HOME or Go caches before the first go
# command writes root-owned files into them (go vet would, before any script
# got to check): README.md, "Running the checks as root"; the rule is
# .ci/lib.sh's, which the scripts apply again when run on their own. Not for
# clean, which writes nothing, nor test-fresh, which points HOME and the
# caches at a temporary directory and checks what it reuses itself.
ifeq ($(shell id -u),0)
ifneq ($(filter-out clean test-fresh,$(or $(MAKECMDGOALS),all)),)
ifneq ($(shell bash -c '. .ci/lib.sh && pinniped_require_root_env make' >&2 && echo ok),ok)
$(error refusing to run as root with another account's HOME or caches: see above)
endif
endif
endif

.PHONY: all build build-fips test test-fresh check fmt vet lint chart generate verify-generated unit e2e e2e-matrix e2e-fips demo bench-exchange bench-claimrules bench-login bench-proxy bench-soak release-check release-snapshot clean

all: build

## build: the binaries into ./bin (pinniped needs pinniped-engine beside it)
build:
	CGO_ENABLED=0 go build -trimpath -buildvcs=$(BUILDVCS) -ldflags '$(LDFLAGS)' -o bin/ ./cmd/pinniped ./cmd/pinniped-engine ./cmd/pinniped-agent

## build-fips: the binaries as the release's FIPS flavour (Go's FIPS 140-3 module v1.0.0, FIPS mode
##   on by default; GODEBUG=fips140=only makes anything outside the module fail) into ./bin/fips
build-fips:
	CGO_ENABLED=0 GOFIPS140=v1.0.0 go build -trimpath -buildvcs=$(BUILDVCS) -ldflags '$(LDFLAGS)' -o bin/fips/ ./cmd/pinniped ./cmd/pinniped-engine ./cmd/pinniped-agent

## test: everything CI checks, in order of cost (check, unit, e2e, release-snapshot), with the
##   release rehearsal's tools and compiles made on idle CPU while the e2e beds wait, and each
##   stage's time at the end (.ci/test.sh)
test:
	.ci/test.sh

## test-fresh: `make test` from a clean clone with empty HOME and Go caches, as on a new machine
##   (reuses the built Kubernetes toolchain unless PINNIPED_FRESH_TOOLCHAIN=cold; see .ci/test-fresh.sh)
test-fresh:
	.ci/test-fresh.sh

## check: formatting, vet, lint, generated files up to date, the Helm charts
check: fmt vet verify-generated lint chart

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	go vet ./...

lint:
	$$($(TOOLS) golangci-lint) run ./...

## generate: deepcopy functions and CRD YAML from agent/apis, then the Helm charts' templates
##   from what `pinniped install` renders
generate:
	cd agent/apis && $$(../../$(TOOLS) controller-gen) object paths=./...
	cd agent/apis && $$(../../$(TOOLS) controller-gen) crd:crdVersions=v1 \
	  paths=./authentication/... paths=./config/... output:crd:artifacts:config=../../install/crds
	go run ./install/chartgen/writecharts install/chart

## verify-generated: fail when generated files are stale (run `make generate`)
verify-generated: generate
	@if [ -n "$$(git status --porcelain -- agent/apis install/crds install/chart)" ]; then \
	  git status --short -- agent/apis install/crds install/chart; git diff --stat -- agent/apis install/crds install/chart; \
	  echo "Generated files are stale: run 'make generate' and commit the result."; exit 1; fi

## chart: helm lint, and `helm template` of the charts against `pinniped install -o yaml` (install/chartgen)
chart:
	helm=$$($(TOOLS) helm) && $$helm lint --strict install/chart/pinniped install/chart/pinniped-crds && \
	  PINNIPED_HELM=$$helm go test -count=1 -run 'Helm|Chart' ./install/chartgen/

## unit: unit tests with the race detector, the e2e test Supervisor's and second
## OpenID provider's own tests (their own modules), then bounded fuzz runs of the
## proxy's identity invariants: it sends only its own identity headers, and an
## identity arrives at the API server exactly as issued or is refused (their seeds
## also run in the unit tests)
unit:
	go test -race -count=1 ./...
	cd e2e/tools/supervisor && go test -count=1 ./...
	cd e2e/tools/oidcop && go test -count=1 ./...
	go test -run '^$$' -fuzz '^FuzzProxySendsOnlyItsIdentity$$' -fuzztime $(FUZZTIME) ./agent/endpoints/proxy/impersonator/
	go test -run '^$$' -fuzz '^FuzzIdentityArrivesAsIssued$$' -fuzztime $(FUZZTIME) ./agent/endpoints/proxy/impersonator/

## e2e: end-to-end tests on the real test bed (see e2e/README.md)
e2e:
	@if [ -x e2e/run.sh ]; then e2e/run.sh; else echo "e2e: no test bed yet (e2e/run.sh missing)"; fi

## e2e-matrix: the core end-to-end checks on every Kubernetes minor the bed has (e2e/tools/kube),
##   both profiles, one bed at a time; prints versions x checks and writes docs/tested-versions.md.
##   About 3 hours for 1.32-1.37 on 2 cores once the toolchains are built, not in make test; resumable per commit (see e2e/matrix.sh for its knobs)
e2e-matrix:
	e2e/matrix.sh

## e2e-fips: the whole end-to-end suite with pinniped's binaries (CLI, engine, agent) built as the FIPS
##   flavour and run with fips140=only, on the bed's default Kubernetes, both profiles; about 30 minutes,
##   not in make test (docs/fips.md)
e2e-fips:
	PINNIPED_E2E_FIPS=only e2e/run.sh

## bench-exchange: TokenCredentialRequest load through the real API server, ours beside a second
##   installation (PINNIPED_BENCH_OTHER_*: see e2e/README.md); req/s, latency, CPU per request beside the
##   crypto floor, memory; the agent's CPU and allocation profiles in bench-profiles/ (PINNIPED_BENCH_PROFILES)
bench-exchange:
	PINNIPED_BENCH_PROFILES=$${PINNIPED_BENCH_PROFILES-$(CURDIR)/bench-profiles} PINNIPED_E2E_LOAD=1 PINNIPED_E2E_TIMEOUT=$${PINNIPED_E2E_TIMEOUT:-40m} GO_TEST_FLAGS="-run TestExchangeLoad -v" PINNIPED_E2E_PROFILES=kubeadm e2e/run.sh

## bench-claimrules: what kube-apiserver's claim rules (CEL) cost the agent: memory before and
##   after they are compiled, CPU per exchange with claim names and with CEL rules
bench-claimrules:
	PINNIPED_E2E_LOAD=1 GO_TEST_FLAGS="-run TestClaimRulesCost -v" PINNIPED_E2E_PROFILES=kubeadm e2e/run.sh

## bench-login: the cached `pinniped login` path beside a Go hello world (prints a table)
bench-login:
	PINNIPED_E2E_LOAD=1 GO_TEST_FLAGS="-run TestCachedLoginBench -v" PINNIPED_E2E_PROFILES=kubeadm e2e/run.sh

## bench-proxy: the impersonation proxy beside direct kube-apiserver access and beside a second installation's
##   proxy (PINNIPED_BENCH_OTHER_*), GET and LIST; req/s, latency, CPU per request, memory; CPU and
##   allocation profiles of the agent and of pinniped proxy under load in bench-profiles/ (PINNIPED_BENCH_PROFILES);
##   PINNIPED_BENCH_BASELINE=<commit> makes the second installation that commit's agent (before and after in one run)
bench-proxy:
	PINNIPED_BENCH_PROFILES=$${PINNIPED_BENCH_PROFILES-$(CURDIR)/bench-profiles} PINNIPED_E2E_LOAD=1 PINNIPED_E2E_TIMEOUT=$${PINNIPED_E2E_TIMEOUT:-40m} GO_TEST_FLAGS="-run TestProxyLoad -v" PINNIPED_E2E_PROFILES=managed e2e/run.sh

## bench-soak: 30 minutes of mixed load (PINNIPED_E2E_SOAK to change); agent memory, goroutines, files per minute
bench-soak:
	PINNIPED_E2E_SOAK=$${PINNIPED_E2E_SOAK:-30m} PINNIPED_E2E_TIMEOUT=$${PINNIPED_E2E_TIMEOUT:-90m} GO_TEST_FLAGS="-run TestSoak -v" PINNIPED_E2E_PROFILES=$${PINNIPED_E2E_PROFILES:-kubeadm} e2e/run.sh

## demo: local demo (cluster + Dex + agent + login + kubectl through it)
demo:
	@if [ -x e2e/demo.sh ]; then e2e/demo.sh; else echo "demo: not available yet; see README.md"; exit 1; fi

## release-check: validate goreleaser.yaml
release-check:
	$$($(TOOLS) goreleaser) check -f goreleaser.yaml

## release-snapshot: rehearse the release offline and check every artifact, publishing nothing:
##   archives, SBOMs, checksums signed with a throwaway cosign key and verified, the multi-arch
##   agent image and its SBOMs (pushed to a registry of the rehearsal's own), the Helm charts,
##   the Homebrew cask, and the krew manifest through krew's own validator
##   (root: it runs in network namespaces of its own; see .ci/release-snapshot.sh)
release-snapshot: release-check
	.ci/release-snapshot.sh

clean:
	rm -rf bin dist
