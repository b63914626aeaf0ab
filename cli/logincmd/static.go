package logincmd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/cli/execcred"
)

func newStaticCommand(s Streams) *cobra.Command {
	var token, tokenEnv, cacheMode string
	var conc conciergeFlags
	cmd := &cobra.Command{
		Use:   "static --token=T | --token-env=VAR [flags]",
		Short: "Print a cluster credential for a static token",
		Long: `static prints a static token as a kubectl credential, or, with
--enable-concierge, trades it at the pinniped agent (which checks it with a
WebhookAuthenticator) for a short-lived cluster credential and caches that.
Prefer --token-env: a token in a kubeconfig is readable by anyone who can read the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if token != "" && tokenEnv != "" {
				return errors.New("use --token or --token-env, not both")
			}
			if tokenEnv != "" {
				v, ok := os.LookupEnv(tokenEnv)
				if !ok || v == "" {
					return fmt.Errorf("--token-env %s: that environment variable is not set", tokenEnv)
				}
				token = v
			}
			cfg, err := conc.config()
			if err != nil {
				return err
			}
			exec, err := execcred.ParseRequest(os.Getenv(execcred.EnvVar))
			if err != nil {
				return err
			}
			engine, err := newEngine(s, cacheMode, false)
			if err != nil {
				return err
			}
			return engine.LoginStatic(context.WithoutCancel(cmd.Context()), token, cfg, exec)
		},
	}
	f := cmd.Flags()
	f.StringVar(&token, "token", "", "the static token")
	f.StringVar(&tokenEnv, "token-env", "", "name of an environment variable holding the token")
	f.StringVar(&cacheMode, "credential-cache", "keyring", "where to cache credentials: keyring, file, none")
	conc.add(cmd)
	return cmd
}
