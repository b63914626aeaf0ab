package leader_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/leader"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxyconfig"
)

const ns = "pinniped"

type fixture struct {
	t    *testing.T
	kube *fake.Clientset
	spec *configv1alpha1.ImpersonationProxySpec
	c    *leader.Syncer
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, kube: fake.NewClientset(), spec: &configv1alpha1.ImpersonationProxySpec{Mode: "enabled",
		Service: configv1alpha1.ImpersonationProxyServiceSpec{Type: "LoadBalancer", Annotations: map[string]string{"a": "1", "b": "2"}}}}
	f.c = &leader.Syncer{Log: slog.New(slog.DiscardHandler), Now: time.Now, Kube: f.kube, Namespace: ns,
		Settings: func(context.Context) (proxyconfig.Settings, error) { return proxyconfig.Resolve(f.spec, false), nil },
		Labels:   map[string]string{"app.kubernetes.io/part-of": "pinniped"}, Selector: map[string]string{"app": "agent"}}
	return f
}

func (f *fixture) probe() (*strategy.Working, error) {
	return f.c.Sync(context.Background())
}

func (f *fixture) service() *corev1.Service {
	svc, err := f.kube.CoreV1().Services(ns).Get(context.Background(), proxyconfig.ServiceName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("proxy Service: %v", err)
	}
	return svc
}

func (f *fixture) setIngress(ip string) {
	svc := f.service()
	svc.Spec.ClusterIPs = []string{"10.96.0.50"}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	if _, err := f.kube.CoreV1().Services(ns).Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) secret(name string) *corev1.Secret {
	s, err := f.kube.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return s
}

func leafOf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if block == nil {
		t.Fatal("no certificate in Secret")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGeneratedCertificateFollowsTheEndpoint(t *testing.T) {
	f := newFixture(t)
	_, err := f.probe()
	if !errors.Is(err, strategy.ErrPending) || !strings.Contains(err.Error(), "no load balancer address") {
		t.Fatalf("before the LB has an address: %v", err)
	}
	svc := f.service()
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.Selector["app"] != "agent" || svc.Spec.Ports[0].Port != 443 ||
		svc.Spec.Ports[0].TargetPort.IntValue() != proxyconfig.ContainerPort || svc.Labels["app.kubernetes.io/part-of"] != "pinniped" {
		t.Fatalf("Service: %+v", svc)
	}
	if svc.Annotations["a"] != "1" || svc.Annotations["b"] != "2" {
		t.Fatalf("annotations: %v", svc.Annotations)
	}
	if f.secret(proxyconfig.SignerSecret) == nil {
		t.Fatal("the client signer must exist before the proxy is advertised")
	}

	f.setIngress("10.99.1.1")
	w, err := f.probe()
	if err != nil {
		t.Fatal(err)
	}
	info := w.Frontend.ImpersonationProxyInfo
	if w.Frontend.Type != configv1alpha1.ImpersonationProxyFrontendType || info.Endpoint != "https://10.99.1.1" || !strings.Contains(w.Message, "generated") {
		t.Fatalf("working: %+v %+v", w, info)
	}
	tlsSecret := f.secret(proxyconfig.GeneratedTLSSecret)
	caPEM, _ := base64.StdEncoding.DecodeString(info.CertificateAuthorityData)
	if !bytes.Equal(caPEM, tlsSecret.Data["ca.crt"]) {
		t.Fatal("the advertised CA is not the one that signed the serving certificate")
	}
	leaf := leafOf(t, tlsSecret)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, host := range []string{"10.99.1.1", "10.96.0.50"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}

	// Nothing changed: the certificate is kept.
	if _, err := f.probe(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.secret(proxyconfig.GeneratedTLSSecret).Data[corev1.TLSCertKey], tlsSecret.Data[corev1.TLSCertKey]) {
		t.Fatal("an unchanged endpoint must not regenerate the certificate")
	}
	// A new LB address: a new leaf from the same CA.
	f.setIngress("10.99.1.7")
	w, err = f.probe()
	if err != nil || w.Frontend.ImpersonationProxyInfo.Endpoint != "https://10.99.1.7" || w.Frontend.ImpersonationProxyInfo.CertificateAuthorityData != info.CertificateAuthorityData {
		t.Fatalf("after the address changed: %+v %v", w, err)
	}
	if err := leafOf(t, f.secret(proxyconfig.GeneratedTLSSecret)).VerifyHostname("10.99.1.7"); err != nil {
		t.Fatalf("leaf not regenerated for the new address: %v", err)
	}

	// Annotations the admin removes go; ones others added stay.
	svc = f.service()
	svc.Annotations["cloud-controller"] = "x"
	_, _ = f.kube.CoreV1().Services(ns).Update(context.Background(), svc, metav1.UpdateOptions{})
	f.spec.Service.Annotations = map[string]string{"a": "9"}
	if _, err := f.probe(); err != nil {
		t.Fatal(err)
	}
	if a := f.service().Annotations; a["a"] != "9" || a["b"] != "" || a["cloud-controller"] != "x" {
		t.Fatalf("annotations after the spec changed: %v", a)
	}
}

func TestTypeChangesAndDisable(t *testing.T) {
	f := newFixture(t)
	_, _ = f.probe()
	f.spec.Service.Type = "ClusterIP"
	// The fake API server does not allocate ClusterIPs: the endpoint waits
	// for one, and the Service was replaced by a ClusterIP one.
	if _, err := f.probe(); err == nil {
		t.Fatal("a ClusterIP Service without an IP cannot be advertised")
	}
	svc := f.service()
	if svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Fatalf("type %s", svc.Spec.Type)
	}
	svc.Spec.ClusterIPs = []string{"10.96.0.51"}
	_, _ = f.kube.CoreV1().Services(ns).Update(context.Background(), svc, metav1.UpdateOptions{})
	if w, err := f.probe(); err != nil || w.Frontend.ImpersonationProxyInfo.Endpoint != "https://10.96.0.51" {
		t.Fatalf("ClusterIP: %+v %v", w, err)
	}

	f.spec.Service.Type = "None"
	f.spec.ExternalEndpoint = "proxy.example.com"
	if w, err := f.probe(); err != nil || w.Frontend.ImpersonationProxyInfo.Endpoint != "https://proxy.example.com" {
		t.Fatalf("None + external endpoint: %+v %v", w, err)
	}
	if _, err := f.kube.CoreV1().Services(ns).Get(context.Background(), proxyconfig.ServiceName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("type None must remove the Service: %v", err)
	}

	f.spec.Mode = "disabled"
	f.spec.Service.Type = "LoadBalancer"
	_, err := f.probe()
	var re *strategy.ReasonError
	if !errors.As(err, &re) || re.Reason != configv1alpha1.DisabledStrategyReason || !strings.Contains(err.Error(), "disabled") {
		t.Fatalf("disabled: %v", err)
	}
	if f.secret(proxyconfig.GeneratedTLSSecret) != nil {
		t.Fatal("a disabled proxy keeps no serving certificate")
	}
	if f.secret(proxyconfig.GeneratedCASecret) == nil {
		t.Fatal("the generated CA stays, for kubeconfigs that trust it")
	}
}

func TestExternalCertificate(t *testing.T) {
	f := newFixture(t)
	f.spec.Service.Type = "None"
	f.spec.ExternalEndpoint = "proxy.example.com:8443"
	if _, err := f.probe(); err != nil { // generated first
		t.Fatal(err)
	}
	f.spec.TLS = &configv1alpha1.ImpersonationProxyTLSSpec{SecretName: "my-tls"}
	if _, err := f.probe(); err == nil || !strings.Contains(err.Error(), `"my-tls": no such Secret`) {
		t.Fatalf("missing Secret: %v", err)
	}

	ca, _ := certauthority.New("my CA", time.Hour, nil)
	wrong, _ := ca.IssueServingCert("x", []string{"other.example.com"}, []net.IP{net.ParseIP("10.0.0.1")}, time.Hour)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "my-tls", Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: wrong.CertPEM}}
	_, _ = f.kube.CoreV1().Secrets(ns).Create(context.Background(), secret, metav1.CreateOptions{})
	if _, err := f.probe(); err == nil || !strings.Contains(err.Error(), "has no tls.key") {
		t.Fatalf("Secret without a key: %v", err)
	}
	secret.Data[corev1.TLSPrivateKeyKey] = wrong.KeyPEM
	_, _ = f.kube.CoreV1().Secrets(ns).Update(context.Background(), secret, metav1.UpdateOptions{})
	if _, err := f.probe(); err == nil || !strings.Contains(err.Error(), "does not cover proxy.example.com") {
		t.Fatalf("certificate for another name: %v", err)
	}

	right, _ := ca.IssueServingCert("x", []string{"proxy.example.com"}, nil, time.Hour)
	secret.Data = map[string][]byte{corev1.TLSCertKey: right.CertPEM, corev1.TLSPrivateKeyKey: right.KeyPEM, "ca.crt": ca.CertPEM()}
	_, _ = f.kube.CoreV1().Secrets(ns).Update(context.Background(), secret, metav1.UpdateOptions{})
	w, err := f.probe()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := base64.StdEncoding.DecodeString(w.Frontend.ImpersonationProxyInfo.CertificateAuthorityData); !bytes.Equal(got, ca.CertPEM()) {
		t.Fatal("the Secret's ca.crt must be advertised")
	}
	if !strings.Contains(w.Message, "Secret my-tls") {
		t.Fatalf("message: %s", w.Message)
	}
	if f.secret(proxyconfig.GeneratedTLSSecret) != nil {
		t.Fatal("the unused generated certificate must be cleaned up")
	}
	f.spec.TLS.CertificateAuthorityData = "c3BlYw=="
	if w, _ := f.probe(); w.Frontend.ImpersonationProxyInfo.CertificateAuthorityData != "c3BlYw==" {
		t.Fatal("spec.tls.certificateAuthorityData wins over ca.crt")
	}
}
