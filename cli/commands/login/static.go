package login

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
	"github.com/pinniped-kit/pinniped/cli/login/loginsetup"
	"github.com/pinniped-kit/pinniped/cli/ui"
)

// StaticOptions are the inputs of `pinniped login static`.
type StaticOptions struct {
	Flags loginflags.Static
	Login *config.Static
	Exec  *execcred.Request

	f *cmdutil.Factory
}

// NewCmdStatic returns `pinniped login static`; runF (nil:
// StaticOptions.Run) does the work.
func NewCmdStatic(f *cmdutil.Factory, runF func(context.Context, *StaticOptions) error) *cobra.Command {
	o := &StaticOptions{f: f}
	cmd := &cobra.Command{
		Use:   "static --token=T | --token-env=VAR [flags]",
		Short: "Print a cluster credential for a static token",
		Long: `static prints a static token as a kubectl credential, or, with
--enable-concierge, trades it at the pinniped agent (which checks it with a
WebhookAuthenticator) for a short-lived cluster credential and caches that.
Prefer --token-env: a token in a kubeconfig is readable by anyone who can read the file.`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, runF),
	}
	flagset.Add(cmd.Flags(), o.Flags.Flags())
	valuelessErrors(cmd)
	return cmd
}

// Complete reads the flags, the environment and kubectl's request into
// the login.
func (o *StaticOptions) Complete() error {
	c, err := o.Flags.Config(o.f.LookupEnv)
	if err != nil {
		return err
	}
	exec, err := execcred.ParseRequest(o.f.Getenv(execcred.EnvVar))
	if err != nil {
		return err
	}
	o.Login, o.Exec = c, exec
	return nil
}

// Validate checks the login (its one model's rules).
func (o *StaticOptions) Validate() error { return o.Login.Validate() }

// Run prints the credential. An interrupt does not cut an exchange short:
// the agent has already been asked, and the credential is worth caching.
func (o *StaticOptions) Run(ctx context.Context) error {
	// Nobody is asked anything: a static token needs no person.
	view := ui.ForLogin(loginsetup.Quiet(o.f, o.Login.CredentialCache, ui.LoginOptions{In: o.f.IO.In, Out: o.f.IO.ErrOut, Getenv: o.f.Getenv, Open: o.f.Browser}))
	runner, err := loginsetup.New(o.f, o.Login.CredentialCache, view)
	if err != nil {
		return err
	}
	return view.Finish(runner.LoginStatic(context.WithoutCancel(ctx), o.Login, o.Exec))
}
