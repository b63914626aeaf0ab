// Package e2e holds the end-to-end tests of pinniped and the Go API they use to drive the
// test bed (package testbed): a real single-node Kubernetes cluster, Dex, a Secret Service
// keyring and headless Chromium.
//
// The tests and helpers are behind the "e2e" build tag, so `go test ./...` stays fast:
//
//	sudo go test -tags e2e -count=1 -timeout 20m ./e2e/
//
// or, with dependencies and toolchain handled, e2e/run.sh. See e2e/README.md.
package e2e
