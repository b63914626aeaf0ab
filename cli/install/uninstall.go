package install

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/ui"
	"github.com/pinniped-kit/pinniped/install/apply"
)

// UninstallOptions are the inputs of `pinniped uninstall`.
type UninstallOptions struct {
	Kube *kubeflags.Flags

	f *cmdutil.Factory
}

// NewCmdUninstall returns `pinniped uninstall`; runF (nil:
// UninstallOptions.Run) does the work.
func NewCmdUninstall(f *cmdutil.Factory, runF func(context.Context, *UninstallOptions) error) *cobra.Command {
	o := &UninstallOptions{Kube: kubeflags.New(), f: f}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the pinniped agent and everything it created from a cluster",
		Long: `uninstall deletes every object "pinniped install" created and every object
the agent made (its Secrets, CertificateSigningRequests and helper pods),
found by the app.kubernetes.io/part-of=pinniped label. Nothing else is
touched. Users' cached credentials stop working when they expire.`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, nil, runF, o.Run),
	}
	o.Kube.AddTo(cmd.Flags())
	return cmd
}

// Run removes the agent.
func (o *UninstallOptions) Run(ctx context.Context) error {
	dyn, cfg, err := o.f.Dynamic(o.Kube.ClientConfig())
	if err != nil {
		return err
	}
	ns := o.Kube.NamespaceOr("pinniped")
	fmt.Fprintf(o.f.IO.ErrOut, "Removing pinniped from %s (namespace %s)\n", cfg.Host, ns)
	p := ui.For(o.f.IO.In, o.f.IO.ErrOut, o.f.Getenv)
	defer ui.Close(p)
	in := &apply.Installer{Dynamic: dyn, Progress: p}
	return in.Uninstall(ctx, ns)
}
