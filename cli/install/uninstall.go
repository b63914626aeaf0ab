package install

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/ui"
	"github.com/pinniped-kit/pinniped/install/apply"
)

// NewUninstallCommand returns `pinniped uninstall`.
func NewUninstallCommand(errOut io.Writer) *cobra.Command {
	kube := kubeflags.New()
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the pinniped agent and everything it created from a cluster",
		Long: `uninstall deletes every object "pinniped install" created and every object
the agent made (its Secrets, CertificateSigningRequests and helper pods),
found by the app.kubernetes.io/part-of=pinniped label. Nothing else is
touched. Users' cached credentials stop working when they expire.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dyn, cfg, err := kube.Dynamic()
			if err != nil {
				return err
			}
			ns := kube.NamespaceOr("pinniped")
			fmt.Fprintf(errOut, "Removing pinniped from %s (namespace %s)\n", cfg.Host, ns)
			p := ui.For(errOut)
			defer ui.Close(p)
			in := &apply.Installer{Dynamic: dyn, Progress: p}
			return in.Uninstall(cmd.Context(), ns)
		},
	}
	kube.AddTo(cmd.Flags())
	return cmd
}
