// Package install implements `pinniped install` and `pinniped uninstall`:
// flags in, then install/render and install/apply do the work.
package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
	"github.com/pinniped-kit/pinniped/agent/apis/credentialttl"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/apis/helperpod"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/ui"
	"github.com/pinniped-kit/pinniped/install/apply"
	"github.com/pinniped-kit/pinniped/install/render"
)

// DefaultImageRepository holds release images of the agent.
const DefaultImageRepository = render.DefaultImageRepository

// Options are the inputs of `pinniped install`.
type Options struct {
	Kube      *kubeflags.Flags
	Render    render.Config
	OIDCCA    string // path
	WebhookCA string // path
	DryRun    string
	Output    string
	Wait      bool
	Timeout   time.Duration
	Version   string
	// KubeCertAgent is --kube-cert-agent.
	KubeCertAgent bool

	f *cmdutil.Factory

	Out, ErrOut io.Writer
}

// NewCmdInstall returns `pinniped install`; runF (nil: Options.Run) does the work.
func NewCmdInstall(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Kube: f.KubeFlags(), Version: f.Version.Version, Out: f.IO.Out, ErrOut: f.IO.ErrOut, f: f}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install or upgrade the pinniped agent in a cluster",
		Long: `install puts the pinniped agent into the cluster of your current kubeconfig
context: its CRDs, RBAC, Deployment, Service, APIServices and a default
CredentialIssuer, plus an authenticator if you name an identity provider.

It uses server-side apply, so running it again upgrades in place and changes
nothing that is already right. Unless --wait=false, it waits until the agent
serves requests and a credential strategy works, and says what is wrong if
that does not happen in time.

Needs cluster-admin rights. To review or commit the manifests instead of
applying them, use -o yaml (GitOps) or --dry-run=server (validate only).`,
		Example: `  # install, trusting tokens from an OIDC issuer for this cluster's audience
  pinniped install --oidc-issuer=https://dex.example.com --oidc-audience=prod-cluster-7f3a

  # print the manifests for GitOps
  pinniped install --oidc-issuer=https://dex.example.com --oidc-audience=prod -o yaml > pinniped.yaml

  # use a TokenReview webhook instead of OIDC
  pinniped install --webhook-endpoint=https://authn.example.com/review --webhook-ca-bundle=ca.pem

  # beside a Concierge (or another agent) that keeps the default API groups
  pinniped install --api-group-suffix=example.com --namespace=pinniped-example \
    --oidc-issuer=https://dex.example.com --oidc-audience=prod-cluster-7f3a`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, runF),
	}
	fs := cmd.Flags()
	o.Kube.AddTo(fs)
	fs.StringVar(&o.Render.Image, "image", "", "agent image (default "+DefaultImageRepository+":<this CLI's version>, <version>-fips from a CLI of the FIPS flavour)")
	fs.StringVar(&o.Render.ImagePullPolicy, "image-pull-policy", "IfNotPresent", "Always, IfNotPresent or Never")
	fs.Int32Var(&o.Render.Replicas, "replicas", 2, "agent replicas (all serve; one leads the controllers)")
	fs.StringVar(&o.Render.OIDCIssuer, "oidc-issuer", "", "create a JWTAuthenticator trusting this https OIDC issuer")
	fs.StringVar(&o.Render.OIDCAudience, "oidc-audience", "", "audience (client ID) tokens must carry; make it unique to this cluster")
	fs.StringVar(&o.OIDCCA, "oidc-ca-bundle", "", "PEM file of CAs that sign the issuer's certificate (default: system roots)")
	fs.StringVar(&o.Render.UsernameClaim, "oidc-username-claim", "", "claim used as the username (default \"username\")")
	fs.StringVar(&o.Render.GroupsClaim, "oidc-groups-claim", "", "claim used as the groups (default \"groups\")")
	fs.StringVar(&o.Render.WebhookEndpoint, "webhook-endpoint", "", "create a WebhookAuthenticator posting TokenReviews to this https URL")
	fs.StringVar(&o.WebhookCA, "webhook-ca-bundle", "", "PEM file of CAs that sign the webhook's certificate")
	fs.StringVar(&o.Render.AuthenticatorName, "authenticator-name", "default", "name of the created JWTAuthenticator or WebhookAuthenticator")
	fs.BoolVar(&o.KubeCertAgent, "kube-cert-agent", true, "let the agent read the cluster signing key through a helper pod beside kube-controller-manager (false: never; the CSR API or the impersonation proxy is used, and the agent gets none of the permissions the helper needs; see docs/security.md)")
	fs.Int64Var(&o.Render.KubeCertAgentPod.RunAsUser, helperpod.FlagRunAsUser, 0, helperpod.UsageRunAsUser)
	fs.Int64Var(&o.Render.KubeCertAgentPod.RunAsGroup, helperpod.FlagRunAsGroup, 0, helperpod.UsageRunAsGroup)
	fs.StringVar(&o.Render.KubeCertAgentPod.Strategy, helperpod.FlagStrategy, "", helperpod.UsageStrategy)
	fs.StringVar(&o.Render.GroupSuffix, "api-group-suffix", groupsuffix.Default, "suffix of the agent's API groups, <prefix>.concierge.<suffix> (upstream's api_group_suffix); another value than the default lets this install run beside one that has it, in another --namespace")
	fs.Var(ttlFlag{&o.Render.CredentialTTL}, "credential-ttl", fmt.Sprintf(
		"lifetime of the client certificates the agent issues, from %s to %s (default %s; the CSR strategy uses at least %s). "+
			"Certificates cannot be revoked: a longer lifetime keeps one valid that much longer after its user is removed at the identity provider or logs out. "+
			"Clients that keep streams open (watches, logs -f) lose them at each renewal, and a longer lifetime only makes that rarer: through the impersonation proxy, tokens fix that with short lifetimes, and for direct access 'pinniped proxy' does; see docs/security.md and docs/local-proxy.md",
		credentialttl.Format(credentialttl.Min), credentialttl.Format(credentialttl.Max), credentialttl.Format(credentialttl.Default), credentialttl.Format(credentialttl.MinCSR)))
	fs.StringVar(&o.Render.ProxyCredential, "proxy-credential", "", "what the impersonation proxy's TokenCredentialRequest returns: token (default; a bearer token valid only at this installation's proxy, so renewals do not cut clients' watches and log tails) or certificate (for clients that need one, and before downgrading to an agent without proxy tokens; see docs/security.md)")
	fs.StringVar(&o.Render.ProxyAudit, "proxy-audit", "", "impersonation proxy requests the agent writes an audit line for: all (default), changes (all but successful reads) or none (metrics only)")
	fs.StringVar(&o.DryRun, "dry-run", "none", `"client" prints without contacting the cluster, "server" validates on the cluster without persisting`)
	fs.StringVarP(&o.Output, "output", "o", "", "print the manifests as yaml or json instead of applying them")
	fs.BoolVar(&o.Wait, "wait", true, "wait until the agent works")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "how long --wait waits")
	return cmd
}

// ttlFlag is --credential-ttl. Unset leaves the duration zero, which renders
// no flag and keeps the agent's default; a value is refused here, while the
// flags are parsed, by the agent's own rule, so that an explicit 0 is an
// error rather than a silent default.
type ttlFlag struct{ d *time.Duration }

func (f ttlFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "" // no "(default ...)" in --help: the agent's default applies
	}
	return credentialttl.Format(*f.d)
}

func (f ttlFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%w: write a number with a unit, such as 10m or 2h", err)
	}
	if err := credentialttl.Check(d); err != nil {
		return err
	}
	*f.d = d
	return nil
}

func (ttlFlag) Type() string { return "duration" }

// Complete fills defaults and reads files.
func (o *Options) Complete() error {
	o.Render.Namespace = o.Kube.NamespaceOr("pinniped")
	o.Render.Version = o.Version
	o.Render.NoKubeCertAgent = !o.KubeCertAgent
	o.Render.Defaults()
	if o.Render.Image == "" {
		o.Render.Image = render.DefaultImage(o.Version, buildinfo.FIPSBuild())
	}
	var err error
	if o.Render.OIDCCABundle, err = readPEM("--oidc-ca-bundle", o.OIDCCA); err != nil {
		return err
	}
	if o.Render.WebhookCABundle, err = readPEM("--webhook-ca-bundle", o.WebhookCA); err != nil {
		return err
	}
	return nil
}

func readPEM(flag, path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path) //nolint:gosec // the user names the file
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if !strings.Contains(string(b), "-----BEGIN CERTIFICATE-----") {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", flag, path)
	}
	return b, nil
}

// Validate rejects flag combinations that cannot work.
func (o *Options) Validate() error {
	var errs []error
	switch o.DryRun {
	case "none", "client", "server":
	default:
		errs = append(errs, fmt.Errorf(`--dry-run=%q: use "none", "client" or "server"`, o.DryRun))
	}
	switch o.Output {
	case "", "yaml", "json":
	default:
		errs = append(errs, fmt.Errorf("-o %q: use yaml or json", o.Output))
	}
	if o.Timeout <= 0 {
		errs = append(errs, errors.New("--timeout must be positive"))
	}
	if err := o.Render.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run renders, then prints or applies.
func (o *Options) Run(ctx context.Context) error {
	objs, err := render.Render(o.Render)
	if err != nil {
		return err
	}
	if o.Output != "" || o.DryRun == "client" {
		if o.Output == "json" {
			return render.WriteJSON(o.Out, objs)
		}
		return render.WriteYAML(o.Out, objs, fmt.Sprintf("pinniped agent %s, rendered by `pinniped install -o yaml`.\nApply with: kubectl apply --server-side -f <this file>", o.Version))
	}
	dyn, cfg, err := o.f.Dynamic(o.Kube.ClientConfig())
	if err != nil {
		return err
	}
	p := ui.For(o.f.IO.In, o.ErrOut, o.f.Getenv)
	defer ui.Close(p)
	in := &apply.Installer{Dynamic: dyn, Progress: p, ServerDryRun: o.DryRun == "server", GroupSuffix: o.Render.GroupSuffix}
	fmt.Fprintf(o.ErrOut, "Installing pinniped agent %s into %s (namespace %s)\n", o.Render.Image, cfg.Host, o.Render.Namespace)
	if err := in.Apply(ctx, objs); err != nil {
		return err
	}
	if o.DryRun == "server" {
		fmt.Fprintln(o.ErrOut, "Server-side dry run: the cluster accepted every object; nothing was changed.")
		return nil
	}
	if o.Render.NoKubeCertAgent {
		// An earlier install's helper still mounts the signing key; the
		// agent no longer has the permissions to remove it itself.
		removed, err := in.RemoveKubeCertAgent(ctx, o.Render.Namespace)
		if err != nil {
			return err
		}
		if removed {
			fmt.Fprintln(o.ErrOut, "Removed the kube-cert-agent helper of an earlier install (--kube-cert-agent=false).")
		}
	}
	if !o.Wait {
		fmt.Fprintln(o.ErrOut, "Applied. Not waiting (--wait=false); check with: kubectl get credentialissuers."+
			groupsuffix.Group(groupsuffix.Config, o.Render.GroupSuffix)+" "+render.CredentialIssuerName+" -o yaml")
		return nil
	}
	if err := in.Wait(ctx, o.Render.Namespace, o.Timeout); err != nil {
		return err
	}
	next := "pinniped get kubeconfig"
	if !groupsuffix.IsDefault(o.Render.GroupSuffix) {
		next += " --concierge-api-group-suffix=" + o.Render.GroupSuffix
	}
	fmt.Fprintln(o.ErrOut, "pinniped is ready. Next: "+next+" > user-kubeconfig.yaml")
	return nil
}
