package proxyconfig_test

import (
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxyconfig"
)

func TestResolveModes(t *testing.T) {
	spec := func(mode configv1alpha1.ImpersonationProxyMode) *configv1alpha1.ImpersonationProxySpec {
		return &configv1alpha1.ImpersonationProxySpec{Mode: mode}
	}
	cases := []struct {
		name    string
		spec    *configv1alpha1.ImpersonationProxySpec
		hasCP   bool
		enabled bool
		why     string
	}{
		{"auto on a managed cluster", spec("auto"), false, true, "no node has a control-plane role"},
		{"auto with a control plane", spec("auto"), true, false, "set mode: enabled"},
		{"no spec means auto", nil, false, true, "mode: auto"},
		{"enabled despite a control plane", spec("enabled"), true, true, "mode: enabled"},
		{"disabled", spec("disabled"), false, false, "mode: disabled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := proxyconfig.Resolve(c.spec, c.hasCP)
			if s.Enabled != c.enabled || !strings.Contains(s.Why, c.why) {
				t.Fatalf("got enabled=%v why=%q", s.Enabled, s.Why)
			}
			if s.ServiceType != configv1alpha1.ImpersonationProxyServiceTypeLoadBalancer {
				t.Fatalf("default service type %q", s.ServiceType)
			}
			if s.ServingSecretName() != proxyconfig.GeneratedTLSSecret {
				t.Fatalf("serving secret %q", s.ServingSecretName())
			}
		})
	}
	s := proxyconfig.Resolve(&configv1alpha1.ImpersonationProxySpec{Mode: "enabled",
		TLS: &configv1alpha1.ImpersonationProxyTLSSpec{SecretName: "mine", CertificateAuthorityData: "Q0E="}}, false)
	if s.ServingSecretName() != "mine" || s.AdvertisedCA([]byte("other")) != "Q0E=" {
		t.Fatalf("external TLS: %+v", s)
	}
	s.CAData = ""
	if s.AdvertisedCA([]byte("ca")) != "Y2E=" || s.AdvertisedCA(nil) != "" {
		t.Fatal("advertised CA falls back to ca.crt, then nothing")
	}
}

func lbService(ingress corev1.LoadBalancerIngress, clusterIPs ...string) *corev1.Service {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIPs: clusterIPs}}
	svc.Name = proxyconfig.ServiceName
	if ingress.IP != "" || ingress.Hostname != "" {
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{ingress}
	}
	return svc
}

func TestResolveEndpoint(t *testing.T) {
	lb := proxyconfig.Settings{ServiceType: configv1alpha1.ImpersonationProxyServiceTypeLoadBalancer}
	if _, err := lb.ResolveEndpoint(lbService(corev1.LoadBalancerIngress{}, "10.96.0.9")); err == nil || !strings.Contains(err.Error(), "no load balancer address") {
		t.Fatalf("LB without ingress: %v", err)
	}
	ep, err := lb.ResolveEndpoint(lbService(corev1.LoadBalancerIngress{IP: "10.99.1.1"}, "10.96.0.9"))
	if err != nil || ep.URL != "https://10.99.1.1" || ep.Host != "10.99.1.1" || len(ep.IPs) != 2 || len(ep.DNSNames) != 0 {
		t.Fatalf("LB with IP: %+v %v", ep, err)
	}
	ep, err = lb.ResolveEndpoint(lbService(corev1.LoadBalancerIngress{Hostname: "lb.example.com", IP: "1.2.3.4"}, "10.96.0.9"))
	if err != nil || ep.URL != "https://lb.example.com" || ep.DNSNames[0] != "lb.example.com" {
		t.Fatalf("LB hostname wins: %+v %v", ep, err)
	}
	ep, err = lb.ResolveEndpoint(lbService(corev1.LoadBalancerIngress{IP: "fd00::1"}))
	if err != nil || ep.URL != "https://[fd00::1]" || ep.Host != "fd00::1" {
		t.Fatalf("IPv6: %+v %v", ep, err)
	}

	ext := lb
	ext.ExternalEndpoint = "proxy.example.com:8443"
	ep, err = ext.ResolveEndpoint(lbService(corev1.LoadBalancerIngress{}, "10.96.0.9"))
	if err != nil || ep.URL != "https://proxy.example.com:8443" || ep.Host != "proxy.example.com" {
		t.Fatalf("external endpoint does not wait for the LB: %+v %v", ep, err)
	}

	clusterIP := proxyconfig.Settings{ServiceType: configv1alpha1.ImpersonationProxyServiceTypeClusterIP}
	ep, err = clusterIP.ResolveEndpoint(lbService(corev1.LoadBalancerIngress{}, "10.96.0.9"))
	if err != nil || ep.URL != "https://10.96.0.9" {
		t.Fatalf("ClusterIP: %+v %v", ep, err)
	}

	none := proxyconfig.Settings{ServiceType: configv1alpha1.ImpersonationProxyServiceTypeNone}
	if _, err := none.ResolveEndpoint(nil); err == nil || !strings.Contains(err.Error(), "externalEndpoint") {
		t.Fatalf("None without endpoint: %v", err)
	}
	for _, bad := range []string{"https://x.example.com", "x.example.com/path", ":443"} {
		none.ExternalEndpoint = bad
		if _, err := none.ResolveEndpoint(nil); err == nil {
			t.Errorf("externalEndpoint %q accepted", bad)
		}
	}
	none.ExternalEndpoint = "[fd00::2]:443"
	if ep, err := none.ResolveEndpoint(nil); err != nil || ep.Host != "fd00::2" || !ep.IPs[0].Equal(net.ParseIP("fd00::2")) {
		t.Fatalf("bracketed IPv6 endpoint: %+v %v", ep, err)
	}
}

func TestCovers(t *testing.T) {
	ca, err := certauthority.New("test", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServingCert("proxy", []string{"proxy.example.com"}, []net.IP{net.ParseIP("10.99.1.1")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{"proxy.example.com", "10.99.1.1"} {
		if err := proxyconfig.Covers(leaf.CertPEM, ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	err = proxyconfig.Covers(leaf.CertPEM, "10.99.1.2")
	if err == nil || !strings.Contains(err.Error(), "does not cover 10.99.1.2") || !strings.Contains(err.Error(), "proxy.example.com, 10.99.1.1") {
		t.Fatalf("uncovered host: %v", err)
	}
	if err := proxyconfig.Covers([]byte("junk"), "x"); err == nil {
		t.Fatal("junk accepted")
	}
}
