// Package command assembles the `pinniped-agent` command tree.
package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"
)

// BuildInfo describes the running build; main fills it from -ldflags.
type BuildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// NewRoot builds the `pinniped-agent` command.
func NewRoot(out, errOut io.Writer, info BuildInfo) *cobra.Command {
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	info.GoVersion, info.Platform = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH

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

	var asJSON bool
	versionCmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s (commit %s, %s, %s)\n", info.Version, info.Commit, info.GoVersion, info.Platform)
			return err
		},
	}
	versionCmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	root.AddCommand(versionCmd, newServeCommand(), newKubeCertAgentCommand())
	return root
}

// Execute runs the agent's command line and returns the exit code.
func Execute(ctx context.Context, out, errOut io.Writer, info BuildInfo, args []string) int {
	root := NewRoot(out, errOut, info)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(errOut, "Error: %v\n", err)
		return 1
	}
	return 0
}
