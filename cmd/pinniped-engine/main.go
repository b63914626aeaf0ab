// Command pinniped-engine is the whole pinniped CLI. People and kubectl run
// the lean `pinniped` front beside it, which answers cached logins itself and
// hands everything else over to this binary.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
	"github.com/pinniped-kit/pinniped/agent/plumbing/profiling"
	"github.com/pinniped-kit/pinniped/cli/commands"
)

// Set with -ldflags "-X main.version=... -X main.commit=... -X main.date=...".
var (
	version = "dev"
	commit  = ""
	date    = ""
)

func main() {
	profiling.DisableAllocationSampling() // on again only while pinniped proxy's profiles are read (--profiling-listen)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	info := buildinfo.Info{Version: version, Commit: commit, BuildDate: date}
	code := commands.Execute(ctx, streams, info, os.Args[1:])
	stop()
	os.Exit(code)
}
