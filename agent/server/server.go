// Package server runs the agent: it wires the Kubernetes clients, the
// controllers, the exchange API and the health endpoints together. Each
// piece lives in its own package; this one only connects them.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/credentialttl"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/apis/helperpod"
	"github.com/pinniped-kit/pinniped/agent/apis/objectnames"
	"github.com/pinniped-kit/pinniped/agent/apis/proxycredential"
	"github.com/pinniped-kit/pinniped/agent/authentication/requestheader"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/controller/authenticators"
	"github.com/pinniped-kit/pinniped/agent/controller/credentialissuer"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/credentials/kubecertagent"
	"github.com/pinniped-kit/pinniped/agent/credentials/signingkey"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
	"github.com/pinniped-kit/pinniped/agent/endpoints/exchange"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/replica"
	"github.com/pinniped-kit/pinniped/agent/plumbing/health"
	"github.com/pinniped-kit/pinniped/agent/plumbing/kubeclient"
	"github.com/pinniped-kit/pinniped/agent/plumbing/leaderelection"
	"github.com/pinniped-kit/pinniped/agent/plumbing/metrics"
	"github.com/pinniped-kit/pinniped/agent/plumbing/profiling"
	"github.com/pinniped-kit/pinniped/agent/plumbing/servingcert"
)

// Options are the agent's settings; the serve command fills them from flags.
type Options struct {
	Kubeconfig          string
	Namespace           string
	ListenAddress       string // aggregated API (TLS)
	HealthListenAddress string // /healthz, /readyz, /metrics (plain HTTP)
	// ProfilingListenAddress, when set, serves Go's pprof profiles there
	// (loopback only; package profiling).
	ProfilingListenAddress string
	ServiceName            string // the Service in front of the aggregated API
	ServingSecretName      string
	CredentialIssuerName   string
	// GroupSuffix is upstream's api_group_suffix: every API group is
	// <prefix>.concierge.<GroupSuffix>. Empty means pinniped.dev.
	GroupSuffix string
	// APIServiceNames are the APIServices whose caBundle the agent keeps;
	// empty means the two of GroupSuffix.
	APIServiceNames    []string
	CertTTL            time.Duration
	LogIdentities      bool
	ProxyAudit         metrics.ProxyAuditLevel
	LeaseName          string
	PodName            string
	KubeCertAgentImage string
	// KubeCertAgentPod is who the helper pod runs as, and its
	// Deployment's strategy.
	KubeCertAgentPod helperpod.Settings
	// ProxyListenAddress is where the impersonation proxy listens when the
	// CredentialIssuer enables it.
	ProxyListenAddress string
	// ProxyServiceAccount may only impersonate; the proxy forwards with its
	// tokens.
	ProxyServiceAccount string
	// ProxyCredential is what the proxy's own TokenCredentialRequest
	// returns (package proxycredential); empty means its Default.
	ProxyCredential string
}

// Validate reports settings that cannot work.
func (o *Options) Validate() error {
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("--namespace is required (or set POD_NAMESPACE)"))
	}
	if err := credentialttl.Check(o.CertTTL); err != nil {
		errs = append(errs, fmt.Errorf("--credential-ttl: %w", err))
	}
	if o.ProxyCredential != "" {
		if err := proxycredential.Check(o.ProxyCredential); err != nil {
			errs = append(errs, fmt.Errorf("--proxy-credential: %w", err))
		}
	}
	if err := groupsuffix.Validate(groupsuffix.OrDefault(o.GroupSuffix)); err != nil {
		errs = append(errs, fmt.Errorf("--api-group-suffix: %w", err))
	}
	if err := o.KubeCertAgentPod.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := profiling.CheckAddress(o.ProfilingListenAddress); err != nil {
		errs = append(errs, fmt.Errorf("--profiling-listen: %w", err))
	}
	for name, addr := range map[string]string{"--listen": o.ListenAddress, "--health-listen": o.HealthListenAddress, "--proxy-listen": o.ProxyListenAddress} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q is not host:port: %w", name, addr, err))
		}
	}
	return errors.Join(errs...)
}

// drainDelay is how long a replica told to stop keeps serving while it
// reports not ready, so that endpoints, kube-proxy and load balancers stop
// sending it new connections before its listeners close (a rollout, a
// drain). With the aggregated API's 20 s shutdown it stays within the
// pod's 30 s grace period.
const drainDelay = 5 * time.Second

// Run serves until ctx ends, then drains (see drainDelay).
func Run(ctx context.Context, o *Options, log *slog.Logger) error {
	stopCtx := ctx
	ctx, stopServing := context.WithCancel(context.WithoutCancel(stopCtx))
	defer stopServing()
	a := &agent{o: o, log: log}
	go a.drainOnStop(stopCtx, ctx, stopServing)
	if err := a.build(); err != nil {
		return err
	}
	return a.serve(ctx)
}

// agent is one replica: its clients and pieces (build), and what it
// serves (serve).
type agent struct {
	o   *Options
	log *slog.Logger

	restConfig *rest.Config
	kube       *kubeclient.Clientset
	dyn        dynamic.Interface

	// leading: this replica holds the Lease. listening: the aggregated
	// API's port is bound. draining: told to stop, still serving.
	leading, listening, draining atomic.Bool
	// statusTrigger makes the CredentialIssuer controller probe again now.
	statusTrigger chan struct{}

	registry     *tokenauth.Registry
	sources      *clustercred.Switch
	csr          *clustercred.CSR
	signingKey   *signingkey.Strategy
	metrics      *metrics.Exchange
	authn        *authenticators.Controller
	proxyRuntime atomic.Pointer[replica.Runtime]
}

// drainOnStop, once stop ends (SIGTERM), reports the replica not ready and
// keeps it serving for drainDelay before it calls stopServing.
func (a *agent) drainOnStop(stop, serving context.Context, stopServing func()) {
	select {
	case <-stop.Done():
	case <-serving.Done():
		return
	}
	a.draining.Store(true)
	a.log.Info("stopping: not ready any more, still serving for a moment", "drain", drainDelay)
	select {
	case <-time.After(drainDelay):
	case <-serving.Done():
	}
	stopServing()
}

// build makes the clients and the pieces that need nothing served yet.
func (a *agent) build() error {
	o := a.o
	var err error
	if a.restConfig, err = loadRestConfig(o.Kubeconfig); err != nil {
		return err
	}
	a.restConfig.UserAgent = objectnames.Agent
	if a.kube, err = kubeclient.New(a.restConfig); err != nil {
		return err
	}
	if a.dyn, err = dynamic.NewForConfig(a.restConfig); err != nil {
		return err
	}
	a.statusTrigger = make(chan struct{}, 1)
	a.registry = tokenauth.NewRegistry()
	a.sources = &clustercred.Switch{}
	a.csr = &clustercred.CSR{Client: a.kube, TTL: o.CertTTL}
	a.sources.Set(a.csr)
	a.signingKey = signingkey.New(&kubecertagent.Agent{Kube: a.kube, Rest: a.restConfig, Namespace: o.Namespace, Name: objectnames.KubeCertAgent,
		Image: o.KubeCertAgentImage, Pod: o.KubeCertAgentPod, Manage: a.leading.Load},
		a.sources, a.csr, o.CertTTL, a.log.With("strategy", "KubeClusterSigningCertificate"), a.kickStatus)
	a.metrics = metrics.New(a.log.With("logger", "audit"), o.LogIdentities)
	a.metrics.ProxyAudit = o.ProxyAudit
	a.authn = &authenticators.Controller{Now: time.Now, Dynamic: a.dyn, Kube: a.kube, Namespace: o.Namespace, Registry: a.registry,
		IsLeader: a.leading.Load, Log: a.log.With("controller", "authenticators"), GroupSuffix: o.GroupSuffix}
	return nil
}

func (a *agent) kickStatus() {
	select {
	case a.statusTrigger <- struct{}{}:
	default:
	}
}

// ready means able to serve an exchange: a replica that takes requests
// before its authenticators are built refuses valid tokens, and a login is
// not retried after a refusal.
func (a *agent) ready() error {
	switch {
	case a.draining.Load():
		return errors.New("stopping")
	case !a.listening.Load():
		return errors.New("the aggregated API is not served yet")
	case !a.authn.Synced():
		return errors.New("the authenticators that existed at start are not all built yet")
	case a.proxyRuntime.Load() == nil:
		return errors.New("the impersonation proxy's runtime is not made yet")
	}
	return a.proxyRuntime.Load().Ready()
}

// serve runs every piece until ctx ends, then shuts the aggregated API
// down.
func (a *agent) serve(ctx context.Context) error {
	if a.o.KubeCertAgentImage != "" {
		go a.signingKey.Run(ctx)
	}
	if a.o.ProfilingListenAddress != "" {
		ln, err := profiling.Listen(ctx, a.o.ProfilingListenAddress)
		if err != nil {
			return fmt.Errorf("--profiling-listen: %w", err)
		}
		go profiling.Serve(ctx, profiling.Server(profiling.Handler(nil)), ln, a.log)
	}
	// Health and metrics come up first so the kubelet sees progress.
	go health.Serve(ctx, a.o.HealthListenAddress, a.ready, a.metrics.Handler(), a.log)
	srv, err := a.aggregatedAPI(ctx)
	if err != nil {
		return err
	}
	go func() {
		if err := a.authn.Run(ctx); err != nil {
			a.log.Error("authenticator controller stopped", "error", err)
		}
	}()
	errCh := make(chan error, 1)
	go func() {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", a.o.ListenAddress)
		if err != nil {
			errCh <- fmt.Errorf("listen on %s: %w", a.o.ListenAddress, err)
			return
		}
		a.listening.Store(true)
		// Which crypto serves: an admin checking a FIPS deployment reads
		// it here rather than trusting the image tag.
		a.log.Info("serving the aggregated API", "address", ln.Addr().String(), "fips140", cmp.Or(buildinfo.FIPS(), "off"))
		errCh <- srv.ServeTLS(ln, "", "")
	}()
	if err := a.proxyAndLeader(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		a.listening.Store(false)
		return srv.Shutdown(shutdownCtx)
	case err := <-errCh:
		return err
	}
}

// aggregatedAPI is the TokenCredentialRequest server behind kube-apiserver:
// the front proxy's client certificate checked against the live
// requestheader CA, served with the certificate the agent keeps current.
func (a *agent) aggregatedAPI(ctx context.Context) (*http.Server, error) {
	o := a.o
	proxyAuth, err := requestheader.NewSource(ctx, a.kube, 60*time.Second)
	if err != nil {
		return nil, err
	}
	apiServices := o.APIServiceNames
	if len(apiServices) == 0 {
		apiServices = groupsuffix.APIServiceNames(o.GroupSuffix)
	}
	certs := &servingcert.Manager{Kube: a.kube, Dynamic: a.dyn, Namespace: o.Namespace, SecretName: o.ServingSecretName,
		ServiceName: o.ServiceName, APIServiceNames: apiServices, Log: a.log.With("component", "serving-certificate")}
	serving, _, err := certs.Ensure(ctx)
	if err != nil {
		return nil, err
	}
	handler := &exchange.Handler{Now: time.Now, Authenticators: a.registry, Credentials: a.sources, Log: a.log.With("logger", "exchange"), Observe: a.metrics.Observe,
		LogIdentities: o.LogIdentities, GroupSuffix: o.GroupSuffix}
	return &http.Server{
		Addr:    o.ListenAddress,
		Handler: requestheader.Middleware(proxyAuth.Authenticator, a.log, handler),
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{*serving},
			// The front proxy's certificate is verified by the authenticator
			// against the live requestheader CA, which can rotate.
			ClientAuth: tls.RequestClientCert,
		},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
	}, nil
}

// proxyAndLeader starts this replica's impersonation proxy, and the
// election whose winner writes the statuses (the authenticators', the
// CredentialIssuer's with every strategy's probe).
func (a *agent) proxyAndLeader(ctx context.Context) error {
	o := a.o
	proxy, err := replica.New(ctx, replica.Config{
		Namespace: o.Namespace, CredentialIssuerName: o.CredentialIssuerName, CertTTL: o.CertTTL,
		ServiceAccount: o.ProxyServiceAccount, ListenAddress: o.ProxyListenAddress, LogIdentities: o.LogIdentities,
		ObserveExchange: a.metrics.Observe, ObserveRequest: a.metrics.ObserveProxy, KickStatus: a.kickStatus, GroupSuffix: o.GroupSuffix,
		CertificatesOnly: o.ProxyCredential == proxycredential.Certificate, PodName: o.PodName,
	}, a.kube, a.dyn, a.restConfig, a.registry, a.log.With("component", "impersonation-proxy"))
	if err != nil {
		return err
	}
	a.proxyRuntime.Store(proxy)
	go proxy.Run(ctx)
	proxyController := proxy.Leader(map[string]string{"app.kubernetes.io/part-of": "pinniped"},
		map[string]string{"app.kubernetes.io/name": objectnames.Agent})

	ci := &credentialissuer.Controller{Now: time.Now, Dynamic: a.dyn, Kube: a.kube, Rest: a.restConfig, Name: o.CredentialIssuerName, Trigger: a.statusTrigger,
		GroupSuffix:       o.GroupSuffix,
		AnonymousExchange: credentialissuer.AnonymousExchangeCheck(a.restConfig, o.GroupSuffix),
		Log:               a.log.With("controller", "credentialissuer"),
		Probers:           strategies(a.signingKey.Status, proxyController.Sync, csrProbe(a.csr)),
	}
	go leaderelection.Run(ctx, a.kube, leaderelection.Config{Namespace: o.Namespace, LeaseName: o.LeaseName, Identity: o.PodName},
		&a.leading, a.log, func(ctx context.Context) {
			a.authn.Resync() // write the statuses worked out before leading
			ci.Run(ctx)
		})
	return nil
}

type probe = func(context.Context) (*strategy.Working, error)

// strategies are the CredentialIssuer's strategies in the order clients
// should prefer them: the first that works is what `get kubeconfig` picks.
// The proxy comes before the CSR API because it runs only where an admin
// enabled it, or where auto mode found no control plane: a managed
// cluster, where the proxy is the intended path and the CSR API is the
// fallback.
func strategies(signingKey, proxy, csr probe) []strategy.Prober {
	return []strategy.Prober{{
		Type:    configv1alpha1.KubeClusterSigningCertificateStrategyType,
		Success: configv1alpha1.FetchedKeyStrategyReason,
		Failure: configv1alpha1.CouldNotFetchKeyStrategyReason,
		Probe:   signingKey,
	}, {
		Type:    configv1alpha1.ImpersonationProxyStrategyType,
		Success: configv1alpha1.ListeningStrategyReason,
		Failure: configv1alpha1.ErrorDuringSetupStrategyReason,
		Probe:   proxy,
	}, {
		Type:    configv1alpha1.CertificateSigningRequestStrategyType,
		Success: configv1alpha1.SigningRequestsApprovedStrategyReason,
		Failure: configv1alpha1.CouldNotSignRequestsStrategyReason,
		Hint:    "the cluster must sign kubernetes.io/kube-apiserver-client CertificateSigningRequests (kube-controller-manager --cluster-signing-cert-file)",
		Probe:   strategy.CachedSuccess(time.Minute, csr),
	}}
}

// csrProbe issues one real certificate: the only proof the cluster signs.
func csrProbe(csr *clustercred.CSR) probe {
	return func(ctx context.Context) (*strategy.Working, error) {
		_, err := csr.Issue(ctx, &user.DefaultInfo{Name: "pinniped-agent-probe"})
		return nil, err
	}
}

func loadRestConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load --kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("not running in a cluster and no --kubeconfig given: %w", err)
	}
	return cfg, nil
}
