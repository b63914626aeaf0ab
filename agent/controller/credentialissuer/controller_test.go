package credentialissuer_test

import (
	"context"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/controller/credentialissuer"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func newController(t *testing.T, objs []runtime.Object, probers ...strategy.Prober) (*credentialissuer.Controller, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{strategy.Resource(""): "CredentialIssuerList"}, objs...)
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "cluster-info"},
		Data: map[string]string{"kubeconfig": "apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster: {server: \"https://public:6443\", certificate-authority-data: Q0E=}\n"}})
	return &credentialissuer.Controller{Log: slog.New(slog.DiscardHandler), Dynamic: dyn, Kube: kube, Rest: &rest.Config{Host: "https://internal"}, Name: "pinniped-config",
		Probers: probers, Now: func() time.Time { return now }}, dyn
}

func statusOf(t *testing.T, dyn *dynamicfake.FakeDynamicClient) []configv1alpha1.CredentialIssuerStrategy {
	t.Helper()
	u, err := dyn.Resource(strategy.Resource("")).Get(context.Background(), "pinniped-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ci configv1alpha1.CredentialIssuer
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ci); err != nil {
		t.Fatal(err)
	}
	return ci.Status.Strategies
}

// TestStatusSaysWhatWorksAndWhy: every strategy's outcome, in the order
// clients should prefer them, with the frontend clients should use; the
// CredentialIssuer is recreated if an admin deleted it.
func TestStatusSaysWhatWorksAndWhy(t *testing.T) {
	c, dyn := newController(t, nil,
		strategy.Prober{Type: configv1alpha1.KubeClusterSigningCertificateStrategyType, Success: configv1alpha1.FetchedKeyStrategyReason,
			Failure: configv1alpha1.CouldNotFetchKeyStrategyReason, Hint: "on managed clusters this is expected",
			Probe: func(context.Context) (*strategy.Working, error) {
				return nil, errors.New("no kube-controller-manager pod")
			}},
		strategy.Prober{Type: configv1alpha1.ImpersonationProxyStrategyType, Success: configv1alpha1.ListeningStrategyReason,
			Failure: configv1alpha1.ErrorDuringSetupStrategyReason,
			Probe: func(context.Context) (*strategy.Working, error) {
				return nil, &strategy.ReasonError{Reason: configv1alpha1.DisabledStrategyReason, Err: errors.New("the cluster has control-plane nodes")}
			}},
		strategy.Prober{Type: configv1alpha1.KubeClusterSigningCertificateStrategyType, Success: configv1alpha1.SigningRequestsApprovedStrategyReason,
			Failure: configv1alpha1.CouldNotSignRequestsStrategyReason,
			Probe:   func(context.Context) (*strategy.Working, error) { return nil, nil }},
	)
	r := c.SyncOnce(context.Background())
	if !r.AnyWorking || r.Pending {
		t.Fatalf("result %+v", r)
	}
	s := statusOf(t, dyn)
	if len(s) != 3 {
		t.Fatalf("strategies %+v", s)
	}
	if s[0].Status != configv1alpha1.ErrorStrategyStatus || s[0].Reason != configv1alpha1.CouldNotFetchKeyStrategyReason ||
		!strings.Contains(s[0].Message, "no kube-controller-manager pod. on managed clusters this is expected") {
		t.Errorf("failure with a hint: %+v", s[0])
	}
	if s[1].Reason != configv1alpha1.DisabledStrategyReason || strings.Contains(s[1].Message, "expected") {
		t.Errorf("a reason of the probe's own: %+v", s[1])
	}
	if s[2].Status != configv1alpha1.SuccessStrategyStatus || s[2].Frontend == nil || s[2].Frontend.TokenCredentialRequestAPIInfo == nil ||
		s[2].Frontend.TokenCredentialRequestAPIInfo.Server != "https://public:6443" || s[2].Frontend.TokenCredentialRequestAPIInfo.CertificateAuthorityData != "Q0E=" ||
		!s[2].LastUpdateTime.Time.Equal(now) {
		t.Errorf("success through cluster-info: %+v", s[2])
	}
}

func TestPendingIsReported(t *testing.T) {
	ci := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "config.concierge.pinniped.dev/v1alpha1", "kind": "CredentialIssuer",
		"metadata": map[string]any{"name": "pinniped-config"}}}
	c, dyn := newController(t, []runtime.Object{ci}, strategy.Prober{Type: configv1alpha1.ImpersonationProxyStrategyType,
		Success: configv1alpha1.ListeningStrategyReason, Failure: configv1alpha1.ErrorDuringSetupStrategyReason,
		Probe: func(context.Context) (*strategy.Working, error) {
			return nil, errors.Join(strategy.ErrPending, errors.New("waiting for the load balancer's address"))
		}})
	r := c.SyncOnce(context.Background())
	if r.AnyWorking || !r.Pending {
		t.Fatalf("result %+v", r)
	}
	if s := statusOf(t, dyn); len(s) != 1 || s[0].Reason != configv1alpha1.PendingStrategyReason || !strings.Contains(s[0].Message, "load balancer") {
		t.Fatalf("%+v", s)
	}
}

// A strategy whose frontend is the TokenCredentialRequest API is reported
// as an error where the API server refuses anonymous requests there (HTTP
// 401, as with anonymous access only to health endpoints), so that clients
// choose the impersonation proxy; with anonymous requests allowed (403 for
// system:anonymous, 405, 200) it works. An answer that says neither (a
// 429, a 503, no answer) keeps the last verdict, either way. The probe
// asks for the exchange's own resource under the agent's suffix, without
// the agent's credentials.
func TestAnonymousExchangeRefused(t *testing.T) {
	code := http.StatusUnauthorized
	var gotPath, gotAuth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAuth = r.URL.Path, r.Header.Get("Authorization")
		w.WriteHeader(code)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: "agent-token", TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	c, dyn := newController(t, nil, strategy.Prober{Type: configv1alpha1.KubeClusterSigningCertificateStrategyType,
		Success: configv1alpha1.FetchedKeyStrategyReason, Failure: configv1alpha1.CouldNotFetchKeyStrategyReason,
		Probe: func(context.Context) (*strategy.Working, error) { return nil, nil }})
	c.AnonymousExchange = credentialissuer.AnonymousExchangeCheck(cfg, "example.com")
	for _, step := range []struct {
		code        int
		wantSuccess bool
	}{
		{http.StatusUnauthorized, false},
		{http.StatusTooManyRequests, false}, // cannot tell: still refused
		{http.StatusForbidden, true},
		{http.StatusServiceUnavailable, true}, // cannot tell: still allowed
		{http.StatusMethodNotAllowed, true},
		{http.StatusUnauthorized, false},
		{http.StatusOK, true},
	} {
		code = step.code
		r := c.SyncOnce(context.Background())
		s := statusOf(t, dyn)[0]
		if gotPath != "/apis/login.concierge.example.com/v1alpha1/tokencredentialrequests" || gotAuth != "" {
			t.Errorf("probe asked %q with Authorization %q; want the exchange's resource, anonymously", gotPath, gotAuth)
		}
		if step.wantSuccess != (s.Status == configv1alpha1.SuccessStrategyStatus) || !r.AnyWorking {
			t.Errorf("HTTP %d: %+v (working %v), want success %v", step.code, s, r.AnyWorking, step.wantSuccess)
		}
		if !step.wantSuccess && (s.Reason != configv1alpha1.ErrorDuringSetupStrategyReason || s.Frontend != nil ||
			!strings.Contains(s.Message, "refuses anonymous requests") || !strings.Contains(s.Message, "impersonation proxy")) {
			t.Errorf("HTTP %d: %+v; want an error that names the impersonation proxy", step.code, s)
		}
	}
}

// A new leader whose first probe cannot tell takes the verdict the last
// leader wrote, and looks again soon; so does one with nothing written.
func TestAnonymousVerdictOfTheLastLeader(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	prober := strategy.Prober{Type: configv1alpha1.KubeClusterSigningCertificateStrategyType,
		Success: configv1alpha1.FetchedKeyStrategyReason, Failure: configv1alpha1.CouldNotFetchKeyStrategyReason,
		Probe: func(context.Context) (*strategy.Working, error) { return nil, nil }}
	refused := (&credentialissuer.AnonymousRefusedError{Path: "/apis/login.concierge.pinniped.dev/v1alpha1/tokencredentialrequests"}).Error()
	for _, tc := range []struct {
		name        string
		written     string // the last leader's message, "" for none
		wantSuccess bool
	}{{"refused before", refused, false}, {"nothing written", "", true}} {
		var objs []runtime.Object
		if tc.written != "" {
			objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "config.concierge.pinniped.dev/v1alpha1", "kind": "CredentialIssuer", "metadata": map[string]any{"name": "pinniped-config"},
				"status": map[string]any{"strategies": []any{map[string]any{"type": "KubeClusterSigningCertificate", "status": "Error",
					"reason": "ErrorDuringSetup", "message": tc.written, "lastUpdateTime": "2026-11-23T12:00:00Z"}}}}})
		}
		c, dyn := newController(t, objs, prober)
		c.AnonymousExchange = credentialissuer.AnonymousExchangeCheck(cfg, "")
		r := c.SyncOnce(context.Background())
		s := statusOf(t, dyn)[0]
		if tc.wantSuccess != (s.Status == configv1alpha1.SuccessStrategyStatus) || !r.Pending {
			t.Errorf("%s: %+v (pending %v), want success %v and a quick look again", tc.name, s, r.Pending, tc.wantSuccess)
		}
	}
}
