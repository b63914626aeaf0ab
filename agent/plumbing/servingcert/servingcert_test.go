package servingcert

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

func apiService(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiregistration.k8s.io/v1")
	u.SetKind("APIService")
	u.SetName(name)
	return u
}

func newManager(objs ...runtime.Object) *Manager {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{APIServices: "APIServiceList"}, objs...)
	return &Manager{Kube: fake.NewSimpleClientset(), Dynamic: dyn, Namespace: "pinniped", SecretName: "serving",
		ServiceName: "pinniped-api", APIServiceNames: []string{"v1alpha1.a.example", "v1alpha1.b.example"}, Poll: 10 * time.Millisecond}
}

func caBundle(t *testing.T, m *Manager, name string) []byte {
	t.Helper()
	u, err := m.Dynamic.Resource(APIServices).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b64, _, _ := unstructured.NestedString(u.Object, "spec", "caBundle")
	der, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestEnsurePublishesTheCAAndReusesTheSecret(t *testing.T) {
	m := newManager(apiService("v1alpha1.a.example"), apiService("v1alpha1.b.example"))
	ctx := context.Background()
	pair, ca, err := m.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range m.APIServiceNames {
		if got := caBundle(t, m, name); string(got) != string(ca) {
			t.Errorf("%s: caBundle is not the Secret's CA", name)
		}
	}
	block, _ := pem.Decode(ca)
	roots := x509.NewCertPool()
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots.AddCert(caCert)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "pinniped-api.pinniped.svc"}); err != nil {
		t.Errorf("the leaf does not verify against the published CA for the Service's name: %v", err)
	}
	// A second replica gets the same chain.
	_, ca2, err := m.Ensure(ctx)
	if err != nil || string(ca2) != string(ca) {
		t.Fatalf("second Ensure: err %v, same CA %v", err, string(ca2) == string(ca))
	}
}

// A replica may start before the APIServices exist (the Deployment applied
// first); it waits for them instead of exiting.
func TestEnsureWaitsForAPIServicesCreatedLater(t *testing.T) {
	m := newManager()
	go func() {
		time.Sleep(100 * time.Millisecond)
		for _, name := range m.APIServiceNames {
			_, _ = m.Dynamic.Resource(APIServices).Create(context.Background(), apiService(name), metav1.CreateOptions{})
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, ca, err := m.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := caBundle(t, m, "v1alpha1.b.example"); string(got) != string(ca) {
		t.Error("caBundle not published after the APIService appeared")
	}
}

func TestEnsureGivesUpWhenStopped(t *testing.T) {
	m := newManager(apiService("v1alpha1.a.example"))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _, err := m.Ensure(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	if want := "v1alpha1.b.example"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
}

func TestEnsureFailsAtOnceOnOtherErrors(t *testing.T) {
	m := newManager(apiService("v1alpha1.a.example"), apiService("v1alpha1.b.example"))
	patches := 0
	m.Dynamic.(*dynamicfake.FakeDynamicClient).PrependReactor("patch", "apiservices", func(clienttesting.Action) (bool, runtime.Object, error) {
		patches++
		return true, nil, apierrors.NewForbidden(APIServices.GroupResource(), "v1alpha1.a.example", errors.New("no"))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := m.Ensure(ctx); !apierrors.IsForbidden(err) {
		t.Fatalf("err = %v, want Forbidden", err)
	}
	if patches != 1 {
		t.Errorf("%d patches; a Forbidden answer must not be retried", patches)
	}
}
