// Package authenticators reconciles JWTAuthenticator and WebhookAuthenticator
// resources into the live token authenticator registry, and reports in their
// status what works and what an admin must fix. Every replica keeps its own
// registry (all replicas serve exchanges); only the leader writes status.
package authenticators

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/webhook"
)

// Resource is the resource of an authenticator kind (JWTAuthenticator or
// WebhookAuthenticator) under an API group suffix ("" means the default).
func Resource(kind, suffix string) schema.GroupVersionResource {
	plural := map[string]string{kindJWT: "jwtauthenticators", kindWebhook: "webhookauthenticators"}[kind]
	return schema.GroupVersionResource{Group: groupsuffix.Group(groupsuffix.Authentication, suffix), Version: groupsuffix.Version, Resource: plural}
}

const (
	kindJWT     = "JWTAuthenticator"
	kindWebhook = "WebhookAuthenticator"
	// resync re-reads CA sources and retries broken authenticators even
	// when nothing about the resource changed.
	resync = 3 * time.Minute
	// buildTimeout bounds discovery and key fetches of one reconcile.
	buildTimeout = 20 * time.Second
)

// Controller keeps the registry in step with the resources.
type Controller struct {
	Dynamic   dynamic.Interface
	Kube      kubernetes.Interface
	Namespace string // where CA bundle Secrets and ConfigMaps live
	Registry  *tokenauth.Registry
	IsLeader  func() bool
	// Log and Now, the logger and the clock, are required: set once where
	// it is built (the agent's server; a test's own).
	Log *slog.Logger
	Now func() time.Time
	// GroupSuffix is the agent's API group suffix; empty means the default.
	GroupSuffix string

	queue     workqueue.TypedRateLimitingInterface[tokenauth.Key]
	informers map[string]cache.SharedIndexInformer

	mu    sync.Mutex
	built map[tokenauth.Key]string // fingerprint of what is in the registry
	// pending are the authenticators that existed at start and have not
	// been reconciled once yet; synced is set when none are left.
	pending map[tokenauth.Key]bool
	synced  atomic.Bool
}

// Synced reports whether every authenticator that existed when the
// controller started has been reconciled once (built, or failed once).
// Until then this replica would refuse tokens the others accept, so it
// must not be sent exchanges: the agent's readiness waits for it.
func (c *Controller) Synced() bool { return c.synced.Load() }

// firstPassDone notes that key has been reconciled once.
func (c *Controller) firstPassDone(key tokenauth.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, key)
	if len(c.pending) == 0 {
		c.synced.Store(true)
	}
}

// Run starts informers and workers and blocks until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[tokenauth.Key](2*time.Second, 2*time.Minute),
		workqueue.TypedRateLimitingQueueConfig[tokenauth.Key]{Name: "authenticators"})
	defer queue.ShutDown()
	c.built = map[tokenauth.Key]string{}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(c.Dynamic, resync)
	informers := map[string]cache.SharedIndexInformer{
		kindJWT:     factory.ForResource(Resource(kindJWT, c.GroupSuffix)).Informer(),
		kindWebhook: factory.ForResource(Resource(kindWebhook, c.GroupSuffix)).Informer(),
	}
	c.mu.Lock() // Resync may read them from the leader election's goroutine
	c.queue, c.informers = queue, informers
	c.mu.Unlock()
	for kind, inf := range c.informers {
		enqueue := func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if m, err := meta.Accessor(obj); err == nil {
				c.queue.Add(tokenauth.Key{Kind: kind, Name: m.GetName()})
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, DeleteFunc: enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
		}); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	// Until the informers sync the replica is not ready; say why while it
	// lasts rather than only when the agent stops.
	slow := time.AfterFunc(30*time.Second, func() {
		c.Log.Warn("the authenticator informers have not synced after 30 s; the replica stays not ready (are the agent's CRDs installed, and may it list them?)")
	})
	for kind, inf := range c.informers {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			slow.Stop()
			return fmt.Errorf("%s informer did not sync (are the CRDs installed?)", kind)
		}
	}
	slow.Stop()
	pending := map[tokenauth.Key]bool{}
	for kind, inf := range c.informers {
		for _, obj := range inf.GetStore().List() {
			if m, err := meta.Accessor(obj); err == nil {
				pending[tokenauth.Key{Kind: kind, Name: m.GetName()}] = true
			}
		}
	}
	c.mu.Lock()
	c.pending = pending
	c.synced.Store(len(pending) == 0)
	c.mu.Unlock()
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.processNext(ctx) {
	}
	return nil
}

// Resync looks at every authenticator again. A replica becoming the leader
// calls it: the statuses it worked out while it was not leading were not
// written, and nothing else would look again before the next informer
// resync (minutes), so a new authenticator could show no phase that long.
func (c *Controller) Resync() {
	c.mu.Lock()
	queue, informers := c.queue, c.informers
	c.mu.Unlock()
	if queue == nil {
		return // not running yet: its first pass looks at every one
	}
	for kind, inf := range informers {
		for _, obj := range inf.GetStore().List() {
			if m, err := meta.Accessor(obj); err == nil {
				queue.Add(tokenauth.Key{Kind: kind, Name: m.GetName()})
			}
		}
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	defer c.firstPassDone(key)
	if err := c.reconcile(ctx, key); err != nil {
		c.Log.Info("authenticator not ready; will retry", "authenticator", key.String(), "error", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// reconcile returns an error only when a retry might help.
func (c *Controller) reconcile(ctx context.Context, key tokenauth.Key) error {
	obj, exists, err := c.informers[key.Kind].GetStore().GetByKey(key.Name)
	if err != nil {
		return err
	}
	if !exists {
		c.forget(key)
		c.Log.Info("authenticator removed", "authenticator", key.String())
		return nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected object %T", obj)
	}

	var (
		spec       any
		tls        *authv1alpha1.TLSSpec
		conditions *[]metav1.Condition
		phase      *authv1alpha1.Phase
		typed      runtime.Object
	)
	switch key.Kind {
	case kindJWT:
		a := &authv1alpha1.JWTAuthenticator{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, a); err != nil {
			return err
		}
		spec, tls, conditions, phase, typed = a.Spec, a.Spec.TLS, &a.Status.Conditions, &a.Status.Phase, a
	case kindWebhook:
		a := &authv1alpha1.WebhookAuthenticator{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, a); err != nil {
			return err
		}
		spec, tls, conditions, phase, typed = a.Spec, a.Spec.TLS, &a.Status.Conditions, &a.Status.Phase, a
	}
	before := append([]metav1.Condition(nil), *conditions...)
	beforePhase := *phase
	gen := u.GetGeneration()

	ca, caErr := c.caBundle(ctx, tls)
	fingerprint := fingerprintOf(spec, ca)
	var buildErr error
	if caErr != nil {
		buildErr = &jwt.StepError{Condition: authv1alpha1.ConditionTLSConfigurationValid, Err: caErr}
		c.forget(key)
	} else if !c.isBuilt(key, fingerprint) {
		buildCtx, cancel := context.WithTimeout(ctx, buildTimeout)
		var a authenticator.Token
		a, buildErr = build(buildCtx, key.Kind, spec, ca)
		cancel()
		if buildErr != nil {
			// A changed or broken configuration must not keep accepting
			// tokens under the old one.
			c.forget(key)
		} else {
			c.install(key, fingerprint, a)
			c.Log.Info("authenticator ready", "authenticator", key.String())
		}
	}

	setConditions(conditions, phase, key.Kind, gen, buildErr, c.Now(), readyMessage(spec))
	if c.IsLeader != nil && c.IsLeader() && (*phase != beforePhase || conditionsChanged(before, *conditions)) {
		if err := c.writeStatus(ctx, key.Kind, typed); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			utilruntime.HandleError(fmt.Errorf("update status of %s: %w", key, err))
		}
	}
	return buildErr
}

func (c *Controller) isBuilt(key tokenauth.Key, fingerprint string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.built[key] == fingerprint
}

func (c *Controller) install(key tokenauth.Key, fingerprint string, a authenticator.Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.built[key] = fingerprint
	c.Registry.Set(key, a)
}

func (c *Controller) forget(key tokenauth.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.built, key)
	c.Registry.Delete(key)
}

func fingerprintOf(spec any, ca []byte) string {
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(append(b, ca...))
	return base64.RawStdEncoding.EncodeToString(sum[:])
}

func build(ctx context.Context, kind string, spec any, ca []byte) (authenticator.Token, error) {
	switch s := spec.(type) {
	case authv1alpha1.JWTAuthenticatorSpec:
		return jwt.New(ctx, jwt.Config{Spec: s, CABundle: ca})
	case authv1alpha1.WebhookAuthenticatorSpec:
		if err := webhook.ValidateEndpoint(s.Endpoint); err != nil {
			return nil, &jwt.StepError{Condition: authv1alpha1.ConditionEndpointURLValid, Err: err}
		}
		a, err := webhook.New(webhook.Config{Endpoint: s.Endpoint, CABundle: ca})
		if err != nil {
			return nil, &jwt.StepError{Condition: authv1alpha1.ConditionAuthenticatorValid, Err: err}
		}
		if err := webhook.Probe(ctx, s.Endpoint, ca); err != nil {
			return nil, &jwt.StepError{Condition: authv1alpha1.ConditionWebhookConnectionValid, Err: err}
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown authenticator kind %s", kind)
}

// caBundle resolves spec.tls to PEM bytes.
func (c *Controller) caBundle(ctx context.Context, tls *authv1alpha1.TLSSpec) ([]byte, error) {
	if tls == nil {
		return nil, nil
	}
	if tls.CertificateAuthorityData != "" && tls.CertificateAuthorityDataSource != nil {
		return nil, errors.New("set only one of tls.certificateAuthorityData and tls.certificateAuthorityDataSource")
	}
	if tls.CertificateAuthorityData != "" {
		pem, err := base64.StdEncoding.DecodeString(tls.CertificateAuthorityData)
		if err != nil {
			return nil, fmt.Errorf("tls.certificateAuthorityData is not valid base64: %w", err)
		}
		return pem, nil
	}
	src := tls.CertificateAuthorityDataSource
	if src == nil {
		return nil, nil
	}
	var data string
	switch src.Kind {
	case "Secret":
		s, err := c.Kube.CoreV1().Secrets(c.Namespace).Get(ctx, src.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read CA bundle from Secret %s/%s: %w", c.Namespace, src.Name, err)
		}
		data = string(s.Data[src.Key])
	case "ConfigMap":
		cm, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, src.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read CA bundle from ConfigMap %s/%s: %w", c.Namespace, src.Name, err)
		}
		data = cm.Data[src.Key]
	default:
		return nil, fmt.Errorf("tls.certificateAuthorityDataSource.kind %q must be Secret or ConfigMap", src.Kind)
	}
	if data == "" {
		return nil, fmt.Errorf("%s %s/%s has no key %q holding a CA bundle", src.Kind, c.Namespace, src.Name, src.Key)
	}
	return []byte(data), nil
}

func (c *Controller) writeStatus(ctx context.Context, kind string, obj runtime.Object) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	_, err = c.Dynamic.Resource(Resource(kind, c.GroupSuffix)).UpdateStatus(ctx, &unstructured.Unstructured{Object: m}, metav1.UpdateOptions{})
	return err
}
