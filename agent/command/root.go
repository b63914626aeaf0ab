// Package command assembles the `pinniped-agent` command tree.
package command

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
)

// NewRoot builds the `pinniped-agent` command.
func NewRoot(out, errOut io.Writer, info buildinfo.Info) *cobra.Command {
	root := &cobra.Command{
		Use:   "pinniped-agent",
		Short: "The in-cluster half of pinniped",
		Long: `pinniped-agent runs inside a Kubernetes cluster as a small Deployment that
"pinniped install" creates. It trades tokens from your identity provider for
short-lived cluster credentials (the TokenCredentialRequest API, wire-compatible
with upstream Pinniped's Concierge), and on clusters whose signing key is out
of reach it serves an impersonation proxy.

You do not normally run it by hand.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage", err, cmd.CommandPath())
	})
	root.CompletionOptions.DisableDefaultCmd = true

	root.AddCommand(newVersionCommand(info), newServeCommand(), newKubeCertAgentCommand())
	return root
}

// Execute runs the agent's command line and returns the exit code.
func Execute(ctx context.Context, out, errOut io.Writer, info buildinfo.Info, args []string) int {
	root := NewRoot(out, errOut, info)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(errOut, "Error: %v\n", err)
		return 1
	}
	return 0
}
