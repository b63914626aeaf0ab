// Package kubeconfig discovers how to log in to a cluster that runs the
// pinniped agent (its CredentialIssuer, frontend, authenticator and OIDC
// issuer) and writes a kubeconfig whose user runs `pinniped login` as a
// kubectl exec credential plugin. It reads the cluster only through
// client-go's dynamic client.
package kubeconfig

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
)

// Resources read during discovery; the agent's own are under its API group
// suffix (see Discoverer.gvr).
var (
	apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	secretsGVR     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMapsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// ExchangeEndpoint is where clients exchange tokens: the cluster's API
// server (the aggregated TokenCredentialRequest API) or the impersonation
// proxy, as the CredentialIssuer's frontend for it says.
type ExchangeEndpoint struct {
	Mode     configv1alpha1.FrontendType
	Endpoint string
	CABundle []byte
}

// Authenticator is the chosen authenticator.
type Authenticator struct {
	Type string // jwt or webhook
	Name string
	// JWT only:
	Issuer   string
	Audience string
	CABundle []byte
}

// ErrNotInstalled means the cluster has no pinniped agent.
var ErrNotInstalled = errors.New("the pinniped agent is not installed in this cluster (run `pinniped install` as an admin first)")

// Discoverer reads what `get kubeconfig` needs from the cluster.
type Discoverer struct {
	Dynamic dynamic.Interface
	// APIGroupSuffix is the agent's API group suffix; empty means
	// pinniped.dev.
	APIGroupSuffix string
	// Poll and Wait bound waiting for a strategy that is still Pending.
	Poll, Wait time.Duration
	// Progress reports waits; may be nil.
	Progress func(string)
}

// gvr is the agent's resource in group (config or authentication) under
// the suffix.
func (d *Discoverer) gvr(group, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: groupsuffix.Group(group, d.APIGroupSuffix), Version: groupsuffix.Version, Resource: resource}
}

func (d *Discoverer) progress(msg string) {
	if d.Progress != nil {
		d.Progress(msg)
	}
}

// CredentialIssuer returns the named one, or the only one.
func (d *Discoverer) CredentialIssuer(ctx context.Context, name string) (*configv1alpha1.CredentialIssuer, error) {
	res := d.Dynamic.Resource(d.gvr("config", "credentialissuers"))
	var u *unstructured.Unstructured
	if name != "" {
		got, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, notInstalled(err, "CredentialIssuer "+name)
		}
		u = got
	} else {
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, notInstalled(err, "CredentialIssuers")
		}
		switch len(list.Items) {
		case 0:
			return nil, ErrNotInstalled
		case 1:
			u = &list.Items[0]
		default:
			return nil, fmt.Errorf("the cluster has %d CredentialIssuers (%s); choose one with --concierge-credential-issuer", len(list.Items), names(list.Items))
		}
	}
	var ci configv1alpha1.CredentialIssuer
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ci); err != nil {
		return nil, err
	}
	return &ci, nil
}

func notInstalled(err error, what string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s not found: %w", what, ErrNotInstalled)
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("reading %s is forbidden with this kubeconfig's credentials (use an admin kubeconfig): %w", what, err)
	}
	return fmt.Errorf("read %s: %w", what, err)
}

func names(items []unstructured.Unstructured) string {
	n := make([]string, len(items))
	for i, it := range items {
		n[i] = it.GetName()
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// ExchangeEndpoint picks the first working strategy whose frontend matches mode
// ("" accepts either), waiting while strategies are Pending. For the
// TokenCredentialRequest API the endpoint is the admin kubeconfig's cluster,
// which the caller passes in.
func (d *Discoverer) ExchangeEndpoint(ctx context.Context, credentialIssuerName, mode string, skipWait bool, cluster ExchangeEndpoint) (*ExchangeEndpoint, error) {
	deadline := time.Now().Add(d.Wait)
	for {
		ci, err := d.CredentialIssuer(ctx, credentialIssuerName)
		if err != nil {
			return nil, err
		}
		pending := false
		var problems []string
		for _, s := range ci.Status.Strategies {
			if s.Reason == configv1alpha1.PendingStrategyReason {
				pending = true
			}
			if s.Status != configv1alpha1.SuccessStrategyStatus || s.Frontend == nil {
				problems = append(problems, fmt.Sprintf("%s: %s", s.Type, s.Message))
				continue
			}
			if mode != "" && string(s.Frontend.Type) != mode {
				continue
			}
			switch s.Frontend.Type {
			case configv1alpha1.TokenCredentialRequestAPIFrontendType:
				f := cluster
				f.Mode = s.Frontend.Type
				return &f, nil
			case configv1alpha1.ImpersonationProxyFrontendType:
				info := s.Frontend.ImpersonationProxyInfo
				if info == nil {
					continue
				}
				ca, err := base64.StdEncoding.DecodeString(info.CertificateAuthorityData)
				if err != nil {
					return nil, fmt.Errorf("CredentialIssuer %s advertises an impersonation proxy CA that is not base64: %w", ci.Name, err)
				}
				return &ExchangeEndpoint{Mode: s.Frontend.Type, Endpoint: info.Endpoint, CABundle: ca}, nil
			}
		}
		if pending && !skipWait && time.Now().Before(deadline) {
			d.progress("waiting for the agent: a credential strategy is still Pending")
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(d.Poll):
			}
			continue
		}
		if len(problems) == 0 {
			problems = append(problems, "the agent has not reported any strategy yet (is it running? kubectl get pods -A -l app.kubernetes.io/name=pinniped-agent)")
		}
		want := "working credential strategy"
		if mode != "" {
			want = "working " + mode + " frontend"
		}
		return nil, fmt.Errorf("CredentialIssuer %s has no %s: %s", ci.Name, want, strings.Join(problems, "; "))
	}
}

// Authenticators lists both kinds as "type/name".
func (d *Discoverer) Authenticators(ctx context.Context) ([]Authenticator, error) {
	var out []Authenticator
	for typ, gvr := range map[string]schema.GroupVersionResource{"jwt": d.gvr("authentication", "jwtauthenticators"), "webhook": d.gvr("authentication", "webhookauthenticators")} {
		list, err := d.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, notInstalled(err, gvr.Resource)
		}
		for _, it := range list.Items {
			out = append(out, Authenticator{Type: typ, Name: it.GetName()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type+out[i].Name < out[j].Type+out[j].Name })
	return out, nil
}

// Authenticator loads the chosen authenticator's details. For a JWT
// authenticator that includes the issuer, audience and CA bundle (inline, or
// from a Secret/ConfigMap in the agent's namespace).
func (d *Discoverer) Authenticator(ctx context.Context, typ, name string) (*Authenticator, error) {
	switch typ {
	case "webhook":
		if _, err := d.Dynamic.Resource(d.gvr("authentication", "webhookauthenticators")).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return nil, notFound(err, "WebhookAuthenticator", name)
		}
		return &Authenticator{Type: typ, Name: name}, nil
	case "jwt":
	default:
		return nil, fmt.Errorf("--concierge-authenticator-type %q: use jwt or webhook", typ)
	}
	u, err := d.Dynamic.Resource(d.gvr("authentication", "jwtauthenticators")).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, notFound(err, "JWTAuthenticator", name)
	}
	var ja authv1alpha1.JWTAuthenticator
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ja); err != nil {
		return nil, err
	}
	a := &Authenticator{Type: typ, Name: name, Issuer: ja.Spec.Issuer, Audience: ja.Spec.Audience}
	if tls := ja.Spec.TLS; tls != nil {
		if tls.CertificateAuthorityData != "" {
			if a.CABundle, err = base64.StdEncoding.DecodeString(tls.CertificateAuthorityData); err != nil {
				return nil, fmt.Errorf("JWTAuthenticator %s: tls.certificateAuthorityData is not base64: %w", name, err)
			}
		} else if src := tls.CertificateAuthorityDataSource; src != nil {
			if a.CABundle, err = d.caFromSource(ctx, src); err != nil {
				return nil, fmt.Errorf("JWTAuthenticator %s: %w", name, err)
			}
		}
	}
	return a, nil
}

func notFound(err error, kind, name string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %q does not exist (list them with: kubectl get %ss)", kind, name, strings.ToLower(kind))
	}
	return notInstalled(err, kind+" "+name)
}

// caFromSource reads a CA bundle from the agent's namespace, found from the
// login APIService as upstream does.
func (d *Discoverer) caFromSource(ctx context.Context, src *authv1alpha1.CABundleSource) ([]byte, error) {
	name := groupsuffix.APIServiceName(groupsuffix.Login, d.APIGroupSuffix)
	svc, err := d.Dynamic.Resource(apiServicesGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, notInstalled(err, "APIService "+name)
	}
	ns, _, _ := unstructured.NestedString(svc.Object, "spec", "service", "namespace")
	var data string
	switch src.Kind {
	case "Secret":
		u, err := d.Dynamic.Resource(secretsGVR).Namespace(ns).Get(ctx, src.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read CA Secret %s/%s: %w", ns, src.Name, err)
		}
		enc, _, _ := unstructured.NestedString(u.Object, "data", src.Key)
		b, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("CA Secret %s/%s key %s is not base64: %w", ns, src.Name, src.Key, err)
		}
		data = string(b)
	case "ConfigMap":
		u, err := d.Dynamic.Resource(configMapsGVR).Namespace(ns).Get(ctx, src.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read CA ConfigMap %s/%s: %w", ns, src.Name, err)
		}
		data, _, _ = unstructured.NestedString(u.Object, "data", src.Key)
	default:
		return nil, fmt.Errorf("unknown CA source kind %q", src.Kind)
	}
	if data == "" {
		return nil, fmt.Errorf("%s %s/%s has no key %q", src.Kind, ns, src.Name, src.Key)
	}
	return []byte(data), nil
}
