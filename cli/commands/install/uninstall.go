package install

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/ui"
	"github.com/pinniped-kit/pinniped/install/apply"
)

// UninstallOptions are the inputs of `pinniped uninstall`.
type UninstallOptions struct {
	cmdutil.NothingToComplete
	Kube *kubeflags.Flags
	// GroupSuffix picks which install to remove when several run side by
	// side (each with its own API group suffix).
	GroupSuffix string

	f *cmdutil.Factory
}

// NewCmdUninstall returns `pinniped uninstall`; runF (nil:
// UninstallOptions.Run) does the work.
func NewCmdUninstall(f *cmdutil.Factory, runF func(context.Context, *UninstallOptions) error) *cobra.Command {
	o := &UninstallOptions{Kube: f.KubeFlags(), f: f}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the pinniped agent and everything it created from a cluster",
		Long: `uninstall deletes every object "pinniped install" created and every object
the agent made (its Secrets, CertificateSigningRequests and helper pods),
found by the app.kubernetes.io/part-of=pinniped label. Nothing else is
touched. Users' cached credentials stop working when they expire.

Where installs with different --api-group-suffix values run side by side,
it removes only the one named by --namespace and --api-group-suffix.`,
		Example: `  pinniped uninstall
  pinniped uninstall --namespace=pinniped-example --api-group-suffix=example.com`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, runF),
	}
	o.Kube.AddTo(cmd.Flags())
	cmd.Flags().StringVar(&o.GroupSuffix, "api-group-suffix", groupsuffix.Default, "API group suffix the install was made with (pinniped install --api-group-suffix)")
	return cmd
}

// Validate checks the flags.
func (o *UninstallOptions) Validate() error {
	if err := groupsuffix.Validate(o.GroupSuffix); err != nil {
		return fmt.Errorf("--api-group-suffix: %w", err)
	}
	return nil
}

// Run removes the agent.
func (o *UninstallOptions) Run(ctx context.Context) error {
	dyn, cfg, err := o.f.Dynamic(o.Kube.ClientConfig())
	if err != nil {
		return err
	}
	ns := o.Kube.NamespaceOr("pinniped")
	which := "namespace " + ns
	if !groupsuffix.IsDefault(o.GroupSuffix) {
		which += ", API group suffix " + o.GroupSuffix
	}
	fmt.Fprintf(o.f.IO.ErrOut, "Removing pinniped from %s (%s)\n", cfg.Host, which)
	p := ui.For(o.f.IO.In, o.f.IO.ErrOut, o.f.Getenv)
	defer ui.Close(p)
	in := &apply.Installer{Dynamic: dyn, Progress: p, GroupSuffix: o.GroupSuffix}
	return in.Uninstall(ctx, ns)
}
