package logincmd

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/cli/login/execcred"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
)

func newStaticCommand(s Streams) *cobra.Command {
	var flags loginflags.Static
	cmd := &cobra.Command{
		Use:   "static --token=T | --token-env=VAR [flags]",
		Short: "Print a cluster credential for a static token",
		Long: `static prints a static token as a kubectl credential, or, with
--enable-concierge, trades it at the pinniped agent (which checks it with a
WebhookAuthenticator) for a short-lived cluster credential and caches that.
Prefer --token-env: a token in a kubeconfig is readable by anyone who can read the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := flags.Config(os.LookupEnv)
			if err != nil {
				return err
			}
			if err := c.Validate(); err != nil {
				return err
			}
			exec, err := execcred.ParseRequest(os.Getenv(execcred.EnvVar))
			if err != nil {
				return err
			}
			engine, err := newEngine(s, c.CredentialCache, false)
			if err != nil {
				return err
			}
			return engine.LoginStatic(context.WithoutCancel(cmd.Context()), c, exec)
		},
	}
	flagset.Add(cmd.Flags(), flags.Flags())
	return cmd
}
