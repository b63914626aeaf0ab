package authenticators_test

import (
	"context"
	"encoding/base64"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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

func jwtAuthenticator(t *testing.T, name string, spec authv1alpha1.JWTAuthenticatorSpec) *unstructured.Unstructured {
	t.Helper()
	obj := &authv1alpha1.JWTAuthenticator{
		TypeMeta:   metav1.TypeMeta{APIVersion: authv1alpha1.SchemeGroupVersion.String(), Kind: "JWTAuthenticator"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec:       spec,
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReconcileLifecycle(t *testing.T) {
	iss := jwttest.New(t)
	scheme := runtime.NewScheme()
	listKinds := map[schema.GroupVersionResource]string{
		authenticators.JWTAuthenticators:     "JWTAuthenticatorList",
		authenticators.WebhookAuthenticators: "WebhookAuthenticatorList",
	}
	good := jwtAuthenticator(t, "dex", authv1alpha1.JWTAuthenticatorSpec{
		Issuer: iss.URL, Audience: "a",
		TLS: &authv1alpha1.TLSSpec{CertificateAuthorityDataSource: &authv1alpha1.CABundleSource{Kind: "ConfigMap", Name: "dex-ca", Key: "ca.crt"}},
	})
	broken := jwtAuthenticator(t, "broken", authv1alpha1.JWTAuthenticatorSpec{
		Issuer: iss.URL, Audience: "a", // no CA: discovery fails TLS verification
	})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, listKinds, good, broken)
	kube := kubefake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "pinniped", Name: "dex-ca"},
		Data:       map[string]string{"ca.crt": string(iss.CABundle)},
	})
	reg := tokenauth.NewRegistry()
	c := &authenticators.Controller{
		Now:     time.Now,
		Dynamic: dyn, Kube: kube, Namespace: "pinniped", Registry: reg,
		IsLeader: func() bool { return true }, Log: slog.New(slog.DiscardHandler),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if c.Synced() {
		t.Fatal("synced before it ran")
	}
	go func() { _ = c.Run(ctx) }()

	dexKey := tokenauth.Key{Kind: "JWTAuthenticator", Name: "dex"}
	status := func(name string) authv1alpha1.JWTAuthenticatorStatus {
		u, err := dyn.Resource(authenticators.JWTAuthenticators).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var a authv1alpha1.JWTAuthenticator
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &a)
		return a.Status
	}
	// Synced (what the replica's readiness waits for) only once both have
	// been tried: dex is then in the registry, and broken has failed once.
	eventually(t, "the first pass", c.Synced)
	if keys := reg.Keys(); len(keys) != 1 || keys[0] != dexKey {
		t.Fatalf("synced with the registry holding %v, want dex", keys)
	}
	eventually(t, "dex to be Ready", func() bool { return status("dex").Phase == authv1alpha1.PhaseReady })
	eventually(t, "broken to be Error", func() bool { return status("broken").Phase == authv1alpha1.PhaseError })
	if keys := reg.Keys(); len(keys) != 1 || keys[0] != dexKey {
		t.Fatalf("registry has %v, want only dex", keys)
	}
	for _, cond := range status("broken").Conditions {
		want := map[string]metav1.ConditionStatus{
			"TLSConfigurationValid": "True", "IssuerURLValid": "True", "ClaimRulesValid": "True", "DiscoveryURLValid": "False",
			"JWKSURLValid": "Unknown", "JWKSFetchValid": "Unknown", "AuthenticatorValid": "Unknown", "Ready": "False",
		}[cond.Type]
		if cond.Status != want {
			t.Errorf("broken: %s is %s, want %s (%s)", cond.Type, cond.Status, want, cond.Message)
		}
	}

	// Fixing the broken one by giving it the CA makes it Ready without a restart.
	fixed := broken.DeepCopy()
	_ = unstructured.SetNestedField(fixed.Object, base64.StdEncoding.EncodeToString(iss.CABundle), "spec", "tls", "certificateAuthorityData")
	fixed.SetGeneration(2)
	if _, err := dyn.Resource(authenticators.JWTAuthenticators).Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "broken to become Ready", func() bool { return status("broken").Phase == authv1alpha1.PhaseReady })

	// spec.allowedClockSkew is in force once set, and the Ready condition
	// says which skew is: 0s, as kube-apiserver, when unset.
	late := iss.Sign(t, map[string]any{"iss": iss.URL, "aud": "a", "username": "alice",
		"iat": time.Now().Add(-10 * time.Minute).Unix(), "exp": time.Now().Add(-90 * time.Second).Unix()})
	if _, err := reg.AuthenticateToken(ctx, dexKey, late); err == nil || !strings.Contains(err.Error(), "allowedClockSkew is 0s") {
		t.Fatalf("a token 90 s past its exp, with no skew allowed: %v", err)
	}
	if msg := readyMessage(status("dex")); !strings.Contains(msg, "allowedClockSkew 0s") {
		t.Errorf("dex's Ready condition does not state the skew: %q", msg)
	}
	skewed := fixed.DeepCopy()
	_ = unstructured.SetNestedField(skewed.Object, "2m", "spec", "allowedClockSkew")
	skewed.SetGeneration(3)
	if _, err := dyn.Resource(authenticators.JWTAuthenticators).Update(ctx, skewed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "broken's Ready condition to state its skew", func() bool {
		return strings.Contains(readyMessage(status("broken")), "allowedClockSkew 2m0s")
	})
	if _, err := reg.AuthenticateToken(ctx, tokenauth.Key{Kind: "JWTAuthenticator", Name: "broken"}, late); err != nil {
		t.Fatalf("a token 90 s past its exp, with 2m of skew allowed: %v", err)
	}
	// A value the CRD would refuse (stored under an older CRD, or past it)
	// is clamped, and the Ready condition says so, either way out of range.
	for i, c := range []struct{ stored, applied string }{{"-1m", "0s"}, {"5m", "3m0s"}} {
		out := fixed.DeepCopy()
		_ = unstructured.SetNestedField(out.Object, c.stored, "spec", "allowedClockSkew")
		out.SetGeneration(int64(4 + i))
		if _, err := dyn.Resource(authenticators.JWTAuthenticators).Update(ctx, out, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "broken's Ready condition to state the clamped skew for "+c.stored, func() bool {
			msg := readyMessage(status("broken"))
			return strings.Contains(msg, "allowedClockSkew "+c.applied+":") && strings.Contains(msg, "(spec.allowedClockSkew "+c.stored+"0s is outside 0s to 3m0s)")
		})
	}

	// Deleting an authenticator removes it from the registry.
	if err := dyn.Resource(authenticators.JWTAuthenticators).Delete(ctx, "dex", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "dex to leave the registry", func() bool {
		for _, k := range reg.Keys() {
			if k == dexKey {
				return false
			}
		}
		return true
	})
}

func readyMessage(s authv1alpha1.JWTAuthenticatorStatus) string {
	for _, c := range s.Conditions {
		if c.Type == authv1alpha1.ConditionReady {
			return c.Message
		}
	}
	return ""
}

// TestStatusWrittenOnceLeading: a replica that worked an authenticator out
// before it led writes its status as soon as it leads (Resync), not at the
// next informer resync minutes later.
func TestStatusWrittenOnceLeading(t *testing.T) {
	iss := jwttest.New(t)
	listKinds := map[schema.GroupVersionResource]string{
		authenticators.JWTAuthenticators:     "JWTAuthenticatorList",
		authenticators.WebhookAuthenticators: "WebhookAuthenticatorList",
	}
	dex := jwtAuthenticator(t, "dex", authv1alpha1.JWTAuthenticatorSpec{
		Issuer: iss.URL, Audience: "a", TLS: &authv1alpha1.TLSSpec{CertificateAuthorityData: base64.StdEncoding.EncodeToString(iss.CABundle)},
	})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, dex)
	var leading atomic.Bool
	c := &authenticators.Controller{
		Now:     time.Now,
		Dynamic: dyn, Kube: kubefake.NewClientset(), Namespace: "pinniped", Registry: tokenauth.NewRegistry(),
		IsLeader: leading.Load, Log: slog.New(slog.DiscardHandler),
	}
	c.Resync() // before Run: nothing to do, and no panic
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	phase := func() authv1alpha1.Phase {
		u, err := dyn.Resource(authenticators.JWTAuthenticators).Get(ctx, "dex", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var a authv1alpha1.JWTAuthenticator
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &a)
		return a.Status.Phase
	}
	eventually(t, "the first pass", c.Synced)
	if p := phase(); p != "" {
		t.Fatalf("a replica that does not lead wrote phase %q", p)
	}
	leading.Store(true)
	c.Resync()
	eventually(t, "the new leader to write Ready", func() bool { return phase() == authv1alpha1.PhaseReady })
}

// TestSyncedWithNoAuthenticators: with none to build, the controller is
// synced as soon as its informers are.
func TestSyncedWithNoAuthenticators(t *testing.T) {
	listKinds := map[schema.GroupVersionResource]string{
		authenticators.JWTAuthenticators:     "JWTAuthenticatorList",
		authenticators.WebhookAuthenticators: "WebhookAuthenticatorList",
	}
	c := &authenticators.Controller{
		Now:     time.Now,
		Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds), Kube: kubefake.NewClientset(),
		Namespace: "pinniped", Registry: tokenauth.NewRegistry(), IsLeader: func() bool { return false }, Log: slog.New(slog.DiscardHandler),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	eventually(t, "synced", c.Synced)
}
