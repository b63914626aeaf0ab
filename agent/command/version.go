package command

import (
	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
)

// newVersionCommand is the agent's `version`: the CLI's flags and output
// (both from package buildinfo), without the CLI's Factory, which would
// link the CLI's browser opener and kubeconfig flags into the agent.
func newVersionCommand(info buildinfo.Info) *cobra.Command {
	var output string
	var legacyJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this pinniped-agent binary",
		Example: `  pinniped-agent version
  pinniped-agent version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := buildinfo.Format(output, legacyJSON, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return info.Complete().Write(cmd.OutOrStdout(), format)
		},
	}
	cmd.Flags().BoolVar(&legacyJSON, "json", false, "the same as -o json")
	_ = cmd.Flags().MarkHidden("json")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml, with upstream Pinniped's field names (default: one line of text, which also names the commit, Go version and platform; upstream prints the version alone)")
	return cmd
}
