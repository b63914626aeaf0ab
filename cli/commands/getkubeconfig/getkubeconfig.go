// Package getkubeconfig implements `pinniped get kubeconfig`: flags in,
// package kubeconfig does the discovery and generation.
package getkubeconfig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/discovery"
	"github.com/pinniped-kit/pinniped/cli/ui"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
	"github.com/pinniped-kit/pinniped/kubeconfig"
)

// Options are the inputs of `pinniped get kubeconfig`.
type Options struct {
	// Kube is --kubeconfig and --kubeconfig-context: the admin's
	// kubeconfig, and its one context to make a kubeconfig for.
	Kube *kubeflags.Flags
	// Contexts (--context, repeatable) and AllContexts make one kubeconfig
	// for several clusters at once: a context each.
	Contexts    []string
	AllContexts bool

	// Static is the static-token login asked for (--static-token,
	// --static-token-env), if any.
	Static                 config.Static
	NoConcierge            bool
	CredentialIssuer       string
	AuthenticatorType      string
	AuthenticatorName      string
	APIGroupSuffix         string
	SkipWait               bool
	ConciergeCABundlePaths []string
	ConciergeEndpoint      string
	ConciergeMode          string

	// OIDC is the login the --oidc-*, --upstream-identity-provider-* and
	// --credential-cache flags ask for; Run fills in what they leave empty
	// (issuer, CA, audience, provider) from the cluster and the issuer.
	// Scopes are those asked for; Run writes those the issuer takes.
	OIDC              config.OIDC
	OIDCCABundlePaths []string

	SkipValidation bool
	Timeout        time.Duration
	Output         string
	Merge          bool
	NameSuffix     string
	PinnipedPath   string
	InstallHint    string

	In          io.Reader
	Out, ErrOut io.Writer

	f *cmdutil.Factory
}

// NewCmdGet returns `pinniped get` with its `kubeconfig` subcommand.
func NewCmdGet(f *cmdutil.Factory) *cobra.Command {
	get := &cobra.Command{Use: "get", Short: "Get things that help you use a cluster", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
	get.AddCommand(NewCmdKubeconfig(f, nil))
	return get
}

// NewCmdKubeconfig returns `pinniped get kubeconfig`; runF (nil:
// Options.Run) does the work.
func NewCmdKubeconfig(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{In: f.IO.In, Out: f.IO.Out, ErrOut: f.IO.ErrOut, f: f, Kube: f.KubeFlags()}
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Make a kubeconfig that logs users in with pinniped",
		Long: `kubeconfig reads, with your (admin) kubeconfig, how the pinniped agent on the
cluster issues credentials: its CredentialIssuer and best frontend, the
authenticator, and for JWT authenticators the OIDC issuer, audience and CA.
It prints a kubeconfig for users whose user entry runs "pinniped login" as a
kubectl exec plugin. The kubeconfig holds no secrets (but an --oidc-client-secret,
which providers that want one from installed apps do not treat as one); hand it out freely.

With several authenticators and a terminal, it asks which to use; otherwise
name one with --concierge-authenticator-type/--concierge-authenticator-name.`,
		Example: `  pinniped get kubeconfig > alice.kubeconfig
  KUBECONFIG=alice.kubeconfig kubectl get namespaces   # logs alice in

  # add a context to an existing kubeconfig instead
  pinniped get kubeconfig -o ~/.kube/config --merge

  # one kubeconfig for a fleet: clusters that trust one issuer share one login
  pinniped get kubeconfig --context prod --context staging > fleet.kubeconfig
  pinniped get kubeconfig --all-contexts > fleet.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, runF),
	}
	fs := cmd.Flags()
	o.Kube.AddKubeconfig(fs, "admin kubeconfig to read the cluster with")
	o.Kube.AddContext(fs, "context of --kubeconfig to use", "kubeconfig-context")
	fs.StringArrayVar(&o.Contexts, "context", nil, "a context of --kubeconfig to make a context for (repeatable: one kubeconfig for several clusters)")
	fs.BoolVar(&o.AllContexts, "all-contexts", false, "make a context for every context of --kubeconfig whose cluster runs the pinniped agent (the others are named and skipped)")
	fs.StringVar(&o.Static.Token, "static-token", "", "log in with this static token (visible in the kubeconfig: prefer --static-token-env)")
	fs.StringVar(&o.Static.TokenEnv, "static-token-env", "", "log in with the token in this environment variable")
	fs.BoolVar(&o.NoConcierge, "no-concierge", false, "use the ID token itself as the credential (the cluster must trust the issuer directly)")
	fs.StringVar(&o.CredentialIssuer, "concierge-credential-issuer", "", "CredentialIssuer to read (default: the only one)")
	fs.StringVar(&o.AuthenticatorType, "concierge-authenticator-type", "", "jwt or webhook (default: discovered)")
	fs.StringVar(&o.AuthenticatorName, "concierge-authenticator-name", "", "authenticator name (default: discovered)")
	fs.StringVar(&o.APIGroupSuffix, "concierge-api-group-suffix", groupsuffix.Default, "API group suffix of the agent's APIs")
	fs.BoolVar(&o.SkipWait, "concierge-skip-wait", false, "do not wait while a credential strategy is Pending")
	fs.StringSliceVar(&o.ConciergeCABundlePaths, "concierge-ca-bundle", nil, "PEM file(s) overriding the discovered CA of the agent's endpoint")
	fs.StringVar(&o.ConciergeEndpoint, "concierge-endpoint", "", "override the discovered endpoint of the agent")
	fs.StringVar(&o.ConciergeMode, "concierge-mode", "", "TokenCredentialRequestAPI or ImpersonationProxy (default: the first that works)")
	fs.StringVar(&o.OIDC.Issuer, "oidc-issuer", "", "override the JWTAuthenticator's issuer")
	fs.StringVar(&o.OIDC.ClientID, "oidc-client-id", "pinniped-cli", "OIDC client ID users log in with")
	fs.StringVar(&o.OIDC.ClientSecret, "oidc-client-secret", "", "client secret, for providers that want one from an installed app (Google); written into the kubeconfig, as such providers expect")
	fs.StringSliceVar(&o.OIDC.AuthorizeParams, "oidc-authorize-param", nil, "extra name=value parameter of the authorization (and device) request, e.g. prompt=select_account (repeatable; a value cannot hold a comma)")
	fs.StringVar(&o.OIDC.PresentToken, "oidc-present-token", "", "the token the cluster is shown: id (default) or access")
	fs.IntVar(&o.OIDC.ListenPort, "oidc-listen-port", 0, "fixed port for the login callback listener")
	fs.StringSliceVar(&o.OIDC.Scopes, "oidc-scopes", slices.Clone(config.DefaultScopes), "scopes to request; of an issuer that is not a Supervisor, only those it supports are written")
	fs.BoolVar(&o.OIDC.SkipBrowser, "oidc-skip-browser", false, "print the login link instead of opening a browser")
	fs.StringSliceVar(&o.OIDCCABundlePaths, "oidc-ca-bundle", nil, "PEM file(s) overriding the issuer's discovered CA (repeatable)")
	fs.StringVar(&o.OIDC.RequestAudience, "oidc-request-audience", "", "override the audience to request (default: the JWTAuthenticator's)")
	fs.StringVar((*string)(&o.OIDC.Flow), "oidc-flow", "", "login method users get: browser, device or password (default: browser with paste)")
	fs.StringVar(&o.OIDC.SessionCache, "oidc-session-cache", "", "--session-cache for users' logins (upstream compatibility)")
	fs.StringVar(&o.OIDC.Upstream.Name, "upstream-identity-provider-name", "", "the identity provider behind a Pinniped Supervisor (default: the only one, or a choice on a terminal)")
	fs.StringVar(&o.OIDC.Upstream.Type, "upstream-identity-provider-type", "", "its type: oidc, ldap, activedirectory or github")
	fs.StringVar(&o.OIDC.Upstream.Flow, "upstream-identity-provider-flow", "", "browser_authcode or cli_password (default: the provider's first)")
	fs.BoolVar(&o.OIDC.SkipListen, "oidc-skip-listen", false, "users paste the code instead of a callback listener")
	fs.Bool("oidc-debug-session-cache", false, "accepted for upstream compatibility; ignored")
	fs.String("concierge-namespace", "", "deprecated upstream flag; ignored (the namespace is discovered)")
	for _, h := range []string{"oidc-skip-listen", "oidc-debug-session-cache", "concierge-namespace"} {
		_ = fs.MarkHidden(h)
	}
	fs.BoolVar(&o.SkipValidation, "skip-validation", false, "do not check that the generated kubeconfig's endpoint answers")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.StringVarP(&o.Output, "output", "o", "", "write to this file instead of stdout")
	fs.BoolVar(&o.Merge, "merge", false, "with -o, add the new cluster, user and context to that kubeconfig, leaving the rest untouched")
	fs.StringVar(&o.NameSuffix, "generated-name-suffix", "-pinniped", "suffix of the generated cluster, user and context names")
	fs.StringVar(&o.OIDC.CredentialCache, "credential-cache", "", "--credential-cache for users' logins (default: keyring)")
	fs.StringVar(&o.PinnipedPath, "pinniped-cli-path", "", "path of pinniped in users' kubeconfig (default: this binary)")
	fs.StringVar(&o.InstallHint, "install-hint", "The pinniped CLI is missing: install it from https://github.com/pinniped-kit/pinniped/releases", "what kubectl shows when pinniped is not installed")
	return cmd
}

// Complete spells the enumerated flags as the rest of the command does:
// upstream takes them in any case.
func (o *Options) Complete() error {
	for _, mode := range []string{"TokenCredentialRequestAPI", "ImpersonationProxy"} {
		if strings.EqualFold(o.ConciergeMode, mode) {
			o.ConciergeMode = mode
		}
	}
	o.AuthenticatorType = strings.ToLower(o.AuthenticatorType)
	up := &o.OIDC.Upstream
	o.OIDC.Flow, up.Type, up.Flow = config.Flow(strings.ToLower(string(o.OIDC.Flow))), strings.ToLower(up.Type), strings.ToLower(up.Flow)
	return nil
}

// Validate checks flags without contacting anything.
func (o *Options) Validate() error {
	var errs []error
	if o.Static.Token != "" && o.Static.TokenEnv != "" {
		errs = append(errs, errors.New("use --static-token or --static-token-env, not both"))
	}
	switch o.ConciergeMode {
	case "", "TokenCredentialRequestAPI", "ImpersonationProxy":
	default:
		errs = append(errs, fmt.Errorf("--concierge-mode %q: use TokenCredentialRequestAPI or ImpersonationProxy", o.ConciergeMode))
	}
	switch o.AuthenticatorType {
	case "", "jwt", "webhook":
	default:
		errs = append(errs, fmt.Errorf("--concierge-authenticator-type %q: use jwt or webhook", o.AuthenticatorType))
	}
	if (o.AuthenticatorType == "") != (o.AuthenticatorName == "") {
		errs = append(errs, errors.New("set both --concierge-authenticator-type and --concierge-authenticator-name, or neither"))
	}
	if err := groupsuffix.Validate(o.APIGroupSuffix); err != nil {
		errs = append(errs, fmt.Errorf("--concierge-api-group-suffix: %w", err))
	}
	if one := o.Kube.Context(); len(o.Contexts) > 0 && (o.AllContexts || one != "") || o.AllContexts && one != "" {
		errs = append(errs, errors.New("use one of --kubeconfig-context, --context (repeatable) and --all-contexts"))
	}
	if o.Merge && o.Output == "" {
		errs = append(errs, errors.New("--merge needs -o naming the kubeconfig to add to"))
	}
	if o.OIDC.Issuer != "" {
		if err := httpsurl.Check("--oidc-issuer", o.OIDC.Issuer); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Timeout <= 0 {
		errs = append(errs, errors.New("--timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Run discovers and writes the kubeconfig: a context for the one asked
// for, or one for each of several (--context, --all-contexts), in one file.
// Each context has --timeout of its own. With --all-contexts a context that
// cannot be made (no agent there, unreachable, another problem) is named
// with its reason and skipped, and so is one whose user already logs in
// with pinniped; named contexts must all work.
func (o *Options) Run(ctx context.Context) error {
	raw, err := o.Kube.RawConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	names := o.Contexts
	switch {
	case o.AllContexts:
		names = slices.Sorted(maps.Keys(raw.Contexts))
		if len(names) == 0 {
			return errors.New("the kubeconfig has no context")
		}
	case len(names) == 0:
		names = []string{o.Kube.Context()}
	}
	out := clientcmdapi.NewConfig()
	done := map[string]string{} // cluster -> the context made for it
	var shown []kubeconfig.Presented
	var skipped []string
	skip := func(name, why string) {
		skipped = append(skipped, fmt.Sprintf("%s (%s)", termsafe.Visible(name), why))
	}
	for _, name := range names {
		resolved := name
		if resolved == "" {
			resolved = raw.CurrentContext
		}
		var cluster string
		if kctx := raw.Contexts[resolved]; kctx != nil {
			cluster = kctx.Cluster
			if u := raw.AuthInfos[kctx.AuthInfo]; o.AllContexts && u != nil && u.Exec != nil && handoff.IsFront(u.Exec.Command) {
				skip(name, "it already logs in with pinniped")
				continue
			}
		}
		if from, dup := done[cluster]; dup && cluster != "" {
			// Two contexts of one cluster: one context for it is enough.
			fmt.Fprintf(o.ErrOut, "• context %s is the same cluster as %s: one context serves both\n", termsafe.Visible(name), termsafe.Visible(from))
			continue
		}
		gen, token, err := o.generateWithin(ctx, name)
		if ctx.Err() != nil {
			// Interrupted: what was made so far is no fleet kubeconfig,
			// and must not replace the one at -o.
			return fmt.Errorf("stopped before every context was made, nothing was written: %w", context.Cause(ctx))
		}
		if o.AllContexts && err != nil {
			why := termsafe.Visible(err.Error())
			if errors.Is(err, kubeconfig.ErrNotInstalled) {
				why = "no pinniped agent there"
			}
			skip(name, why)
			continue
		}
		if err != nil {
			if len(names) > 1 {
				return fmt.Errorf("context %q: %w", name, err)
			}
			return err
		}
		done[cluster] = name
		shown = append(shown, token)
		if err := kubeconfig.Merge(out, gen); err != nil {
			return err
		}
		if out.CurrentContext == "" {
			out.CurrentContext = gen.CurrentContext // the first asked for
		}
	}
	for _, s := range skipped {
		fmt.Fprintf(o.ErrOut, "• skipped %s\n", s)
	}
	if len(done) == 0 {
		return fmt.Errorf("no context could be made for any of the kubeconfig's contexts: %w", kubeconfig.ErrNotInstalled)
	}
	if err := o.write(out); err != nil {
		return err
	}
	// Only this run sees every cluster's authenticator side by side; the
	// clusters' admins each see their own.
	for _, s := range kubeconfig.SharedTokens(shown) {
		fmt.Fprintln(o.ErrOut, s.Warning(termsafe.Visible))
	}
	return nil
}

// generateWithin is generate within --timeout of its own.
func (o *Options) generateWithin(ctx context.Context, contextName string) (*clientcmdapi.Config, kubeconfig.Presented, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	return o.generate(ctx, contextName)
}

// generate is the kubeconfig for one context of --kubeconfig ("": its
// current one): its cluster, through the agent's exchange endpoint, with
// the login the flags and the agent's authenticator make; and the token
// that login shows the cluster.
func (o *Options) generate(ctx context.Context, contextName string) (*clientcmdapi.Config, kubeconfig.Presented, error) {
	var none kubeconfig.Presented
	cc := o.Kube.ClientConfigFor(contextName)
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, none, fmt.Errorf("load kubeconfig: %w", err)
	}
	dyn, _, err := o.f.Dynamic(cc)
	if err != nil {
		return nil, none, err
	}
	clusterName, cluster, ca, err := contextCluster(raw, contextName)
	if err != nil {
		return nil, none, err
	}
	d := &kubeconfig.Discoverer{Dynamic: dyn, APIGroupSuffix: o.APIGroupSuffix, Poll: 2 * time.Second, Wait: o.Timeout, Progress: func(s string) { fmt.Fprintln(o.ErrOut, "• "+s) }}

	pinniped := kubeconfig.Exec{Path: o.PinnipedPath, InstallHint: o.InstallHint}
	if pinniped.Path == "" {
		pinniped.Path = handoff.FrontPath(o.f.Getenv)
	}
	server, serverCA := cluster.Server, ca
	var conc *config.Concierge
	var auth *kubeconfig.Authenticator
	if !o.NoConcierge {
		if conc, auth, err = o.concierge(ctx, d, cluster.Server, ca); err != nil {
			return nil, none, err
		}
		server, serverCA = conc.Endpoint, conc.CABundle
	}
	login, err := o.login(ctx, conc, auth)
	if err != nil {
		return nil, none, err
	}
	name := clusterName + o.NameSuffix
	gen := kubeconfig.Build(name, server, serverCA, pinniped, login)
	if !o.SkipValidation {
		if err := o.validateEndpoint(ctx, server, serverCA); err != nil {
			return nil, none, err
		}
	}
	return gen, presented(name, login, auth), nil
}

// presented is the token login shows the cluster of the context named
// name, as the login runner picks it: an exchanged token when it trades
// for an audience, else the access token when told to, else the ID token.
func presented(name string, login kubeconfig.Login, auth *kubeconfig.Authenticator) kubeconfig.Presented {
	c, ok := login.(*config.OIDC)
	if !ok {
		return kubeconfig.Presented{Context: name} // a static token: no issuer
	}
	p := kubeconfig.Presented{Context: name, Issuer: c.Issuer, Audience: c.ClientID, Token: kubeconfig.IDToken}
	switch {
	case c.ExchangesToken():
		p.Token, p.Audience = kubeconfig.ExchangedToken, c.RequestAudience
	case c.PresentsAccessToken():
		// An access token's audience is the API's, which only a
		// JWTAuthenticator here names.
		p.Token, p.Audience = kubeconfig.AccessToken, ""
		if auth != nil && auth.Type == "jwt" {
			p.Audience = auth.Audience
		}
	}
	return p
}

// contextCluster is the cluster of kubeconfig context name (the current
// one when name is empty): its name, entry and CA bundle.
func contextCluster(raw clientcmdapi.Config, name string) (string, *clientcmdapi.Cluster, []byte, error) {
	if name == "" {
		name = raw.CurrentContext
	}
	kctx := raw.Contexts[name]
	if kctx == nil {
		return "", nil, nil, fmt.Errorf("kubeconfig has no context %q", name)
	}
	cluster := raw.Clusters[kctx.Cluster]
	if cluster == nil {
		return "", nil, nil, fmt.Errorf("kubeconfig context %q names a missing cluster %q", name, kctx.Cluster)
	}
	ca := cluster.CertificateAuthorityData
	if len(ca) == 0 && cluster.CertificateAuthority != "" {
		var err error
		if ca, err = os.ReadFile(cluster.CertificateAuthority); err != nil {
			return "", nil, nil, fmt.Errorf("read the cluster CA: %w", err)
		}
	}
	return kctx.Cluster, cluster, ca, nil
}

// concierge is where and with which authenticator the login exchanges its
// token: the agent's exchange endpoint (the cluster's API server at server,
// or the impersonation proxy), unless the flags name one.
func (o *Options) concierge(ctx context.Context, d *kubeconfig.Discoverer, server string, ca []byte) (*config.Concierge, *kubeconfig.Authenticator, error) {
	front, err := d.ExchangeEndpoint(ctx, o.CredentialIssuer, o.ConciergeMode, o.SkipWait, kubeconfig.ExchangeEndpoint{Endpoint: server, CABundle: ca})
	if err != nil {
		return nil, nil, err
	}
	if o.ConciergeEndpoint != "" {
		front.Endpoint = o.ConciergeEndpoint
	}
	if len(o.ConciergeCABundlePaths) > 0 {
		if front.CABundle, err = readFiles(o.ConciergeCABundlePaths); err != nil {
			return nil, nil, fmt.Errorf("--concierge-ca-bundle: %w", err)
		}
	}
	auth, err := o.chooseAuthenticator(ctx, d)
	if err != nil {
		return nil, nil, err
	}
	return &config.Concierge{Endpoint: front.Endpoint, CABundle: front.CABundle, APIGroupSuffix: o.APIGroupSuffix,
		AuthenticatorType: auth.Type, AuthenticatorName: auth.Name}, auth, nil
}

// login is the login the kubeconfig's exec entry runs: a static token's,
// or an OIDC login completed from the authenticator and the issuer. It is
// refused here if every login with the kubeconfig would refuse it.
func (o *Options) login(ctx context.Context, conc *config.Concierge, auth *kubeconfig.Authenticator) (kubeconfig.Login, error) {
	if o.Static.Token != "" || o.Static.TokenEnv != "" {
		s := o.Static
		s.Concierge, s.CredentialCache = conc, o.OIDC.CredentialCache
		if conc != nil {
			if err := conc.Validate(); err != nil {
				return nil, fmt.Errorf("the kubeconfig would not work: %w", err)
			}
		}
		return &s, nil
	}
	c := o.OIDC
	c.Concierge = conc
	if err := o.completeOIDC(ctx, &c, auth); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("the kubeconfig would not work: %w", err)
	}
	return &c, nil
}

func (o *Options) chooseAuthenticator(ctx context.Context, d *kubeconfig.Discoverer) (*kubeconfig.Authenticator, error) {
	typ, name := o.AuthenticatorType, o.AuthenticatorName
	if typ == "" {
		all, err := d.Authenticators(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case len(all) == 0:
			return nil, errors.New("the cluster has no JWTAuthenticator or WebhookAuthenticator; create one (pinniped install --oidc-issuer=... or --webhook-endpoint=...)")
		case len(all) == 1:
			typ, name = all[0].Type, all[0].Name
		default:
			picked, err := o.pick(all)
			if err != nil {
				return nil, err
			}
			typ, name = picked.Type, picked.Name
		}
	}
	return d.Authenticator(ctx, typ, name)
}

// pick asks a person at a terminal; anyone else gets a list to choose from.
func (o *Options) pick(all []kubeconfig.Authenticator) (*kubeconfig.Authenticator, error) {
	list := make([]string, len(all))
	for i, a := range all {
		list[i] = fmt.Sprintf("%s/%s", a.Type, a.Name)
	}
	n, err := ui.Choose(o.In, o.ErrOut, o.f.Getenv, "The cluster has several authenticators. Which one should users log in with?", list)
	if errors.Is(err, ui.ErrNotATerminal) {
		return nil, fmt.Errorf("the cluster has %d authenticators (%s); choose one with --concierge-authenticator-type and --concierge-authenticator-name",
			len(all), strings.Join(list, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("choose an authenticator: %w", err)
	}
	return &all[n], nil
}

// completeOIDC fills in the issuer side of the OIDC login the flags ask
// for, where they leave it empty, from the chosen JWTAuthenticator (nil
// without the agent).
func (o *Options) completeOIDC(ctx context.Context, c *config.OIDC, auth *kubeconfig.Authenticator) error {
	if auth != nil {
		if c.Issuer == "" {
			c.Issuer = auth.Issuer
		}
		// Presenting the access token, the authenticator's audience is
		// the access token's (an API's), not one to exchange for.
		if c.RequestAudience == "" && !c.PresentsAccessToken() {
			c.RequestAudience = auth.Audience
		}
		c.CABundle = auth.CABundle
	}
	if c.Issuer == "" {
		return errors.New("the chosen authenticator is not a JWTAuthenticator; pass --oidc-issuer, or --static-token-env for a webhook")
	}
	if len(o.OIDCCABundlePaths) > 0 {
		b, err := readFiles(o.OIDCCABundlePaths)
		if err != nil {
			return fmt.Errorf("--oidc-ca-bundle: %w", err)
		}
		c.CABundle = b
	}
	if c.RequestAudience == c.ClientID {
		c.RequestAudience = "" // the ID token already has it
	}
	// The Supervisor refuses to mint tokens for such an audience (they
	// would be good at its own APIs), so every login would fail.
	if strings.Contains(c.RequestAudience, ".pinniped.dev") {
		return fmt.Errorf("the audience %q contains .pinniped.dev, which a Supervisor refuses to exchange tokens for: give the JWTAuthenticator another spec.audience, or pass --oidc-request-audience", c.RequestAudience)
	}
	client, err := o.f.HTTPClient(c.CABundle, 15*time.Second)
	if err != nil {
		return fmt.Errorf("the CA bundle for %s: %w", c.Issuer, err)
	}
	disc, err := discovery.Fetch(ctx, client, c.Issuer)
	if err != nil {
		return err
	}
	return o.issuerSide(ctx, client, disc, c)
}

func (o *Options) validateEndpoint(ctx context.Context, server string, ca []byte) error {
	client, err := o.f.HTTPClient(ca, 10*time.Second)
	if err != nil {
		return fmt.Errorf("the endpoint's CA bundle: %w", err)
	}
	var lastErr error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(server, "/")+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("the generated kubeconfig's endpoint %s does not answer: %w (use --skip-validation to write it anyway)", server, lastErr)
		case <-time.After(2 * time.Second):
		}
	}
}

func (o *Options) write(gen *clientcmdapi.Config) error {
	if o.Output == "" {
		b, err := clientcmd.Write(*gen)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(b)
		return err
	}
	target := gen
	if o.Merge {
		existing, err := clientcmd.LoadFromFile(o.Output)
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("read %s to merge into: %w", o.Output, err)
		}
		if existing == nil {
			existing = clientcmdapi.NewConfig()
		}
		cur := existing.CurrentContext
		if err := kubeconfig.Merge(existing, gen); err != nil {
			return err
		}
		if cur != "" {
			existing.CurrentContext = cur // merging must not switch the user's context
		}
		target = existing
	}
	b, err := clientcmd.Write(*target)
	if err != nil {
		return err
	}
	_, statErr := os.Stat(o.Output)
	if err := privatedir.Replace(o.Output, b); err != nil {
		return fmt.Errorf("write %s: %w", o.Output, err)
	}
	verb := "Wrote"
	if statErr == nil && !o.Merge {
		verb = "Replaced" // as upstream's -o does; --merge adds instead
	}
	names := slices.Sorted(maps.Keys(gen.Contexts))
	for i, n := range names {
		names[i] = termsafe.Visible(n)
	}
	label := "context"
	if len(names) > 1 {
		label = "contexts"
	}
	fmt.Fprintf(o.ErrOut, "%s %s (%s %s)\n", verb, o.Output, label, strings.Join(names, ", "))
	return nil
}

func readFiles(paths []string) ([]byte, error) {
	var out []byte
	for _, p := range paths {
		b, err := os.ReadFile(p) //nolint:gosec // the admin names the file
		if err != nil {
			return nil, err
		}
		if !config.HasCertificate(b) {
			return nil, fmt.Errorf("%s holds no PEM certificate (a file starting with -----BEGIN CERTIFICATE-----)", p)
		}
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n') // one PEM block must not run into the next
		}
		out = append(out, b...)
	}
	return out, nil
}
