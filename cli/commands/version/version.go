// Package version implements `pinniped version`: what build is running.
// The build information itself, and how it is printed, is package
// buildinfo's, which the agent's own `version` shares.
package version

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
)

// Options are the inputs of `pinniped version`.
type Options struct {
	cmdutil.NothingToComplete
	Output string
	// JSON is the agent's earlier --json, which this command accepts too.
	JSON bool

	f *cmdutil.Factory
}

// NewCmdVersion returns `pinniped version`; runF (nil: Options.Run) does
// the work.
func NewCmdVersion(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this pinniped binary",
		Example: `  pinniped version
  pinniped version -o json`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, runF),
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "the same as -o json")
	_ = cmd.Flags().MarkHidden("json")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "json or yaml, with upstream Pinniped's field names (default: one line of text, which also names the commit, Go version and platform; upstream prints the version alone)")
	return cmd
}

// Validate rejects output formats we cannot print; --json becomes -o json.
func (o *Options) Validate() error {
	format, err := buildinfo.Format(o.Output, o.JSON, o.f.IO.ErrOut)
	if err != nil {
		return err
	}
	o.Output, o.JSON = format, false
	return nil
}

// Run prints the build information.
func (o *Options) Run(context.Context) error {
	return o.f.Version.Complete().Write(o.f.IO.Out, o.Output)
}
