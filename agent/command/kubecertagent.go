package command

import (
	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/agent/credentials/kubecertagent"
)

// newKubeCertAgentCommand is what the helper pod beside kube-controller-manager
// runs; the agent reads the cluster's signing files through it.
func newKubeCertAgentCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "kube-cert-agent",
		Short:  "Helper pod of the cluster-signing-key strategy (run by the agent, not by people)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(&cobra.Command{
		Use:  "sleep",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return kubecertagent.Sleep(cmd.Context()) },
	}, &cobra.Command{
		Use:  "print CERT-FILE KEY-FILE",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return kubecertagent.Print(cmd.OutOrStdout(), args[0], args[1])
		},
	})
	return cmd
}
