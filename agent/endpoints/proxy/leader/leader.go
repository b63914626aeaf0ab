// Package leader is the leader replica's side of the impersonation proxy:
// a sync loop that keeps the proxy's Service, its serving certificate
// (generated, or the admin's own Secret) and its client-certificate signer
// in line with the CredentialIssuer's spec, and reports the
// ImpersonationProxy strategy. Serving happens on every replica (package
// replica).
package leader

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxyconfig"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/secretca"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/tokenkeys"
)

// Lifetimes of what the controller generates. The serving CA ends up in
// users' kubeconfigs, so it must outlive them: it is effectively permanent,
// and only the leaf it signs is renewed.
const (
	ServingCALifetime  = 100 * 365 * 24 * time.Hour
	servingLeafLife    = 365 * 24 * time.Hour
	servingLeafRenewal = 30 * 24 * time.Hour
	// Client certificates from the signer live minutes, so the signer can
	// rotate yearly with a short overlap.
	SignerLifetime = 365 * 24 * time.Hour
	SignerRenewal  = 30 * 24 * time.Hour
)

// managedAnnotations records which Service annotations came from the spec,
// so ones the admin removes are removed, and ones a cloud controller added
// are left alone.
const managedAnnotations = "pinniped.dev/managed-annotations"

// Syncer keeps the proxy's cluster objects in line. Only the leader runs it.
type Syncer struct {
	Kube      kubernetes.Interface
	Namespace string
	// Settings resolves the CredentialIssuer spec for this cluster.
	Settings func(ctx context.Context) (proxyconfig.Settings, error)
	// Labels go on everything created, so uninstall finds it.
	Labels map[string]string
	// Selector picks the agent pods behind the Service.
	Selector map[string]string
	// PodName is the leader's own pod; proxy tokens wait until every pod
	// Selector picks runs its template (see oneVersion).
	PodName string
	// Kick makes the controller call Sync again soon (nil: never). The
	// token keys' next step is due at a time no watched object announces.
	Kick func()
	// Log and Now, the logger and the clock, are required: set once where
	// it is built (the agent's server; a test's own).
	Log *slog.Logger
	Now func() time.Time

	mu        sync.Mutex
	recheck   *time.Timer
	lastEvent string
	// lastTokenEvent is the token keys' own: they are decided at every
	// Sync next to the serving certificate, and one shared "last event"
	// would make each log the other again at every probe.
	lastTokenEvent string
}

// Sync brings the Service, certificates and signer in line with the spec
// once, and reports the strategy. The CredentialIssuer controller's loop
// runs it each round, as the ImpersonationProxy strategy's probe.
func (c *Syncer) Sync(ctx context.Context) (*strategy.Working, error) {
	s, err := c.Settings(ctx)
	if err != nil {
		return nil, err
	}
	if !s.Enabled {
		if err := c.cleanup(ctx, true); err != nil {
			return nil, err
		}
		return nil, &strategy.ReasonError{Reason: configv1alpha1.DisabledStrategyReason, Err: errors.New(s.Why)}
	}
	if _, err := c.signer().Ensure(ctx); err != nil {
		return nil, fmt.Errorf("client certificate signer: %w", err)
	}
	c.ensureTokenKeys(ctx)
	svc, err := c.ensureService(ctx, &s)
	if err != nil {
		return nil, err
	}
	ep, err := s.ResolveEndpoint(svc)
	if errors.Is(err, proxyconfig.ErrPending) {
		return nil, fmt.Errorf("%s: %w", err.Error(), strategy.ErrPending)
	}
	if err != nil {
		return nil, err
	}

	var caData, how string
	if s.TLSSecretName != "" {
		caData, err = c.checkExternal(ctx, &s, ep)
		if err != nil {
			return nil, err
		}
		if err := c.cleanup(ctx, false); err != nil {
			return nil, err
		}
		how = "the certificate in Secret " + s.TLSSecretName
		c.event("using the external serving certificate", "secret", s.TLSSecretName, "endpoint", ep.URL)
	} else {
		caPEM, err := c.ensureGenerated(ctx, ep)
		if err != nil {
			return nil, err
		}
		caData = base64.StdEncoding.EncodeToString(caPEM)
		how = "a generated certificate"
		c.event("using the generated serving certificate", "secret", proxyconfig.GeneratedTLSSecret, "endpoint", ep.URL)
	}
	return &strategy.Working{
		Message: fmt.Sprintf("impersonation proxy serving at %s with %s", ep.URL, how),
		Frontend: &configv1alpha1.CredentialIssuerFrontend{
			Type: configv1alpha1.ImpersonationProxyFrontendType,
			ImpersonationProxyInfo: &configv1alpha1.ImpersonationProxyInfo{
				Endpoint: ep.URL, CertificateAuthorityData: caData,
			},
		},
	}, nil
}

// ensureTokenKeys creates and rotates the proxy's token keys. A problem
// here is logged, not returned: without token keys the proxy still works,
// handing out certificates, so it must not be reported as broken.
func (c *Syncer) ensureTokenKeys(ctx context.Context) {
	secrets := c.Kube.CoreV1().Secrets(c.Namespace)
	_, err := secrets.Get(ctx, proxyconfig.TokenKeySecret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		same, why, err := c.oneVersion(ctx)
		if err != nil {
			c.tokenEvent("proxy tokens wait: cannot compare the agent replicas' versions", "error", err)
			return
		}
		if !same {
			c.tokenEvent("proxy tokens wait until every agent replica runs this version; the proxy hands out certificates meanwhile", "reason", why)
			// Pods are not watched: look again soon for the rollout's end.
			c.recheckAt(c.Now().Add(rolloutRecheck))
			return
		}
	case err != nil:
		c.tokenEvent("proxy tokens: cannot read their keys", "secret", proxyconfig.TokenKeySecret, "error", err)
		return
	}
	// A retired key verifies for the longest lifetime any credential may
	// have (Retain nil), not this agent's: tokens it signed may have been
	// given a longer one before the lifetime was lowered, or by a replica
	// of another version in a rollout. It is a public key: keeping it a
	// day costs nothing.
	store := &tokenkeys.Store{Secrets: secrets, Name: proxyconfig.TokenKeySecret, Labels: c.Labels, Now: c.Now}
	if err := store.Ensure(ctx); err != nil {
		c.tokenEvent("proxy tokens: cannot keep their keys; the proxy hands out certificates", "error", err)
		return
	}
	c.tokenEvent("")
	secret, err := secrets.Get(ctx, proxyconfig.TokenKeySecret, metav1.GetOptions{})
	if err != nil {
		return // the Secret's own change brings the next Sync
	}
	if due, err := store.Due(secret); err == nil {
		c.recheckAt(due)
	}
}

// rolloutRecheck is how often the leader looks again for the end of a
// rollout that holds the token keys back: each look is a whole probe of
// every strategy (a CSR among them when that strategy fails), so not often.
const rolloutRecheck = time.Minute

// recheckHorizon bounds the wake-ups the leader arms: a step due later is
// seen by one of the controller's regular probes anyway.
const recheckHorizon = time.Hour

// recheckAt asks for a Sync at t, replacing any wake-up asked for before.
// A second of slack: the step is due at t, not a moment before.
func (c *Syncer) recheckAt(t time.Time) {
	if c.Kick == nil {
		return
	}
	d := max(t.Sub(c.Now()), 0) + time.Second
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recheck != nil {
		c.recheck.Stop()
		c.recheck = nil
	}
	if d <= recheckHorizon {
		c.recheck = time.AfterFunc(d, c.Kick)
	}
}

func (c *Syncer) signer() *secretca.Store {
	return &secretca.Store{
		Secrets: c.Kube.CoreV1().Secrets(c.Namespace), Name: proxyconfig.SignerSecret, Labels: c.Labels,
		CommonName: "pinniped impersonation proxy client signer", Lifetime: SignerLifetime, RenewBefore: SignerRenewal, Now: c.Now,
	}
}

// event logs a state change once, not on every probe.
func (c *Syncer) event(msg string, attrs ...any) {
	c.eventOnce(&c.lastEvent, msg, attrs...)
}

// tokenEvent logs a token key event once until it changes; an empty msg
// marks them fine again, so a problem that comes back is logged.
func (c *Syncer) tokenEvent(msg string, attrs ...any) {
	c.eventOnce(&c.lastTokenEvent, msg, attrs...)
}

func (c *Syncer) eventOnce(last *string, msg string, attrs ...any) {
	key := fmt.Sprint(append([]any{msg}, attrs...)...)
	c.mu.Lock()
	changed := *last != key
	*last = key
	c.mu.Unlock()
	if msg == "" {
		return
	}
	if changed {
		c.Log.Info(msg, attrs...)
	}
}

// ensureService makes the proxy's Service match the spec; nil for type None.
func (c *Syncer) ensureService(ctx context.Context, s *proxyconfig.Settings) (*corev1.Service, error) {
	services := c.Kube.CoreV1().Services(c.Namespace)
	existing, err := services.Get(ctx, proxyconfig.ServiceName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read Service %s: %w", proxyconfig.ServiceName, err)
	}
	found := err == nil
	if s.ServiceType == configv1alpha1.ImpersonationProxyServiceTypeNone {
		if found {
			if err := c.deleteService(ctx); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	want := c.desiredService(s)
	if found && existing.Spec.Type != want.Spec.Type {
		// Changing a Service's type in place trips over allocated node
		// ports; replace it instead.
		if err := c.deleteService(ctx); err != nil {
			return nil, err
		}
		found = false
	}
	if !found {
		created, err := services.Create(ctx, want, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create Service %s: %w", proxyconfig.ServiceName, err)
		}
		c.Log.Info("created the impersonation proxy Service", "service", proxyconfig.ServiceName, "type", want.Spec.Type)
		return created, nil
	}
	updated := existing.DeepCopy()
	updated.Labels = mergeMaps(updated.Labels, c.Labels)
	updated.Annotations = applyAnnotations(updated.Annotations, s.Annotations)
	updated.Spec.Selector = want.Spec.Selector
	updated.Spec.LoadBalancerIP = want.Spec.LoadBalancerIP //nolint:staticcheck // the spec still offers it, as upstream
	if len(updated.Spec.Ports) != 1 || updated.Spec.Ports[0].Port != proxyconfig.ServicePort || updated.Spec.Ports[0].TargetPort != want.Spec.Ports[0].TargetPort {
		updated.Spec.Ports = want.Spec.Ports
	}
	if equalService(existing, updated) {
		return existing, nil
	}
	out, err := services.Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update Service %s: %w", proxyconfig.ServiceName, err)
	}
	return out, nil
}

func (c *Syncer) desiredService(s *proxyconfig.Settings) *corev1.Service {
	typ := corev1.ServiceTypeClusterIP
	if s.ServiceType == configv1alpha1.ImpersonationProxyServiceTypeLoadBalancer {
		typ = corev1.ServiceTypeLoadBalancer
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: proxyconfig.ServiceName, Namespace: c.Namespace,
			Labels: maps.Clone(c.Labels), Annotations: applyAnnotations(nil, s.Annotations),
		},
		Spec: corev1.ServiceSpec{
			Type:           typ,
			Selector:       c.Selector,
			LoadBalancerIP: s.LoadBalancerIP,
			Ports: []corev1.ServicePort{{
				Name: "https", Protocol: corev1.ProtocolTCP,
				Port: proxyconfig.ServicePort, TargetPort: intstr.FromInt32(proxyconfig.ContainerPort),
			}},
		},
	}
}

func (c *Syncer) deleteService(ctx context.Context) error {
	err := c.Kube.CoreV1().Services(c.Namespace).Delete(ctx, proxyconfig.ServiceName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Service %s: %w", proxyconfig.ServiceName, err)
	}
	if err == nil {
		c.Log.Info("deleted the impersonation proxy Service", "service", proxyconfig.ServiceName)
	}
	return nil
}

// applyAnnotations sets the spec's annotations and removes the ones it set
// before but no longer lists.
func applyAnnotations(current, spec map[string]string) map[string]string {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range strings.Split(out[managedAnnotations], ",") {
		if _, still := spec[k]; k != "" && !still {
			delete(out, k)
		}
	}
	keys := slices.Sorted(maps.Keys(spec))
	for _, k := range keys {
		out[k] = spec[k]
	}
	if len(keys) > 0 {
		out[managedAnnotations] = strings.Join(keys, ",")
	} else {
		delete(out, managedAnnotations)
	}
	return out
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

func equalService(a, b *corev1.Service) bool {
	return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) &&
		maps.Equal(a.Spec.Selector, b.Spec.Selector) && a.Spec.LoadBalancerIP == b.Spec.LoadBalancerIP && //nolint:staticcheck // see ensureService
		slices.EqualFunc(a.Spec.Ports, b.Spec.Ports, func(x, y corev1.ServicePort) bool {
			return x.Port == y.Port && x.TargetPort == y.TargetPort && x.Protocol == y.Protocol && x.Name == y.Name
		})
}

// checkExternal validates the admin's Secret and returns the CA to
// advertise. Problems are errors with the fix in words.
func (c *Syncer) checkExternal(ctx context.Context, s *proxyconfig.Settings, ep *proxyconfig.Endpoint) (string, error) {
	secret, err := c.Kube.CoreV1().Secrets(c.Namespace).Get(ctx, s.TLSSecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c.event("the external serving certificate Secret is missing", "secret", s.TLSSecretName)
		return "", fmt.Errorf("spec.impersonationProxy.tls.secretName %q: no such Secret in namespace %s; create a kubernetes.io/tls Secret there", s.TLSSecretName, c.Namespace)
	}
	if err != nil {
		return "", fmt.Errorf("read Secret %s: %w", s.TLSSecretName, err)
	}
	var missing []string
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if len(secret.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		c.event("the external serving certificate Secret lacks keys", "secret", s.TLSSecretName, "missing", missing)
		return "", fmt.Errorf("the Secret %s has no %s: it must be a kubernetes.io/tls Secret with tls.crt and tls.key", s.TLSSecretName, strings.Join(missing, " or "))
	}
	if err := proxyconfig.Covers(secret.Data[corev1.TLSCertKey], ep.Host); err != nil {
		c.event("the external serving certificate does not cover the endpoint", "secret", s.TLSSecretName, "endpoint", ep.URL)
		return "", fmt.Errorf("the Secret %s: %w; reissue it for %s or set spec.impersonationProxy.externalEndpoint to a name it covers", s.TLSSecretName, err, ep.Host)
	}
	return s.AdvertisedCA(secret.Data["ca.crt"]), nil
}

// ensureGenerated keeps a serving certificate for the endpoint, signed by
// the generated CA, and returns the CA's PEM.
func (c *Syncer) ensureGenerated(ctx context.Context, ep *proxyconfig.Endpoint) ([]byte, error) {
	secrets := c.Kube.CoreV1().Secrets(c.Namespace)
	ca, err := (&secretca.Store{
		Secrets: secrets, Name: proxyconfig.GeneratedCASecret, Labels: c.Labels,
		CommonName: "pinniped impersonation proxy serving CA", Lifetime: ServingCALifetime, RenewBefore: servingLeafRenewal, Now: c.Now,
	}).Ensure(ctx)
	if err != nil {
		return nil, err
	}
	existing, err := secrets.Get(ctx, proxyconfig.GeneratedTLSSecret, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read Secret %s: %w", proxyconfig.GeneratedTLSSecret, err)
	}
	found := err == nil
	if found && c.leafCurrent(existing, ca.CertPEM(), ep) {
		return ca.CertPEM(), nil
	}
	leaf, err := ca.IssueServingCert(ep.Host, ep.DNSNames, ep.IPs, servingLeafLife)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{corev1.TLSCertKey: leaf.CertPEM, corev1.TLSPrivateKeyKey: leaf.KeyPEM, "ca.crt": ca.CertPEM()}
	if found {
		existing.Data = data
		_, err = secrets.Update(ctx, existing, metav1.UpdateOptions{})
	} else {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: proxyconfig.GeneratedTLSSecret, Labels: c.Labels},
			Type:       corev1.SecretTypeTLS, Data: data,
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("write Secret %s: %w", proxyconfig.GeneratedTLSSecret, err)
	}
	c.Log.Info("generated a serving certificate for the impersonation proxy", "secret", proxyconfig.GeneratedTLSSecret,
		"dnsNames", ep.DNSNames, "ips", fmt.Sprint(ep.IPs))
	return ca.CertPEM(), nil
}

// leafCurrent: signed by the current CA, for exactly the endpoint's names,
// and not close to expiry.
func (c *Syncer) leafCurrent(s *corev1.Secret, caPEM []byte, ep *proxyconfig.Endpoint) bool {
	if !bytes.Equal(s.Data["ca.crt"], caPEM) || len(s.Data[corev1.TLSPrivateKeyKey]) == 0 {
		return false
	}
	block, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if block == nil {
		return false
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil || c.Now().Add(servingLeafRenewal).After(leaf.NotAfter) {
		return false
	}
	return sameStrings(leaf.DNSNames, ep.DNSNames) && sameStrings(ipStrings(leaf.IPAddresses), ipStrings(ep.IPs))
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

// cleanup deletes the generated serving certificate once it is no longer
// used (the admin's Secret replaced it, or the proxy is off) and, when the
// proxy is off, its Service. The generated CA stays: kubeconfigs made
// earlier trust it, and they work again if the admin switches back.
func (c *Syncer) cleanup(ctx context.Context, disabled bool) error {
	if disabled {
		if err := c.deleteService(ctx); err != nil {
			return err
		}
	}
	err := c.Kube.CoreV1().Secrets(c.Namespace).Delete(ctx, proxyconfig.GeneratedTLSSecret, metav1.DeleteOptions{})
	switch {
	case err == nil:
		c.Log.Info("deleted the generated impersonation proxy certificate: it is no longer used", "secret", proxyconfig.GeneratedTLSSecret)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("delete unused Secret %s: %w", proxyconfig.GeneratedTLSSecret, err)
	}
	return nil
}
