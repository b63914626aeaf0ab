package doctor

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/discovery"
	"github.com/pinniped-kit/pinniped/cli/login/kubeexec"
)

// Doctor is what the checks reach the world through: the Factory every
// command is built with (clock, environment, caches and their probe, HTTP
// and cluster clients), and the few seams only doctor needs, to inspect
// binaries without running them. New fills it for a real process; tests
// replace fields.
type Doctor struct {
	f *cmdutil.Factory
	// LookPath finds a bare exec command on $PATH, as client-go's exec does.
	LookPath func(string) (string, error)
	// GOOS decides the engine's file name (pinniped-engine.exe on windows).
	GOOS string
	// ReadBuild reads a binary's build without running it; Self is the
	// running binary's.
	ReadBuild func(path string) (Build, error)
	Self      func() (Build, error)
	// Timeout bounds each check.
	Timeout time.Duration
	// APIGroupSuffix is the agent's when the login does not name one.
	APIGroupSuffix string
	// Admin, when set, reads the agent's objects (APIServices,
	// CredentialIssuer, authenticators) in place of the login's
	// credential: an administrator checking a user's kubeconfig.
	Admin *rest.Config
	// Secrets are more values never to print (the --admin-kubeconfig's
	// credentials).
	Secrets []string
}

// New is the real world of f's process.
func New(f *cmdutil.Factory, lookPath func(string) (string, error), goos string) *Doctor {
	return &Doctor{
		f: f, LookPath: lookPath, GOOS: goos,
		ReadBuild: ReadBuild,
		Self: func() (Build, error) {
			bi, ok := debug.ReadBuildInfo()
			if !ok {
				return Build{}, fmt.Errorf("this binary carries no build information")
			}
			return fromInfo(bi), nil
		},
		Timeout: 10 * time.Second,
	}
}

// run is one walk of the chain: what each check learns, for the ones
// after it.
type run struct {
	d      *Doctor
	report Report
	// secrets are scrubbed from the report before it leaves Run.
	secrets []string

	load          func(context string) clientcmd.ClientConfig
	contextName   string
	namespace     string
	user          *clientcmdapi.AuthInfo
	anon          *rest.Config // the cluster, without credentials
	full          *rest.Config // the kubeconfig's own credentials, when they start no login
	execCluster   config.Cluster
	front, engine string
	frontOK       bool
	kind          string // "oidc" or "static", once the arguments validate
	login         *kubeexec.Login
	oidc          *config.OIDC
	static        *config.Static
	conc          *config.Concierge
	mode          string
	cred          *credcache.Credential
	clusterSkew   *time.Duration
	// clusterUnsafe says why no credential is sent to the cluster (its
	// connection is not verified: http, insecure-skip-tls-verify);
	// clusterDown that it could not be used. All from cluster.api.
	clusterUnsafe string
	clusterDown   bool
	// clusterSilent: it did not answer at all (clusterDown also covers an
	// answer that was not TLS, or not trusted).
	clusterSilent bool
	// adminChecked: whether --admin-kubeconfig reaches this cluster was
	// asked; adminResult is the FAIL when it does not.
	adminChecked        bool
	adminResult         Result
	issuer              *issuerProbe
	doc                 *discovery.Document
	credentialIssuerErr string
	proxies             []proxyInfo
}

// Run walks the chain for context (its kubeconfig's current one when
// empty) of the kubeconfig kubeconfig loads, and returns the checklist,
// scrubbed of every secret met on the way.
func (d *Doctor) Run(ctx context.Context, kubeconfig func(context string) clientcmd.ClientConfig, contextName string) *Report {
	r := &run{d: d, contextName: contextName, load: kubeconfig}
	r.secret(d.Secrets...)
	r.report.Context = contextName
	for _, c := range checks {
		r.check(ctx, c)
	}
	r.report.Context = r.contextName
	r.report.redact(r.secrets)
	return &r.report
}

// A check is one line of the list.
type check struct {
	name, title string
	run         func(ctx context.Context, r *run) Result
}

// checks are the list, in order; package doc names each.
var checks = []check{
	{"kubeconfig.context", "kubeconfig context", checkContext},
	{"exec.front", "pinniped in the exec entry", checkFront},
	{"exec.policy", "kubectl's credential plugin policy", checkPluginPolicy},
	{"exec.engine", "pinniped-engine beside it", checkEngine},
	{"exec.versions", "versions", checkVersions},
	{"exec.args", "login arguments", checkArgs},
	{"cache.backend", "credential cache", checkBackend},
	{"cache.credential", "cached cluster credential", checkCredential},
	{"cluster.api", "cluster API server", checkClusterAPI},
	{"clock.cluster", "clock against the cluster", checkClockCluster},
	{"clock.issuer", "clock against the issuer", checkClockIssuer},
	{"issuer.tls", "issuer TLS trust", checkIssuerTLS},
	{"issuer.discovery", "issuer discovery", checkDiscovery},
	{"issuer.jwks", "issuer signing keys", checkJWKS},
	{"issuer.client", "client id and redirect URI", checkClient},
	{"issuer.upstream", "Supervisor identity provider", checkUpstream},
	{"agent.api", "agent TokenCredentialRequest API", checkAgentAPI},
	{"agent.apiservice", "agent APIServices", checkAPIServices},
	{"agent.credentialissuer", "agent CredentialIssuer", checkCredentialIssuer},
	{"agent.authenticator", "authenticator", checkAuthenticator},
	{"agent.proxy", "impersonation proxy", checkProxy},
	{"you.identity", "who you are", checkIdentity},
	{"you.permissions", "what you can do", checkPermissions},
}

func (r *run) check(ctx context.Context, c check) {
	ctx, cancel := context.WithTimeout(ctx, r.d.Timeout)
	defer cancel()
	res := func() (res Result) {
		defer func() {
			// A bug in one check must not hide the others.
			if p := recover(); p != nil {
				res = fail(fmt.Sprint(p), fmt.Sprintf("doctor itself failed on this check (%v): this is a bug, please report it", p))
			}
		}()
		return c.run(ctx, r)
	}()
	res.Name, res.Title = c.name, c.title
	r.report.Checks = append(r.report.Checks, res)
}

func (r *run) secret(s ...string) { r.secrets = append(r.secrets, s...) }

func ok(detail string, args ...any) Result {
	return Result{Status: OK, Detail: fmt.Sprintf(detail, args...)}
}

func skip(why string, args ...any) Result {
	return Result{Status: Skip, Detail: fmt.Sprintf(why, args...)}
}

func warn(detail, fix string) Result { return Result{Status: Warn, Detail: detail, Fix: fix} }

func fail(detail, fix string) Result { return Result{Status: Fail, Detail: detail, Fix: fix} }
