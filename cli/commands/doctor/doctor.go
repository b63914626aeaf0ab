package doctor

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
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

// run is one walk of the chain: the report it writes and the secrets it
// met. What the checks learn is not kept here: each stage's facts (below)
// are built by its checks and handed to the next stage.
type run struct {
	d      *Doctor
	report Report
	// secrets are scrubbed from the report before it leaves Run.
	secrets []string
	// load reads the kubeconfig with a context ("": its current one).
	load func(context string) clientcmd.ClientConfig
}

// The stages of the chain, in order: context → exec → cache → cluster →
// issuer → agent → you. Each stage's facts embed the previous stage's, so a
// check reads what the stages before it (and the checks before it in its
// own stage) learned and writes only its own stage's facts (a rule the
// compiler does not hold: keep it); a fact a check needs and finds missing
// (nil, "") names the check that would have found it in its skip.

// contextFacts are what kubeconfig.context learned: the context and its
// cluster and user.
type contextFacts struct {
	*run
	contextName string
	namespace   string
	user        *clientcmdapi.AuthInfo
	anon        *rest.Config // the cluster, without credentials
	full        *rest.Config // the kubeconfig's own credentials, when they start no login
	execCluster config.Cluster
}

// execFacts are what the exec checks learned: the binaries kubectl runs
// and, once its arguments validate, the login.
type execFacts struct {
	*contextFacts
	front, engine string
	frontOK       bool
	kind          string // "oidc" or "static", once the arguments validate
	login         *kubeexec.Login
	oidc          *config.OIDC
	static        *config.Static
	conc          *config.Concierge
	mode          string
}

// cacheFacts are what the cache checks learned: the cached credential.
type cacheFacts struct {
	*execFacts
	cred *credcache.Credential
}

// clusterFacts are what cluster.api learned of the API server and its
// clock.
type clusterFacts struct {
	*cacheFacts
	clusterSkew *time.Duration
	// clusterUnsafe says why no credential is sent to the cluster (its
	// connection is not verified: http, insecure-skip-tls-verify);
	// clusterDown that it could not be used.
	clusterUnsafe string
	clusterDown   bool
	// clusterSilent: it did not answer at all (clusterDown also covers an
	// answer that was not TLS, or not trusted).
	clusterSilent bool
}

// issuerFacts are what the issuer checks learned.
type issuerFacts struct {
	*clusterFacts
	issuer *issuerProbe
	doc    *discovery.Document
}

// agentFacts are what the agent checks learned; the "you" checks read them.
type agentFacts struct {
	*issuerFacts
	// adminChecked: whether --admin-kubeconfig reaches this cluster was
	// asked; adminResult is the FAIL when it does not.
	adminChecked        bool
	adminResult         Result
	credentialIssuerErr string
	proxies             []proxyInfo
}

// Run walks the chain for context (its kubeconfig's current one when
// empty) of the kubeconfig kubeconfig loads, and returns the checklist,
// scrubbed of every secret met on the way.
func (d *Doctor) Run(ctx context.Context, kubeconfig func(context string) clientcmd.ClientConfig, contextName string) *Report {
	r := &run{d: d, load: kubeconfig}
	r.secret(d.Secrets...)
	r.report.Context = contextName

	c := &contextFacts{run: r, contextName: contextName}
	stage(ctx, r, c, contextChecks)
	e := &execFacts{contextFacts: c}
	stage(ctx, r, e, execChecks)
	k := &cacheFacts{execFacts: e}
	stage(ctx, r, k, cacheChecks)
	cl := &clusterFacts{cacheFacts: k}
	stage(ctx, r, cl, clusterChecks)
	i := &issuerFacts{clusterFacts: cl}
	stage(ctx, r, i, issuerChecks)
	a := &agentFacts{issuerFacts: i}
	stage(ctx, r, a, agentChecks)
	stage(ctx, r, a, youChecks)

	r.report.Context = c.contextName
	r.report.redact(r.secrets)
	return &r.report
}

// A check is one line of the list, run on its stage's facts.
type check[F any] struct {
	name, title string
	run         func(ctx context.Context, facts F) Result
}

// The checks of each stage, in order; the package doc names each.
var (
	contextChecks = []check[*contextFacts]{
		{"kubeconfig.context", "kubeconfig context", checkContext},
	}
	execChecks = []check[*execFacts]{
		{"exec.front", "pinniped in the exec entry", checkFront},
		{"exec.policy", "kubectl's credential plugin policy", checkPluginPolicy},
		{"exec.engine", "pinniped-engine beside it", checkEngine},
		{"exec.versions", "versions", checkVersions},
		{"exec.args", "login arguments", checkArgs},
	}
	cacheChecks = []check[*cacheFacts]{
		{"cache.backend", "credential cache", checkBackend},
		{"cache.credential", "cached cluster credential", checkCredential},
	}
	clusterChecks = []check[*clusterFacts]{
		{"cluster.api", "cluster API server", checkClusterAPI},
		{"clock.cluster", "clock against the cluster", checkClockCluster},
	}
	issuerChecks = []check[*issuerFacts]{
		{"clock.issuer", "clock against the issuer", checkClockIssuer},
		{"issuer.tls", "issuer TLS trust", checkIssuerTLS},
		{"issuer.discovery", "issuer discovery", checkDiscovery},
		{"issuer.jwks", "issuer signing keys", checkJWKS},
		{"issuer.client", "client id and redirect URI", checkClient},
		{"issuer.upstream", "Supervisor identity provider", checkUpstream},
	}
	agentChecks = []check[*agentFacts]{
		{"agent.api", "agent TokenCredentialRequest API", checkAgentAPI},
		{"agent.apiservice", "agent APIServices", checkAPIServices},
		{"agent.credentialissuer", "agent CredentialIssuer", checkCredentialIssuer},
		{"agent.authenticator", "authenticator", checkAuthenticator},
		{"agent.proxy", "impersonation proxy", checkProxy},
	}
	youChecks = []check[*agentFacts]{
		{"you.identity", "who you are", checkIdentity},
		{"you.permissions", "what you can do", checkPermissions},
	}
)

// named is a check's name and title, whatever its stage.
type named struct{ name, title string }

// checks are every check's name and title, in the report's order.
var checks = slices.Concat(namesOf(contextChecks), namesOf(execChecks), namesOf(cacheChecks),
	namesOf(clusterChecks), namesOf(issuerChecks), namesOf(agentChecks), namesOf(youChecks))

func namesOf[F any](cs []check[F]) []named {
	out := make([]named, len(cs))
	for i, c := range cs {
		out[i] = named{c.name, c.title}
	}
	return out
}

// stage runs a stage's checks on its facts, in order, each bounded by the
// Doctor's Timeout, and adds their lines to the report.
func stage[F any](ctx context.Context, r *run, facts F, checks []check[F]) {
	for _, c := range checks {
		ctx, cancel := context.WithTimeout(ctx, r.d.Timeout)
		res := func() (res Result) {
			defer func() {
				// A bug in one check must not hide the others.
				if p := recover(); p != nil {
					res = fail(fmt.Sprint(p), fmt.Sprintf("doctor itself failed on this check (%v): this is a bug, please report it", p))
				}
			}()
			return c.run(ctx, facts)
		}()
		cancel()
		res.Name, res.Title = c.name, c.title
		r.report.Checks = append(r.report.Checks, res)
	}
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
