package credentialissuer_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/controller/credentialissuer"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
)

func prober(probe func(context.Context) (*strategy.Working, error)) strategy.Prober {
	return strategy.Prober{Type: configv1alpha1.ImpersonationProxyStrategyType, Success: configv1alpha1.ListeningStrategyReason,
		Failure: configv1alpha1.ErrorDuringSetupStrategyReason, Hint: "see docs/impersonation-proxy.md", Probe: probe}
}

// TestTheProxysOwnFrontend: a strategy that works with a frontend of its
// own (the impersonation proxy's endpoint and CA) is written as the probe
// says, not as the aggregated API.
func TestTheProxysOwnFrontend(t *testing.T) {
	frontend := &configv1alpha1.CredentialIssuerFrontend{Type: configv1alpha1.ImpersonationProxyFrontendType,
		ImpersonationProxyInfo: &configv1alpha1.ImpersonationProxyInfo{Endpoint: "https://proxy.example", CertificateAuthorityData: "UFJPWFk="}}
	c, dyn := newController(t, nil, prober(func(context.Context) (*strategy.Working, error) {
		return &strategy.Working{Message: "the impersonation proxy is listening", Frontend: frontend}, nil
	}))
	if r := c.SyncOnce(context.Background()); !r.AnyWorking || r.Pending {
		t.Fatalf("result %+v", r)
	}
	s := statusOf(t, dyn)
	if len(s) != 1 || s[0].Status != configv1alpha1.SuccessStrategyStatus || s[0].Reason != configv1alpha1.ListeningStrategyReason ||
		s[0].Message != "the impersonation proxy is listening" || s[0].Frontend == nil || s[0].Frontend.ImpersonationProxyInfo == nil ||
		*s[0].Frontend.ImpersonationProxyInfo != *frontend.ImpersonationProxyInfo || s[0].Frontend.TokenCredentialRequestAPIInfo != nil {
		t.Fatalf("%+v", s)
	}
}

// TestNothingWorks: when every strategy fails the result says so (the
// controller then probes again sooner), and a pending error is not given
// the failure's hint, nor is a probe's own reason.
func TestNothingWorks(t *testing.T) {
	c, dyn := newController(t, nil,
		prober(func(context.Context) (*strategy.Working, error) { return nil, errors.New("cannot listen") }),
		prober(func(context.Context) (*strategy.Working, error) {
			return nil, errors.Join(strategy.ErrPending, errors.New("waiting for the load balancer"))
		}),
		prober(func(context.Context) (*strategy.Working, error) {
			return nil, &strategy.ReasonError{Reason: configv1alpha1.DisabledStrategyReason, Err: errors.New("mode is disabled")}
		}))
	r := c.SyncOnce(context.Background())
	if r.AnyWorking || !r.Pending {
		t.Fatalf("result %+v", r)
	}
	s := statusOf(t, dyn)
	if s[0].Reason != configv1alpha1.ErrorDuringSetupStrategyReason || s[0].Message != "cannot listen. see docs/impersonation-proxy.md" {
		t.Errorf("failure: %+v", s[0])
	}
	if s[1].Reason != configv1alpha1.PendingStrategyReason || s[1].Message != "pending\nwaiting for the load balancer" {
		t.Errorf("pending: %+v", s[1])
	}
	// A reason of the probe's own is not a failure to fix: no hint.
	if s[2].Reason != configv1alpha1.DisabledStrategyReason || s[2].Message != "mode is disabled" {
		t.Errorf("disabled: %+v", s[2])
	}
}

// TestStatusWriteKeepsTheSpec: writing the status leaves the spec an admin
// wrote (the impersonation proxy's settings, which replicas read) as it is.
func TestStatusWriteKeepsTheSpec(t *testing.T) {
	ci := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "config.concierge.pinniped.dev/v1alpha1", "kind": "CredentialIssuer",
		"metadata": map[string]any{"name": "pinniped-config"},
		"spec": map[string]any{"impersonationProxy": map[string]any{"mode": "enabled", "externalEndpoint": "proxy.example:443",
			"service": map[string]any{"type": "None"}}}}}
	c, dyn := newController(t, []runtime.Object{ci}, prober(func(context.Context) (*strategy.Working, error) { return nil, nil }))
	c.SyncOnce(context.Background())
	u, err := dyn.Resource(strategy.Resource("")).Get(context.Background(), "pinniped-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	want, _, _ := unstructured.NestedMap(ci.Object, "spec")
	if !reflect.DeepEqual(spec, want) {
		t.Fatalf("spec now %v, was %v", spec, want)
	}
	var wrote bool
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			wrote = true
		} else if a.GetVerb() == "update" {
			t.Errorf("updated the object, not its status")
		}
	}
	if !wrote {
		t.Fatal("status not written")
	}
}

// TestFrontendFromTheAgentsOwnView: without kube-public/cluster-info the
// aggregated API's frontend is the agent's own API server address and CA,
// from its in-cluster CA file if that is where the CA is.
func TestFrontendFromTheAgentsOwnView(t *testing.T) {
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, []byte("CA"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, restConfig := range map[string]*rest.Config{
		"CA data": {Host: "https://10.96.0.1:443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("CA")}},
		"CA file": {Host: "https://10.96.0.1:443", TLSClientConfig: rest.TLSClientConfig{CAFile: caFile}},
	} {
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{strategy.Resource(""): "CredentialIssuerList"})
		c := &credentialissuer.Controller{Log: slog.New(slog.DiscardHandler), Dynamic: dyn, Kube: fake.NewClientset(), Rest: restConfig, Name: "pinniped-config",
			Now: func() time.Time { return now }, Probers: []strategy.Prober{prober(func(context.Context) (*strategy.Working, error) { return nil, nil })}}
		c.SyncOnce(context.Background())
		s := statusOf(t, dyn)
		if info := s[0].Frontend.TokenCredentialRequestAPIInfo; info == nil || info.Server != "https://10.96.0.1:443" || info.CertificateAuthorityData != "Q0E=" {
			t.Errorf("%s: frontend %+v", name, s[0].Frontend)
		}
	}
}

// TestAFailedWriteIsNotSuccess: when the status cannot be written the
// result claims nothing works, so the controller tries again soon.
func TestAFailedWriteIsNotSuccess(t *testing.T) {
	c, dyn := newController(t, nil, prober(func(context.Context) (*strategy.Working, error) { return nil, nil }))
	dyn.PrependReactor("update", "credentialissuers", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd unavailable")
	})
	if r := c.SyncOnce(context.Background()); r.AnyWorking || r.Pending {
		t.Fatalf("result %+v after a failed write", r)
	}
}

// TestTriggerProbesAtOnce: a kick (a spec change, a fetched key) is
// answered with a new round before the interval is up.
func TestTriggerProbesAtOnce(t *testing.T) {
	probes := make(chan struct{}, 10)
	c, _ := newController(t, nil, prober(func(context.Context) (*strategy.Working, error) {
		probes <- struct{}{}
		return nil, nil
	}))
	trigger := make(chan struct{})
	c.Trigger, c.Interval = trigger, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	<-probes
	select {
	case trigger <- struct{}{}:
	case <-time.After(5 * time.Second):
		t.Fatal("the controller does not listen for kicks")
	}
	select {
	case <-probes:
	case <-time.After(5 * time.Second):
		t.Fatal("a kick did not probe again")
	}
}
