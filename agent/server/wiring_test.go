package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
)

// TestStrategiesInTheOrderClientsPreferThem: the status lists the signing
// key, then the proxy, then the CSR API (get kubeconfig takes the first
// that works), each with its own probe and reasons; the CSR probe, which
// creates a CSR each time, is not repeated while it works.
func TestStrategiesInTheOrderClientsPreferThem(t *testing.T) {
	calls := map[string]int{}
	counting := func(name string) probe {
		return func(context.Context) (*strategy.Working, error) {
			calls[name]++
			return nil, nil
		}
	}
	got := strategies(counting("signing key"), counting("proxy"), counting("csr"))
	want := []struct {
		typ              configv1alpha1.StrategyType
		success, failure configv1alpha1.StrategyReason
		probe            string
	}{
		{configv1alpha1.KubeClusterSigningCertificateStrategyType, configv1alpha1.FetchedKeyStrategyReason, configv1alpha1.CouldNotFetchKeyStrategyReason, "signing key"},
		{configv1alpha1.ImpersonationProxyStrategyType, configv1alpha1.ListeningStrategyReason, configv1alpha1.ErrorDuringSetupStrategyReason, "proxy"},
		{configv1alpha1.CertificateSigningRequestStrategyType, configv1alpha1.SigningRequestsApprovedStrategyReason, configv1alpha1.CouldNotSignRequestsStrategyReason, "csr"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d strategies, want %d", len(got), len(want))
	}
	for i, w := range want {
		p := got[i]
		if p.Type != w.typ || p.Success != w.success || p.Failure != w.failure {
			t.Errorf("strategy %d: %s %s/%s, want %s %s/%s", i, p.Type, p.Success, p.Failure, w.typ, w.success, w.failure)
		}
		for range 2 {
			if _, err := p.Probe(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		wantCalls := 2
		if w.probe == "csr" {
			wantCalls = 1
		}
		if calls[w.probe] != wantCalls {
			t.Errorf("strategy %s: probe %q ran %d times, want %d", p.Type, w.probe, calls[w.probe], wantCalls)
		}
	}
	if !strings.Contains(got[2].Hint, "kube-apiserver-client") {
		t.Errorf("the CSR strategy's hint does not name the signer: %q", got[2].Hint)
	}
}

// TestCSRProbeAsksTheClusterToSign: the probe is a real request for a
// client certificate, for a user that says what it is, and fails as the
// cluster refuses.
func TestCSRProbeAsksTheClusterToSign(t *testing.T) {
	kube := fake.NewClientset()
	var requested *certificatesv1.CertificateSigningRequest
	kube.PrependReactor("create", "certificatesigningrequests", func(a clienttesting.Action) (bool, runtime.Object, error) {
		requested = a.(clienttesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		return true, nil, apierrors.NewForbidden(certificatesv1.Resource("certificatesigningrequests"), "", errors.New("no RBAC"))
	})
	_, err := csrProbe(&clustercred.CSR{Client: kube, TTL: time.Minute, Timeout: time.Second})(context.Background())
	if !apierrors.IsForbidden(err) {
		t.Fatalf("probe error %v, want the cluster's refusal", err)
	}
	if requested == nil || requested.Spec.SignerName != "kubernetes.io/kube-apiserver-client" || !strings.Contains(string(requested.Spec.Request), "CERTIFICATE REQUEST") {
		t.Fatalf("requested %+v", requested)
	}
}

// TestRestConfig: --kubeconfig is used when given and its errors name the
// flag; without it, outside a cluster, the error says to pass it. Run stops
// there, before it serves anything.
func TestRestConfig(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://cluster.example:6443"}}]
users: [{name: u, user: {token: not-a-real-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadRestConfig(path)
	if err != nil || cfg.Host != "https://cluster.example:6443" {
		t.Fatalf("config %+v, %v", cfg, err)
	}
	if _, err := loadRestConfig(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "load --kubeconfig") {
		t.Errorf("a missing kubeconfig: %v", err)
	}
	if _, err := loadRestConfig(""); err == nil || !strings.Contains(err.Error(), "no --kubeconfig given") {
		t.Errorf("outside a cluster: %v", err)
	}
	o := &Options{Kubeconfig: filepath.Join(t.TempDir(), "missing"), HealthListenAddress: "127.0.0.1:0"}
	if err := Run(context.Background(), o, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "load --kubeconfig") {
		t.Errorf("Run with a missing kubeconfig: %v", err)
	}
}
