// Package commands assembles the `pinniped` command tree. Each command is
// thin: it parses flags into an options struct and hands over to the package
// that does the work.
package commands

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/commands/doctor"
	"github.com/pinniped-kit/pinniped/cli/commands/getkubeconfig"
	"github.com/pinniped-kit/pinniped/cli/commands/install"
	"github.com/pinniped-kit/pinniped/cli/commands/login"
	"github.com/pinniped-kit/pinniped/cli/commands/logout"
	"github.com/pinniped-kit/pinniped/cli/commands/proxy"
	"github.com/pinniped-kit/pinniped/cli/commands/status"
	"github.com/pinniped-kit/pinniped/cli/commands/version"
	"github.com/pinniped-kit/pinniped/cli/commands/whoami"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// NewRoot builds the `pinniped` command with every subcommand.
func NewRoot(streams genericiooptions.IOStreams, info buildinfo.Info) *cobra.Command {
	return newRoot(cmdutil.New(streams, info))
}

func newRoot(f *cmdutil.Factory) *cobra.Command {
	streams := f.IO
	root := &cobra.Command{
		Use:   "pinniped",
		Short: "Log in to any Kubernetes cluster with your company identity",
		Long: `pinniped logs you in to Kubernetes clusters with the identity you already
have at work (any OIDC provider, or a token webhook), and sets clusters up so
that kubectl does this for you.

An administrator installs the pinniped agent into a cluster once, then hands
out a kubeconfig made by "pinniped get kubeconfig". That kubeconfig contains
no secrets: kubectl runs "pinniped login" to get a short-lived credential,
which is cached in your OS keyring until it expires.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without this, a bare `pinniped` would succeed silently.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage", err, cmd.CommandPath())
	})
	root.AddCommand(
		version.NewCmdVersion(f, nil),
		install.NewCmdInstall(f, nil),
		install.NewCmdUninstall(f, nil),
		getkubeconfig.NewCmdGet(f),
		login.NewCmdLogin(f),
		logout.NewCmdLogout(f, nil),
		status.NewCmdStatus(f, nil),
		proxy.NewCmdProxy(f, nil),
		whoami.NewCmdWhoami(f, nil),
		doctor.NewCmdDoctor(f, nil),
	)
	return root
}

// Execute runs the command line and returns the process exit code. Errors are
// printed once, to stderr, without a stack trace.
func Execute(ctx context.Context, streams genericiooptions.IOStreams, info buildinfo.Info, args []string) (code int) {
	defer func() {
		// A panic is a bug; say so plainly instead of dumping goroutines on a
		// user whose kubectl just called us. PINNIPED_DEBUG=true re-panics for the trace.
		if r := recover(); r != nil {
			if loginflags.Debug(os.Getenv) {
				panic(r)
			}
			fmt.Fprintf(streams.ErrOut, "Error: internal error in pinniped %s: %v\nThis is a bug; please report it (set %s=true for details).\n", info.Version, r, loginflags.EnvDebug)
			code = 2
		}
	}()
	root := NewRoot(streams, info)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	// The login screen has shown this error with its next step already.
	var shown interface{ AlreadyShown() bool }
	if errors.As(err, &shown) && shown.AlreadyShown() {
		return 1
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(streams.ErrOut, "Error: interrupted")
		return 130
	}
	// The last line of defence: every message passes here, and some carry
	// what an identity provider or a cluster said.
	fmt.Fprintf(streams.ErrOut, "Error: %s\n", termsafe.Lines(err.Error()))
	return 1
}
