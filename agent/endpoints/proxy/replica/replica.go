// Package replica is the impersonation proxy on one agent replica: it
// follows the CredentialIssuer's spec and the proxy's Secrets and serves,
// or not, with the current certificate and client-certificate signer. The
// leader's half (Service, generated certificates, strategy status) is
// package leader; the request path is package impersonator.
package replica

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/authentication/requestheader"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
	"github.com/pinniped-kit/pinniped/agent/endpoints/exchange"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/leader"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/listener"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxyconfig"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/secretca"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/tokenkeys"
	"github.com/pinniped-kit/pinniped/agent/plumbing/observe"
)

// Config is what the replica needs to know of the agent's settings.
type Config struct {
	Namespace            string
	CredentialIssuerName string
	// CertTTL is the lifetime of certificates the proxy's signer issues.
	CertTTL time.Duration
	// ServiceAccount is the impersonate-only account the proxy forwards as.
	ServiceAccount string
	ListenAddress  string
	LogIdentities  bool
	// ObserveExchange and ObserveRequest are told about every exchange on
	// the proxy and every proxied request (metrics, audit lines).
	ObserveExchange func(observe.Exchange)
	ObserveRequest  func(observe.ProxyRequest)
	// KickStatus makes the leader's CredentialIssuer controller look again.
	KickStatus func()
	// GroupSuffix is the agent's API group suffix; empty means the default.
	GroupSuffix string
	// CertificatesOnly makes the proxy's TokenCredentialRequest return
	// client certificates even when token keys exist (the admin's choice
	// for clients that need a certificate). Tokens already issued still
	// verify until they expire.
	CertificatesOnly bool
	// PodName is this replica's pod, for the leader's version check.
	PodName string
}

// Runtime is the impersonation proxy on this replica.
type Runtime struct {
	kube      kubernetes.Interface
	namespace string
	ciName    string
	log       *slog.Logger
	ttl       time.Duration

	server    *listener.Server
	signer    clustercred.Switch
	clientCAs impersonator.ClientCAs
	// proxyTokens verifies the proxy's own tokens; tokenKey is the key
	// this replica signs them with (nil before the first promotion).
	proxyTokens      impersonator.ProxyTokens
	tokenKey         atomic.Pointer[signingKey]
	certificatesOnly bool
	podName          string
	// tokenProblem is logged once until it changes: the rest of sync goes
	// on without token keys, so the shared lastProblem would be reset.
	tokenProblem string
	clusterCA    *dynamiccertificates.ConfigMapCAController

	ciInformer cache.SharedIndexInformer
	secrets    corev1listers.SecretLister
	// wake makes the follower loop look again; kickStatus makes the
	// leader's CredentialIssuer controller probe again.
	wake       chan struct{}
	kickStatus func()

	cpMu      sync.Mutex
	cpChecked time.Time
	cpValue   bool

	lastProblem string
	// waiting is why this replica cannot take proxy connections although
	// the proxy is wanted here ("" when it can, or when it is not wanted).
	waiting atomic.Pointer[string]
}

// Ready says why this replica's impersonation proxy cannot take
// connections yet: until its first look at the settings and, where the
// proxy is wanted, its first start. After that it is always ready (nil):
// a missing or unusable certificate, or a port it cannot take, is
// reported and must not take the aggregated API down with it. The agent's readiness includes it: the proxy's Service routes
// to ready replicas only, and in a rollout a new replica that is ready
// but not yet listening refuses users' kubectl calls.
func (p *Runtime) Ready() error {
	if w := p.waiting.Load(); w != nil && *w != "" {
		return errors.New(*w)
	}
	return nil
}

func (p *Runtime) setWaiting(why string) { p.waiting.Store(&why) }

// New starts following the spec and Secrets; Run serves.
func New(ctx context.Context, o Config, kube kubernetes.Interface, dyn dynamic.Interface, restConfig *rest.Config,
	registry *tokenauth.Registry, log *slog.Logger,
) (*Runtime, error) {
	kickStatus := o.KickStatus
	if kickStatus == nil {
		kickStatus = func() {}
	}
	p := &Runtime{kube: kube, namespace: o.Namespace, ciName: o.CredentialIssuerName, log: log, ttl: o.CertTTL,
		wake: make(chan struct{}, 1), kickStatus: kickStatus, certificatesOnly: o.CertificatesOnly, podName: o.PodName}
	p.setWaiting("the impersonation proxy's settings are not read yet")

	var err error
	if p.server, err = p.newServer(o, kube, restConfig, registry); err != nil {
		return nil, err
	}
	// The cluster's client CA signs certificates kube-apiserver accepts
	// (admins', other tools'); the proxy accepts them too.
	p.clusterCA, err = dynamiccertificates.NewDynamicCAFromConfigMapController("cluster-client-ca",
		requestheader.ConfigMapNamespace, requestheader.ConfigMapName, "client-ca-file", kube)
	if err != nil {
		return nil, err
	}
	p.clusterCA.AddListener(listenerFunc(p.poke))
	go p.clusterCA.Run(ctx, 1)

	if err := p.follow(ctx, o, kube, dyn); err != nil {
		return nil, err
	}
	return p, nil
}

// newServer is the proxy's TLS listener: the TokenCredentialRequest it
// answers itself, and every other request through the impersonator.
func (p *Runtime) newServer(o Config, kube kubernetes.Interface, restConfig *rest.Config, registry *tokenauth.Registry) (*listener.Server, error) {
	log := p.log
	upstream, err := impersonator.UpstreamURL(restConfig)
	if err != nil {
		return nil, err
	}
	transports, err := impersonator.NewTransports(restConfig, &impersonator.ServiceAccountTokens{
		ServiceAccounts: kube.CoreV1().ServiceAccounts(o.Namespace), Name: o.ServiceAccount,
	})
	if err != nil {
		return nil, err
	}
	proxy := &impersonator.Proxy{
		Upstream: upstream, Transport: transports.Impersonating, UpgradeTransport: transports.ImpersonatingUpgrade,
		ImpersonatorToken: transports.ImpersonatorToken,
		DirectTransport:   transports.Direct, DirectUpgradeTransport: transports.DirectUpgrade,
		Authn:           impersonator.NewCertAuthenticator(&p.clientCAs),
		Tokens:          impersonator.NewTokenAuthenticator(kube.AuthenticationV1()),
		ProxyTokens:     &p.proxyTokens,
		Authz:           &impersonator.SARAuthorizer{Reviews: kube.AuthorizationV1().SubjectAccessReviews()},
		Log:             log,
		Observe:         o.ObserveRequest,
		OriginalUserKey: groupsuffix.OriginalUserExtra(o.GroupSuffix),
	}
	proxy.Init()
	tcr := &exchange.Handler{Now: time.Now, Authenticators: registry, Credentials: &p.signer, Log: log.With("logger", "exchange", "frontend", "proxy"), Observe: o.ObserveExchange,
		LogIdentities: o.LogIdentities, GroupSuffix: o.GroupSuffix}
	// The one request the proxy answers itself, anonymously: trading a
	// token for a credential that is valid only at the proxy. Under a
	// suffix, the default spelling is an ordinary request for the API
	// server (where another server may own it).
	tcrPath := exchange.TokenCredentialRequestPath(o.GroupSuffix)
	return &listener.Server{
		Addr: o.ListenAddress, Log: log, Drain: 20 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == tcrPath {
				tcr.ServeHTTP(w, r)
				return
			}
			proxy.ServeHTTP(w, r)
		}),
	}, nil
}

// follow starts the informers the proxy follows (its CredentialIssuer, the
// Secrets and Services of its namespace) and waits for their first lists.
func (p *Runtime) follow(ctx context.Context, o Config, kube kubernetes.Interface, dyn dynamic.Interface) error {
	kickStatus := p.kickStatus
	ciFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "", func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.CredentialIssuerName).String()
	})
	p.ciInformer = ciFactory.ForResource(strategy.Resource(o.GroupSuffix)).Informer()
	_, _ = p.ciInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { p.poke(); kickStatus() },
		UpdateFunc: func(oldObj, newObj any) {
			// Status writes do not change the generation; only spec
			// changes are news.
			if oldObj.(*unstructured.Unstructured).GetGeneration() != newObj.(*unstructured.Unstructured).GetGeneration() {
				p.poke()
				kickStatus()
			}
		},
		DeleteFunc: func(any) { p.poke(); kickStatus() },
	})
	// Typed informers made one by one, not through informers.SharedInformerFactory:
	// the factory reaches every API group's informer and lister, and linking
	// those grew the agent's binary (and resident memory) for nothing.
	secretInformer := corev1informers.NewSecretInformer(kube, o.Namespace, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	p.secrets = corev1listers.NewSecretLister(secretInformer.GetIndexer())
	onChange := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.poke(); kickStatus() },
		UpdateFunc: func(any, any) { p.poke(); kickStatus() },
		DeleteFunc: func(any) { p.poke(); kickStatus() },
	}
	_, _ = secretInformer.AddEventHandler(onChange)
	// The load balancer's address arrives as a Service status update.
	serviceInformer := corev1informers.NewServiceInformer(kube, o.Namespace, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_, _ = serviceInformer.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			svc, ok := obj.(*corev1.Service)
			return ok && svc.Name == proxyconfig.ServiceName
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { kickStatus() },
			UpdateFunc: func(any, any) { kickStatus() },
			DeleteFunc: func(any) { kickStatus() },
		},
	})
	ciFactory.Start(ctx.Done())
	go secretInformer.Run(ctx.Done())
	go serviceInformer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), secretInformer.HasSynced, serviceInformer.HasSynced) {
		return fmt.Errorf("impersonation proxy: could not list Secrets and Services in namespace %s", o.Namespace)
	}
	if !cache.WaitForCacheSync(ctx.Done(), p.ciInformer.HasSynced) {
		return fmt.Errorf("impersonation proxy: could not watch CredentialIssuer %s", o.CredentialIssuerName)
	}
	return nil
}

type listenerFunc func()

func (f listenerFunc) Enqueue() { f() }

func (p *Runtime) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Leader is the leader's half, sharing this replica's view of the spec.
func (p *Runtime) Leader(labels, selector map[string]string) *leader.Syncer {
	return &leader.Syncer{Now: time.Now, Kube: p.kube, Namespace: p.namespace, Settings: p.settings,
		Labels: labels, Selector: selector, PodName: p.podName, Kick: p.kickStatus,
		Log: p.log.With("controller", "impersonation-proxy-leader")}
}

// settings resolves the spec as it is now.
func (p *Runtime) settings(ctx context.Context) (proxyconfig.Settings, error) {
	var spec *configv1alpha1.ImpersonationProxySpec
	if obj, ok, err := p.ciInformer.GetStore().GetByKey(p.ciName); err == nil && ok {
		var ci configv1alpha1.CredentialIssuer
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, &ci); err != nil {
			return proxyconfig.Settings{}, fmt.Errorf("CredentialIssuer %s is unreadable: %w", p.ciName, err)
		}
		spec = ci.Spec.ImpersonationProxy
	}
	hasCP, err := p.hasControlPlane(ctx)
	if err != nil {
		return proxyconfig.Settings{}, err
	}
	return proxyconfig.Resolve(spec, hasCP), nil
}

// hasControlPlane looks at node labels, at most every 5 minutes: nodes
// rarely change role, and every replica asks.
func (p *Runtime) hasControlPlane(ctx context.Context) (bool, error) {
	p.cpMu.Lock()
	defer p.cpMu.Unlock()
	if !p.cpChecked.IsZero() && time.Since(p.cpChecked) < 5*time.Minute {
		return p.cpValue, nil
	}
	found := false
	for _, sel := range proxyconfig.ControlPlaneLabelSelectors {
		nodes, err := p.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel, Limit: 1})
		if err != nil {
			return false, fmt.Errorf("list nodes to decide whether the impersonation proxy is needed: %w", err)
		}
		if len(nodes.Items) > 0 {
			found = true
			break
		}
	}
	p.cpValue, p.cpChecked = found, time.Now()
	return found, nil
}

// Run follows the spec until ctx ends, then drains the listener.
func (p *Runtime) Run(ctx context.Context) {
	defer p.server.Stop()
	for {
		p.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-time.After(30 * time.Second):
		}
	}
}

func (p *Runtime) sync(ctx context.Context) {
	p.loadTokenKeys()
	signerTrust := p.loadSigner()
	p.clientCAs.Set(signerTrust, p.clusterCA.CurrentCABundleContent())

	s, err := p.settings(ctx)
	if err != nil {
		// The last state stands: settings that cannot be read for a
		// while (an API server restarting) change nothing served.
		p.problem("impersonation proxy settings unavailable", err)
		return
	}
	if !s.Enabled {
		if p.server.Running() {
			p.log.Info("stopping the impersonation proxy", "reason", s.Why)
			p.server.Stop()
		}
		p.setWaiting("")
		return
	}
	name := s.ServingSecretName()
	secret, err := p.secrets.Secrets(p.namespace).Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			err = fmt.Errorf("the Secret %s/%s does not exist yet", p.namespace, name)
		}
		p.problem("impersonation proxy has no serving certificate", err)
		// No replica can serve the proxy until the leader makes one:
		// that must not take the aggregated API down with it.
		p.setWaiting("")
		return
	}
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		// Keep serving the last good certificate, if any.
		p.problem("impersonation proxy serving Secret is unusable", fmt.Errorf("the Secret %s/%s: %w", p.namespace, name, err))
		p.setWaiting("")
		return
	}
	p.server.SetCertificate(&pair)
	if err := p.server.Start(); err != nil {
		p.problem("impersonation proxy cannot listen", err)
		p.setWaiting("") // a problem of this replica's port, reported; the aggregated API stays
		return
	}
	p.setWaiting("")
	p.lastProblem = ""
}

// loadSigner makes the proxy's client-certificate signer the credential source for
// TokenCredentialRequests on the proxy, and returns the PEM to trust.
func (p *Runtime) loadSigner() []byte {
	secret, err := p.secrets.Secrets(p.namespace).Get(proxyconfig.SignerSecret)
	if err != nil {
		p.signer.Set(nil)
		return nil
	}
	ca, trust, err := secretca.Parse(secret, nil)
	if err != nil {
		p.problem("impersonation proxy signer is unusable", err)
		p.signer.Set(nil)
		return nil
	}
	certs := &clustercred.CA{CA: ca, TTL: p.ttl}
	if p.certificatesOnly {
		p.signer.Set(certs)
	} else {
		p.signer.Set(&proxytoken.Source{Key: p.signingKey, TTL: p.ttl, Fallback: certs})
	}
	return trust
}

// signingKey is a proxy token key and the installation it signs for.
type signingKey struct {
	key *proxytoken.Key
	aud proxytoken.Audience
}

func (p *Runtime) signingKey() (*proxytoken.Key, proxytoken.Audience, bool) {
	k := p.tokenKey.Load()
	if k == nil {
		return nil, proxytoken.Audience{}, false
	}
	return k.key, k.aud, true
}

// loadTokenKeys follows the token key Secret: the keys tokens verify with
// here, and the key this replica signs with. A Secret that cannot be read
// for a while (the informer's error) keeps the last keys. A deleted one
// ends tokens (the leader makes a new one, under a new installation ID),
// and so does one that does not parse: an admin who edits a key out means
// to revoke it, and replicas must not keep trusting it (nor answer
// differently as they restart); clients exchange again and get
// certificates until a person repairs or deletes the Secret.
func (p *Runtime) loadTokenKeys() {
	secret, err := p.secrets.Secrets(p.namespace).Get(proxyconfig.TokenKeySecret)
	if apierrors.IsNotFound(err) {
		p.proxyTokens.Set(nil, proxytoken.Audience{})
		p.tokenKey.Store(nil)
		return
	}
	if err != nil {
		p.tokenKeysProblem("impersonation proxy token keys unreadable", err)
		return
	}
	ks, installID, err := tokenkeys.Parse(secret, time.Now())
	if err != nil {
		p.tokenKeysProblem("impersonation proxy token keys are unusable; no token verifies and the proxy hands out certificates", err)
		p.proxyTokens.Set(nil, proxytoken.Audience{})
		p.tokenKey.Store(nil)
		return
	}
	p.tokenProblem = ""
	aud := proxytoken.ForInstall(installID)
	p.proxyTokens.Set(ks, aud)
	if ks.Signing == nil {
		p.tokenKey.Store(nil)
		return
	}
	p.tokenKey.Store(&signingKey{key: ks.Signing, aud: aud})
}

func (p *Runtime) tokenKeysProblem(msg string, err error) {
	if key := msg + ": " + err.Error(); key != p.tokenProblem {
		p.tokenProblem = key
		p.log.Info(msg, "error", err)
	}
}

// problem logs a problem once until it changes.
func (p *Runtime) problem(msg string, err error) {
	key := msg + ": " + err.Error()
	if key == p.lastProblem {
		return
	}
	p.lastProblem = key
	p.log.Info(msg, "error", err)
}
