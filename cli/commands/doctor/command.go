package doctor

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/login/kubeexec"
)

// Options are the inputs of `pinniped doctor`.
type Options struct {
	// Kube is --kubeconfig and the context to check.
	Kube    *kubeflags.Flags
	Output  string
	Timeout time.Duration
	// APIGroupSuffix is the agent's, for logins whose arguments do not
	// name one (those without --enable-concierge).
	APIGroupSuffix string
	// AdminKubeconfig reads the agent's objects with its current context's
	// credential instead of the login's.
	AdminKubeconfig string

	f *cmdutil.Factory
	// Doctor is the world the checks reach: Complete makes the real one
	// (a test's runF may replace its adapters before calling Run).
	Doctor *Doctor
}

// NewCmdDoctor returns `pinniped doctor`; runF (nil: Options.Run) does the work.
func NewCmdDoctor(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f, Kube: f.KubeFlags()}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check every link of a kubeconfig context's login, and say how to fix what is broken",
		Long: `doctor walks the chain kubectl goes through for the current kubeconfig context
(or --kubeconfig-context) and prints a checklist: one line a check, OK, WARN,
FAIL or SKIP, with what it found or, when something is wrong, the fix in one
sentence. It never logs you in (no browser, no prompt, no refresh): it reads
the cluster credential a login cached, if there is one (never writing or
deleting a cache entry), and otherwise says which checks need a login. It
sends no credential to a cluster whose server is plain http (an http://
server, or one with no scheme and no certificate-authority, client
certificate or insecure-skip-tls-verify, which kubectl then reaches over
http) or whose certificate checks the kubeconfig turns off. It never
prints a secret. It exits 1 when a check FAILs.

Most users may not read the agent's objects (APIServices, CredentialIssuer,
authenticators); those checks then SKIP. An administrator sees them on a
user's kubeconfig with --admin-kubeconfig, whose current context (with its
own credential, as kubectl would use it) reads them instead. That context
must reach the same cluster: the context's server, or one its agent
advertises (the impersonation proxy); the agent checks FAIL otherwise.
Its credential is used as kubectl would: if it logs in with an exec plugin
(pinniped too), that plugin runs, and may start the administrator's login.
Its secrets are never printed either.

Checks (their names are stable; -o json gives them as "name"):
  kubeconfig.context      the kubeconfig loads; the context, its cluster and user exist
  exec.front              the user's exec entry runs pinniped, and that binary is found
  exec.policy             kubectl's kuberc (credentialPluginPolicy, credentialPluginAllowlist) lets it run
  exec.engine             pinniped-engine sits beside it
  exec.versions           pinniped, pinniped-engine and this binary are the same build
  exec.args               the login arguments parse and validate
  cache.backend           which store logins cache in: the OS keyring, or files and why
  cache.credential        a valid cluster credential is cached (read, never refreshed)
  cluster.api             the API server answers over https checked with the kubeconfig's CA
  clock.cluster           this machine's clock against the API server's
  clock.issuer            this machine's and the cluster's clocks against the issuer's
  issuer.tls              the issuer is https and its certificate is trusted with the login's CA bundle
  issuer.discovery        the issuer's discovery document is valid and names the issuer
  issuer.jwks             the issuer publishes signing keys
  issuer.client           the provider accepts the client id and loopback redirect URI
  issuer.upstream         a Pinniped Supervisor lists the configured identity provider
  agent.api               the agent's TokenCredentialRequest API answers
  agent.apiservice        the agent's APIServices are Available (needs a login)
  agent.credentialissuer  the agent's strategies and frontends (needs a login)
  agent.authenticator     the authenticator exists, is Ready and matches the login (needs a login)
  agent.proxy             the impersonation proxy's endpoint and certificate
  you.identity            who the cluster says you are (needs a login)
  you.permissions         what you can do in the context's namespace (needs a login)`,
		Example: `  pinniped doctor
  pinniped doctor --kubeconfig-context=prod -o json
  pinniped doctor --kubeconfig=alice.kubeconfig --admin-kubeconfig=$HOME/.kube/config`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, runF),
	}
	o.Kube.AddKubeconfig(cmd.Flags(), "path to the kubeconfig file")
	o.Kube.AddContext(cmd.Flags(), "kubeconfig context to check", "kubeconfig-context", "context")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "text", "text, or json")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 10*time.Second, "give up on each check after this long")
	cmd.Flags().StringVar(&o.AdminKubeconfig, "admin-kubeconfig", "", "read the agent's objects with this kubeconfig's current context (an administrator's, for the same cluster) instead of the login's credential; its exec plugin, if any, runs as under kubectl and may log the administrator in; its credential goes only to a verified https server (not with insecure-skip-tls-verify)")
	cmd.Flags().StringVar(&o.APIGroupSuffix, "api-group-suffix", groupsuffix.Default, "API group suffix of the agent's APIs, when the login's arguments do not say (--concierge-api-group-suffix)")
	return cmd
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if o.Output != "text" && o.Output != "json" {
		return fmt.Errorf("-o %q: use text or json", o.Output)
	}
	if o.Timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	if err := groupsuffix.Validate(o.APIGroupSuffix); err != nil {
		return fmt.Errorf("--api-group-suffix: %w", err)
	}
	return nil
}

// Complete sets up the real world the checks reach, and reads
// --admin-kubeconfig.
func (o *Options) Complete() error {
	if o.Doctor == nil {
		o.Doctor = New(o.f, exec.LookPath, runtime.GOOS)
	}
	o.Doctor.Timeout, o.Doctor.APIGroupSuffix = o.Timeout, o.APIGroupSuffix
	if o.AdminKubeconfig != "" {
		admin := o.f.KubeConfig(o.AdminKubeconfig, "")
		raw, err := admin.RawConfig()
		if err != nil {
			return fmt.Errorf("--admin-kubeconfig %s: %w", o.AdminKubeconfig, err)
		}
		// Its errors may quote its credentials as well as the user's.
		for _, u := range raw.AuthInfos {
			o.Doctor.Secrets = append(o.Doctor.Secrets, kubeexec.Secrets(u)...)
		}
		cfg, err := admin.ClientConfig()
		if err != nil {
			return fmt.Errorf("--admin-kubeconfig %s: %w", o.AdminKubeconfig, err)
		}
		o.Doctor.Secrets = append(o.Doctor.Secrets, cfg.BearerToken, string(cfg.KeyData))
		o.Doctor.Admin = cfg
	}
	return nil
}

// ErrFailed is returned when a check failed; the report is already out.
var ErrFailed = errors.New("doctor found problems")

// Run prints the checklist; it returns an error (after the report, in full)
// when a check failed.
func (o *Options) Run(ctx context.Context) error {
	rep := o.Doctor.Run(ctx, o.Kube.ClientConfigFor, o.Kube.Context())
	if err := rep.Write(o.f.IO.Out, o.Output); err != nil {
		return err
	}
	if n := rep.Failed(); n > 0 {
		return fmt.Errorf("%w: %d of %d checks failed", ErrFailed, n, len(rep.Checks))
	}
	return nil
}
