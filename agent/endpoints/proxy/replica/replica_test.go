package replica

import (
	"context"
	"io"
	"log/slog"
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

	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
)

func newRuntime(t *testing.T, spec map[string]any, objs ...runtime.Object) (*Runtime, *fake.Clientset) {
	t.Helper()
	var cis []runtime.Object
	if spec != nil {
		cis = append(cis, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "config.concierge.pinniped.dev/v1alpha1",
			"kind": "CredentialIssuer", "metadata": map[string]any{"name": "pinniped-config"}, "spec": spec}})
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{strategy.Resource(""): "CredentialIssuerList"}, cis...)
	kube := fake.NewClientset(objs...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p, err := New(ctx, Config{Namespace: "pinniped", CredentialIssuerName: "pinniped-config", CertTTL: time.Minute,
		ServiceAccount: "pinniped-agent-proxy", ListenAddress: "127.0.0.1:0"},
		kube, dyn, &rest.Config{Host: "https://kubernetes.default.svc"}, tokenauth.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return p, kube
}

func controlPlaneNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}
}

// TestSettingsFollowTheSpecAndTheNodes: the replica reads the
// CredentialIssuer's impersonationProxy spec; without one (auto), the
// proxy runs only where no node is a control-plane node.
func TestSettingsFollowTheSpecAndTheNodes(t *testing.T) {
	for _, c := range []struct {
		name    string
		spec    map[string]any
		nodes   []runtime.Object
		enabled bool
	}{
		{"no CredentialIssuer, a managed cluster", nil, nil, true},
		{"no CredentialIssuer, a control plane", nil, []runtime.Object{controlPlaneNode()}, false},
		{"auto, a control plane", map[string]any{"impersonationProxy": map[string]any{"mode": "auto", "service": map[string]any{"type": "None"}}}, []runtime.Object{controlPlaneNode()}, false},
		{"enabled beside a control plane", map[string]any{"impersonationProxy": map[string]any{"mode": "enabled", "service": map[string]any{"type": "None"}}}, []runtime.Object{controlPlaneNode()}, true},
		{"disabled on a managed cluster", map[string]any{"impersonationProxy": map[string]any{"mode": "disabled", "service": map[string]any{"type": "None"}}}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, _ := newRuntime(t, c.spec, c.nodes...)
			s, err := p.settings(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if s.Enabled != c.enabled {
				t.Fatalf("enabled %v (%s), want %v", s.Enabled, s.Why, c.enabled)
			}
		})
	}
}

// TestControlPlaneIsAskedRarely: every replica asks on every sync, so the
// answer is kept for a while rather than listing nodes each time.
func TestControlPlaneIsAskedRarely(t *testing.T) {
	p, kube := newRuntime(t, nil, controlPlaneNode())
	for range 3 {
		if found, err := p.hasControlPlane(context.Background()); err != nil || !found {
			t.Fatalf("found %v, %v", found, err)
		}
	}
	lists := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "nodes" {
			lists++
		}
	}
	if lists != 1 {
		t.Fatalf("nodes listed %d times", lists)
	}
}

// TestDisabledProxyDoesNotListen: a sync with the proxy disabled leaves
// nothing listening, and one with it enabled but no serving Secret yet
// does not listen either (and says so once).
func TestDisabledProxyDoesNotListen(t *testing.T) {
	for _, mode := range []string{"disabled", "enabled"} {
		p, _ := newRuntime(t, map[string]any{"impersonationProxy": map[string]any{"mode": mode, "service": map[string]any{"type": "None"}}})
		p.sync(context.Background())
		if p.server.Running() {
			t.Errorf("%s: listening", mode)
		}
		if mode == "enabled" && p.lastProblem == "" {
			t.Errorf("enabled without a serving Secret: no problem reported")
		}
	}
}

// TestReadyAfterTheFirstLook: a replica is not ready before it has read
// the proxy's settings once; after that a disabled proxy, or one that has
// no serving certificate yet (no replica could serve it), never holds the
// replica back, so the aggregated API is not taken down with it.
func TestReadyAfterTheFirstLook(t *testing.T) {
	for _, mode := range []string{"disabled", "enabled"} {
		p, _ := newRuntime(t, map[string]any{"impersonationProxy": map[string]any{"mode": mode, "service": map[string]any{"type": "None"}}})
		if p.Ready() == nil {
			t.Errorf("%s: ready before the first look", mode)
		}
		p.sync(context.Background())
		if err := p.Ready(); err != nil {
			t.Errorf("%s: not ready after the first look: %v", mode, err)
		}
	}
}
