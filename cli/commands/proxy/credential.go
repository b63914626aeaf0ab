package proxy

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
)

// CredentialOptions are the inputs of `pinniped proxy credential`.
type CredentialOptions struct {
	cmdutil.NothingToComplete
	StateDir string

	f *cmdutil.Factory
}

// NewCmdCredential returns `pinniped proxy credential`, the exec plugin
// of the proxy's kubeconfig; runF (nil: CredentialOptions.Run) does the work.
func NewCmdCredential(f *cmdutil.Factory, runF func(context.Context, *CredentialOptions) error) *cobra.Command {
	o := &CredentialOptions{f: f}
	cmd := &cobra.Command{
		Use:   "credential --state-dir DIR",
		Short: "Print the running pinniped proxy's local secret for kubectl (its kubeconfig runs this)",
		Long: `credential prints, as a kubectl ExecCredential without expiry, the local
secret of the pinniped proxy whose state directory is --state-dir. The
kubeconfig "pinniped proxy" writes runs it; you do not need to. When that
proxy is not running it fails and says how to start it.`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, runF),
	}
	cmd.Flags().StringVar(&o.StateDir, "state-dir", "", "the proxy's state directory")
	return cmd
}

// Validate checks the flags.
func (o *CredentialOptions) Validate() error {
	if o.StateDir == "" || !filepath.IsAbs(o.StateDir) {
		return errors.New("--state-dir must name the proxy's state directory by its absolute path (the proxy's kubeconfig does)")
	}
	return nil
}

// Run prints the credential.
func (o *CredentialOptions) Run(ctx context.Context) error {
	exec, err := execcred.ParseRequest(o.f.Getenv(execcred.EnvVar))
	if err != nil {
		return err
	}
	secret, err := state.RunningSecret(o.StateDir)
	if err != nil {
		return err
	}
	// No expiry: the secret lasts as long as the proxy, and a token that
	// never changes is what keeps client-go from closing connections.
	return execcred.Write(o.f.IO.Out, exec.APIVersion, execcred.Status{Token: string(secret)})
}
