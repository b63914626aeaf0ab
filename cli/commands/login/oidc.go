// Package login implements `pinniped login oidc` and `pinniped login
// static`, the kubectl exec credential plugins. Flags follow upstream
// Pinniped's, so kubeconfigs it generated keep working.
package login

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
	"github.com/pinniped-kit/pinniped/cli/login/loginsetup"
	"github.com/pinniped-kit/pinniped/cli/ui"
)

// NewCmdLogin returns `pinniped login` with its subcommands; by itself it
// logs in ahead for a kubeconfig context.
func NewCmdLogin(f *cmdutil.Factory) *cobra.Command {
	o := &AheadOptions{f: f, Kube: f.KubeFlags()}
	cmd := &cobra.Command{
		Use:   "login [--context NAME]",
		Short: "Log in for a kubeconfig context ahead of time (kubectl runs the login subcommands itself)",
		Long: `login, by itself, logs you in for a kubeconfig context (the current one, or
--context) with the login its exec entry runs: the same login, caches and
keys as kubectl's own calls, which then find the credential cached. Run it
in a terminal before a tool that cannot ask you anything (an IDE, Lens,
Headlamp, a script) needs the cluster, or when such a tool reports that a
login is needed.

"pinniped login oidc" and "pinniped login static" print a short-lived
cluster credential as a kubectl ExecCredential on stdout. kubectl runs them
through the exec plugin section of a kubeconfig made by "pinniped get
kubeconfig"; you rarely run them yourself.

Credentials are cached (OS keyring by default) until shortly before they
expire, so most kubectl calls cost a cache read.`,
		Example: `  pinniped login
  pinniped login --context prod`,
		// Not cobra.NoArgs: its error quotes the word, which a kubeconfig may
		// hold by mistake where a token was meant to go.
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return errors.New("unknown kind of login (not a flag): use `pinniped login oidc` or `pinniped login static`, or `pinniped login --context NAME` to log in ahead")
			}
			return nil
		},
		RunE: cmdutil.RunE(o, nil),
	}
	o.bind(cmd)
	cmd.AddCommand(NewCmdOIDC(f, nil), NewCmdStatic(f, nil))
	return cmd
}

// OIDCOptions are the inputs of `pinniped login oidc`.
type OIDCOptions struct {
	Flags loginflags.OIDC
	// Login and Exec are what Complete made of the flags, the environment
	// and kubectl's KUBERNETES_EXEC_INFO.
	Login *config.OIDC
	Exec  *execcred.Request

	f *cmdutil.Factory
}

// NewCmdOIDC returns `pinniped login oidc`; runF (nil: OIDCOptions.Run)
// does the work.
func NewCmdOIDC(f *cmdutil.Factory, runF func(context.Context, *OIDCOptions) error) *cobra.Command {
	o := &OIDCOptions{f: f}
	cmd := &cobra.Command{
		Use:   "oidc --issuer=URL [flags]",
		Short: "Log in with an OIDC provider and print a cluster credential",
		Long: `oidc gets an ID token from your OIDC provider, trades it at the pinniped agent
for a short-lived cluster credential (with --enable-concierge), and prints it
for kubectl. In order, it uses:

  1. a cached cluster credential that is still valid for more than 30 s;
  2. a cached ID token valid for more than 10 minutes;
  3. a refresh token, without any prompt;
  4. an interactive login: a browser (the link is also printed, and you can
     paste the code back), or --flow=device for machines without a browser,
     or, with --flow=password, the provider's password grant.

With a Pinniped Supervisor, --upstream-identity-provider-name chooses one
of its identity providers (checked against its list) and the flow is the
one it offers first, unless --upstream-identity-provider-flow says; its
cli_password flow asks for your username and password on the terminal.
A password login reads PINNIPED_USERNAME and PINNIPED_PASSWORD when set
(for CI), and asks for what is missing; the variables alone never turn a
browser login into a password one.

Concurrent kubectl calls share one login. When kubectl runs without a
terminal (an IDE, a pipe, a CI job), the browser login still runs: the link
is printed and opened, and only prompts (pasting the code, a password) are
skipped.`,
		Example: `  # what a generated kubeconfig runs
  pinniped login oidc --issuer=https://dex.example.com --client-id=pinniped-cli \
    --enable-concierge --concierge-endpoint=https://10.0.0.1:6443 \
    --concierge-authenticator-type=jwt --concierge-authenticator-name=dex

  # from an SSH session with no browser
  pinniped login oidc --issuer=https://dex.example.com --flow=device

  # in CI
  PINNIPED_USERNAME=ci-bot PINNIPED_PASSWORD=... pinniped login oidc --issuer=https://dex.example.com --flow=password

  # an LDAP provider behind a Pinniped Supervisor
  pinniped login oidc --issuer=https://supervisor.example.com/issuer \
    --upstream-identity-provider-name="Corporate LDAP" --upstream-identity-provider-type=ldap`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, runF),
	}
	flagset.Add(cmd.Flags(), o.Flags.Flags())
	valuelessErrors(cmd)
	return cmd
}

// Complete reads the flags, the environment and kubectl's request into
// the login.
func (o *OIDCOptions) Complete() error {
	exec, err := execcred.ParseRequest(o.f.Getenv(execcred.EnvVar))
	if err != nil {
		return err
	}
	c, err := o.Flags.Config(o.f.Getenv)
	if err != nil {
		return err
	}
	o.Exec, o.Login = exec, c
	return nil
}

// Validate checks the login (its one model's rules).
func (o *OIDCOptions) Validate() error { return o.Login.Validate() }

// Run logs in.
func (o *OIDCOptions) Run(ctx context.Context) error {
	c := o.Login
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	// The screen's cancel key ends the login with tui.ErrCanceled as cause.
	ctx, cancelLogin := context.WithCancelCause(ctx)
	defer cancelLogin(nil)
	// The interactive screen only when a person can use it (cli/ui decides);
	// it draws nothing until the login needs the person, and a login that
	// needs nobody shows nothing at all (loginsetup.Quiet).
	view := ui.ForLogin(loginsetup.Quiet(o.f, c.CredentialCache, ui.LoginOptions{
		In: o.f.IO.In, Out: o.f.IO.ErrOut, Interactive: o.Exec.Interactive, Getenv: o.f.Getenv, Open: o.f.Browser, Now: o.f.Now,
		Issuer: c.Issuer, Cancel: cancelLogin,
	}))
	runner, err := loginsetup.NewOIDC(o.f, c, view)
	if err != nil {
		return err
	}
	return view.Finish(runner.LoginOIDC(ctx, c, o.Exec))
}

// valuelessErrors makes cmd's argument errors name the flag at fault but
// never quote an argument: kubectl shows a plugin's stderr, CI logs keep it,
// and the arguments come from a kubeconfig that may hold a token in the
// wrong place.
func valuelessErrors(cmd *cobra.Command) {
	cmd.Args = func(_ *cobra.Command, args []string) error { return flagset.UnexpectedArgs(len(args)) }
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage", flagset.Valueless(err), c.CommandPath())
	})
}
