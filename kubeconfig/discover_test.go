package kubeconfig_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/pinniped-kit/pinniped/kubeconfig"
)

func obj(apiVersion, kind, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

func issuer(name string, strategies ...map[string]any) *unstructured.Unstructured {
	s := make([]any, len(strategies))
	for i := range strategies {
		s[i] = strategies[i]
	}
	return obj("config.concierge.pinniped.dev/v1alpha1", "CredentialIssuer", name, map[string]any{"status": map[string]any{"strategies": s}})
}

func discoverer(objs ...runtime.Object) *kubeconfig.Discoverer {
	lists := map[schema.GroupVersionResource]string{
		{Group: "config.concierge.pinniped.dev", Version: "v1alpha1", Resource: "credentialissuers"}:             "CredentialIssuerList",
		{Group: "authentication.concierge.pinniped.dev", Version: "v1alpha1", Resource: "jwtauthenticators"}:     "JWTAuthenticatorList",
		{Group: "authentication.concierge.pinniped.dev", Version: "v1alpha1", Resource: "webhookauthenticators"}: "WebhookAuthenticatorList",
	}
	return &kubeconfig.Discoverer{Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objs...),
		Poll: 10 * time.Millisecond, Wait: 100 * time.Millisecond}
}

var tcr = map[string]any{"type": "KubeClusterSigningCertificate", "status": "Success", "reason": "FetchedKey", "message": "ok",
	"lastUpdateTime": "2026-11-22T10:00:00Z",
	"frontend":       map[string]any{"type": "TokenCredentialRequestAPI", "tokenCredentialRequestInfo": map[string]any{"server": "https://x", "certificateAuthorityData": "eA=="}}}

func TestExchangeEndpointErrorsSayWhatToDo(t *testing.T) {
	ctx := context.Background()
	cluster := kubeconfig.ExchangeEndpoint{Endpoint: "https://cluster", CABundle: []byte("ca")}

	_, err := discoverer().ExchangeEndpoint(ctx, "", "", false, cluster)
	if !errors.Is(err, kubeconfig.ErrNotInstalled) || !strings.Contains(err.Error(), "pinniped install") {
		t.Errorf("no agent: %v", err)
	}
	_, err = discoverer(issuer("a", tcr), issuer("b", tcr)).ExchangeEndpoint(ctx, "", "", false, cluster)
	if err == nil || !strings.Contains(err.Error(), "a, b") || !strings.Contains(err.Error(), "--concierge-credential-issuer") {
		t.Errorf("two issuers: %v", err)
	}
	broken := map[string]any{"type": "CertificateSigningRequest", "status": "Error", "reason": "CouldNotSignRequests", "message": "csr signer off", "lastUpdateTime": "2026-11-22T10:00:00Z"}
	_, err = discoverer(issuer("a", broken)).ExchangeEndpoint(ctx, "", "", false, cluster)
	if err == nil || !strings.Contains(err.Error(), "csr signer off") {
		t.Errorf("not ready: %v", err)
	}
	pending := map[string]any{"type": "KubeClusterSigningCertificate", "status": "Error", "reason": "Pending", "message": "still fetching", "lastUpdateTime": "2026-11-22T10:00:00Z"}
	start := time.Now()
	_, err = discoverer(issuer("a", pending)).ExchangeEndpoint(ctx, "", "", false, cluster)
	if err == nil || time.Since(start) < 90*time.Millisecond {
		t.Errorf("pending should be waited on, then reported: %v after %v", err, time.Since(start))
	}
	f, err := discoverer(issuer("a", broken, tcr)).ExchangeEndpoint(ctx, "", "", false, cluster)
	if err != nil || f.Endpoint != "https://cluster" {
		t.Errorf("TokenCredentialRequestAPI uses the admin's cluster endpoint: %+v %v", f, err)
	}
	_, err = discoverer(issuer("a", tcr)).ExchangeEndpoint(ctx, "", "ImpersonationProxy", false, cluster)
	if err == nil || !strings.Contains(err.Error(), "ImpersonationProxy") {
		t.Errorf("mode not offered: %v", err)
	}
}

func TestAuthenticatorDiscovery(t *testing.T) {
	ctx := context.Background()
	ca := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\n"))
	jwtA := obj("authentication.concierge.pinniped.dev/v1alpha1", "JWTAuthenticator", "dex", map[string]any{
		"spec": map[string]any{"issuer": "https://dex", "audience": "c1", "tls": map[string]any{"certificateAuthorityData": ca}}})
	hook := obj("authentication.concierge.pinniped.dev/v1alpha1", "WebhookAuthenticator", "corp", map[string]any{"spec": map[string]any{"endpoint": "https://h"}})
	d := discoverer(jwtA, hook)
	all, err := d.Authenticators(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("%v %v", all, err)
	}
	a, err := d.Authenticator(ctx, "jwt", "dex")
	if err != nil || a.Issuer != "https://dex" || a.Audience != "c1" || !strings.HasPrefix(string(a.CABundle), "-----BEGIN") {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := d.Authenticator(ctx, "jwt", "nope"); err == nil || !strings.Contains(err.Error(), "kubectl get jwtauthenticators") {
		t.Fatalf("missing authenticator: %v", err)
	}
}

// TestDiscoveryUnderASuffix: an agent installed with an API group suffix
// is found under it, and one under pinniped.dev beside it is not.
func TestDiscoveryUnderASuffix(t *testing.T) {
	lists := map[schema.GroupVersionResource]string{}
	for _, sfx := range []string{"pinniped.dev", "example.net"} {
		lists[schema.GroupVersionResource{Group: "config.concierge." + sfx, Version: "v1alpha1", Resource: "credentialissuers"}] = "CredentialIssuerList"
		lists[schema.GroupVersionResource{Group: "authentication.concierge." + sfx, Version: "v1alpha1", Resource: "jwtauthenticators"}] = "JWTAuthenticatorList"
		lists[schema.GroupVersionResource{Group: "authentication.concierge." + sfx, Version: "v1alpha1", Resource: "webhookauthenticators"}] = "WebhookAuthenticatorList"
	}
	suffixed := issuer("suffixed", tcr)
	suffixed.SetAPIVersion("config.concierge.example.net/v1alpha1")
	d := &kubeconfig.Discoverer{Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, issuer("plain", tcr), suffixed),
		APIGroupSuffix: "example.net", Poll: 10 * time.Millisecond, Wait: 100 * time.Millisecond}
	ci, err := d.CredentialIssuer(context.Background(), "")
	if err != nil || ci.Name != "suffixed" {
		t.Fatalf("found %v, %v", ci, err)
	}
}
