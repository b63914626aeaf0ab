package credentialissuer_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/controller/credentialissuer"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
)

// TestSuffixedCredentialIssuer: under an API group suffix the controller
// writes (and recreates) the CredentialIssuer of the suffixed group, and
// leaves the default group's alone: that one belongs to another server.
func TestSuffixedCredentialIssuer(t *testing.T) {
	suffixed := strategy.Resource("tuna.io")
	if suffixed.Group != "config.concierge.tuna.io" || suffixed.Resource != "credentialissuers" || strategy.Resource("").Group != configv1alpha1.GroupName {
		t.Fatalf("resources %v, %v", suffixed, strategy.Resource(""))
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		strategy.Resource(""): "CredentialIssuerList", suffixed: "CredentialIssuerList"})
	c := &credentialissuer.Controller{Log: slog.New(slog.DiscardHandler), Dynamic: dyn, Kube: fake.NewClientset(), Rest: &rest.Config{Host: "https://internal"},
		Name: "pinniped-config", GroupSuffix: "tuna.io", Now: func() time.Time { return now },
		Probers: []strategy.Prober{{Type: configv1alpha1.CertificateSigningRequestStrategyType,
			Success: configv1alpha1.SigningRequestsApprovedStrategyReason, Failure: configv1alpha1.CouldNotSignRequestsStrategyReason,
			Probe: func(context.Context) (*strategy.Working, error) { return nil, nil }}}}
	c.SyncOnce(context.Background())

	u, err := dyn.Resource(suffixed).Get(context.Background(), "pinniped-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the suffixed CredentialIssuer was not created: %v", err)
	}
	if u.GetAPIVersion() != "config.concierge.tuna.io/v1alpha1" {
		t.Errorf("created as %s", u.GetAPIVersion())
	}
	if _, err := dyn.Resource(strategy.Resource("")).Get(context.Background(), "pinniped-config", metav1.GetOptions{}); err == nil {
		t.Error("a CredentialIssuer of the default group was written")
	}
}
