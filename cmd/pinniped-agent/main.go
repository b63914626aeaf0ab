// Command pinniped-agent is the in-cluster agent.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
	"github.com/pinniped-kit/pinniped/agent/command"
	"github.com/pinniped-kit/pinniped/agent/plumbing/profiling"
)

// Set with -ldflags "-X main.version=... -X main.commit=... -X main.date=...".
var (
	version = "dev"
	commit  = ""
	date    = ""
)

func main() {
	profiling.DisableAllocationSampling() // on again only while profiles are read (--profiling-listen)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	info := buildinfo.Info{Version: version, Commit: commit, BuildDate: date}
	code := command.Execute(ctx, os.Stdout, os.Stderr, info, os.Args[1:])
	stop()
	os.Exit(code)
}
