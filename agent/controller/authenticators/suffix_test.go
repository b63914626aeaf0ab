package authenticators_test

import (
	"context"
	"encoding/base64"
	"log/slog"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt/jwttest"
	"github.com/pinniped-kit/pinniped/agent/controller/authenticators"
)

// TestSuffixedAuthenticators: under an API group suffix the controller
// loads the authenticators of the suffixed group only; the default group's
// belong to another server.
func TestSuffixedAuthenticators(t *testing.T) {
	jwtRes, webhookRes := authenticators.Resource("JWTAuthenticator", "tuna.io"), authenticators.Resource("WebhookAuthenticator", "tuna.io")
	if jwtRes.Group != "authentication.concierge.tuna.io" || jwtRes.Resource != "jwtauthenticators" || webhookRes.Resource != "webhookauthenticators" {
		t.Fatalf("resources %v %v", jwtRes, webhookRes)
	}
	iss := jwttest.New(t)
	ours := jwtAuthenticator(t, "ours", authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL, Audience: "a",
		TLS: &authv1alpha1.TLSSpec{CertificateAuthorityData: base64.StdEncoding.EncodeToString(iss.CABundle)}})
	ours.SetAPIVersion("authentication.concierge.tuna.io/v1alpha1")
	theirs := jwtAuthenticator(t, "theirs", authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL, Audience: "a",
		TLS: &authv1alpha1.TLSSpec{CertificateAuthorityData: base64.StdEncoding.EncodeToString(iss.CABundle)}})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		authenticators.JWTAuthenticators: "JWTAuthenticatorList", authenticators.WebhookAuthenticators: "WebhookAuthenticatorList",
		jwtRes: "JWTAuthenticatorList", webhookRes: "WebhookAuthenticatorList",
	}, ours, theirs)
	reg := tokenauth.NewRegistry()
	c := &authenticators.Controller{Now: time.Now, Dynamic: dyn, Kube: kubefake.NewClientset(), Namespace: "pinniped-suffixed", Registry: reg,
		IsLeader: func() bool { return true }, Log: slog.New(slog.DiscardHandler), GroupSuffix: "tuna.io"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()

	ourKey := tokenauth.Key{Kind: "JWTAuthenticator", Name: "ours"}
	eventually(t, "the suffixed authenticator loaded, with a status", func() bool {
		if !slices.Contains(reg.Keys(), ourKey) {
			return false
		}
		u, err := dyn.Resource(jwtRes).Get(ctx, "ours", metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return len(conds) > 0
	})
	if keys := reg.Keys(); len(keys) != 1 {
		t.Errorf("registry holds %v; only %v belongs to this agent", keys, ourKey)
	}
	u, err := dyn.Resource(authenticators.JWTAuthenticators).Get(ctx, "theirs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); len(conds) > 0 {
		t.Error("the default group's authenticator got a status from the suffixed agent")
	}
}
