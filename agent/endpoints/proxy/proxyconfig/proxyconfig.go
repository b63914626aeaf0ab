// Package proxyconfig turns the CredentialIssuer's spec.impersonationProxy
// into concrete decisions: whether the proxy runs, which Service it needs,
// where clients reach it, which names its serving certificate must cover, and
// which Secret holds that certificate. It is pure: every replica and the
// leader's controller compute the same answer from the same inputs.
package proxyconfig

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
)

// Names of what the agent creates for the proxy in its namespace.
const (
	ServiceName = "pinniped-agent-proxy"
	// GeneratedCASecret holds the CA the agent made for the serving cert.
	GeneratedCASecret = "pinniped-agent-proxy-ca" //nolint:gosec // a Secret name
	// GeneratedTLSSecret holds the serving certificate the agent made.
	GeneratedTLSSecret = "pinniped-agent-proxy-tls" //nolint:gosec // a Secret name
	// SignerSecret holds the CA that signs client certificates valid only at
	// the proxy (TokenCredentialRequest on the proxy issues them).
	SignerSecret = "pinniped-agent-proxy-signer" //nolint:gosec // a Secret name
	// TokenKeySecret holds the keys that sign and verify the proxy's bearer
	// tokens (package tokenkeys). Its UID names the installation in them.
	// A key of its own: one key must not sign two formats.
	TokenKeySecret = "pinniped-agent-proxy-token-keys" //nolint:gosec // a Secret name
	// ContainerPort is where every agent replica serves the proxy.
	ContainerPort = 8444
	// ServicePort is what clients connect to.
	ServicePort = 443
)

// Settings is what the spec means for this cluster.
type Settings struct {
	Enabled bool
	// Why says in words why the proxy is on or off (mode, auto decision).
	Why              string
	ServiceType      configv1alpha1.ImpersonationProxyServiceType
	LoadBalancerIP   string
	Annotations      map[string]string
	ExternalEndpoint string // host[:port], as the admin wrote it
	// TLSSecretName is the admin's kubernetes.io/tls Secret; empty means the
	// agent generates and keeps its own serving certificate.
	TLSSecretName string
	// CAData is spec.tls.certificateAuthorityData (base64 PEM), advertised
	// to clients in preference to the Secret's ca.crt.
	CAData string
}

// Resolve applies the spec. hasControlPlane says whether any node carries a
// control-plane or master role label: in auto mode that means the cluster's
// own signing key is (normally) within reach, so no proxy is needed.
func Resolve(spec *configv1alpha1.ImpersonationProxySpec, hasControlPlane bool) Settings {
	if spec == nil {
		spec = &configv1alpha1.ImpersonationProxySpec{Mode: configv1alpha1.ImpersonationProxyModeAuto}
	}
	s := Settings{
		ServiceType:      spec.Service.Type,
		LoadBalancerIP:   spec.Service.LoadBalancerIP,
		Annotations:      spec.Service.Annotations,
		ExternalEndpoint: strings.TrimSpace(spec.ExternalEndpoint),
	}
	if s.ServiceType == "" {
		s.ServiceType = configv1alpha1.ImpersonationProxyServiceTypeLoadBalancer
	}
	if spec.TLS != nil {
		s.TLSSecretName, s.CAData = spec.TLS.SecretName, spec.TLS.CertificateAuthorityData
	}
	switch spec.Mode {
	case configv1alpha1.ImpersonationProxyModeEnabled:
		s.Enabled, s.Why = true, "the impersonation proxy is enabled (mode: enabled)"
	case configv1alpha1.ImpersonationProxyModeDisabled:
		s.Why = "the impersonation proxy is disabled (mode: disabled)"
	default:
		if hasControlPlane {
			s.Why = "the impersonation proxy is not needed: a node has a control-plane role, so the cluster's signing key should be reachable (mode: auto; set mode: enabled to run it anyway)"
		} else {
			s.Enabled, s.Why = true, "the impersonation proxy is enabled: no node has a control-plane role, as on a managed cluster (mode: auto)"
		}
	}
	return s
}

// ControlPlaneLabelSelectors find nodes with a control-plane role, by the
// labels kubeadm, kind and older installers set.
var ControlPlaneLabelSelectors = []string{
	"node-role.kubernetes.io/control-plane",
	"node-role.kubernetes.io/master",
	"kubernetes.io/node-role in (control-plane,master)",
}

// Endpoint is where clients reach the proxy and what the serving
// certificate must cover.
type Endpoint struct {
	// URL is https://host[:port], advertised in the CredentialIssuer.
	URL string
	// Host is URL's host without port: the name clients verify.
	Host string
	// SANs are every name and address clients may use (the advertised host
	// first, then the Service's ClusterIPs).
	DNSNames []string
	IPs      []net.IP
}

// ErrPending means the endpoint is not known yet (a load balancer without
// an ingress address).
var ErrPending = errors.New("waiting for the load balancer to get an address")

// ResolveEndpoint says where clients reach the proxy. svc is the proxy's
// Service (nil for type None).
func (s *Settings) ResolveEndpoint(svc *corev1.Service) (*Endpoint, error) {
	var e Endpoint
	add := func(host string) {
		if ip := net.ParseIP(host); ip != nil {
			if !slices.ContainsFunc(e.IPs, ip.Equal) {
				e.IPs = append(e.IPs, ip)
			}
			return
		}
		if host != "" && !slices.Contains(e.DNSNames, host) {
			e.DNSNames = append(e.DNSNames, host)
		}
	}
	if s.ExternalEndpoint != "" {
		host, err := endpointHost(s.ExternalEndpoint)
		if err != nil {
			return nil, err
		}
		e.URL, e.Host = "https://"+s.ExternalEndpoint, host
		add(host)
	}
	if svc != nil {
		if s.ServiceType == configv1alpha1.ImpersonationProxyServiceTypeLoadBalancer {
			var ingress string
			for _, in := range svc.Status.LoadBalancer.Ingress {
				if ingress = in.Hostname; ingress == "" {
					ingress = in.IP
				}
				if ingress != "" {
					break
				}
			}
			if ingress == "" && e.URL == "" {
				return nil, fmt.Errorf("the Service %s has no load balancer address yet: %w", svc.Name, ErrPending)
			}
			if ingress != "" {
				if e.URL == "" {
					e.URL, e.Host = "https://"+hostPort(ingress), ingress
				}
				add(ingress)
			}
		}
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, ip := range ips {
			if ip == corev1.ClusterIPNone {
				continue
			}
			if e.URL == "" {
				e.URL, e.Host = "https://"+hostPort(ip), ip
			}
			add(ip)
		}
	}
	if e.URL == "" {
		return nil, errors.New("no endpoint: with service type None, set spec.impersonationProxy.externalEndpoint")
	}
	return &e, nil
}

// hostPort brackets IPv6 addresses for use in a URL.
func hostPort(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		return "[" + host + "]"
	}
	return host
}

func endpointHost(endpoint string) (string, error) {
	if strings.Contains(endpoint, "://") || strings.ContainsAny(endpoint, "/?#") {
		return "", fmt.Errorf("externalEndpoint %q must be host[:port], without a scheme or path", endpoint)
	}
	host := endpoint
	if h, _, err := net.SplitHostPort(endpoint); err == nil {
		host = h
	} else if strings.Count(endpoint, ":") == 1 {
		return "", fmt.Errorf("externalEndpoint %q: %w", endpoint, err)
	}
	host = strings.Trim(host, "[]")
	if host == "" {
		return "", fmt.Errorf("externalEndpoint %q has no host", endpoint)
	}
	return host, nil
}

// Covers reports whether a serving certificate (PEM, leaf first) is valid
// for the endpoint's host; the error says what the certificate covers.
func Covers(certPEM []byte, host string) error {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return errors.New("tls.crt holds no PEM certificate")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("tls.crt: %w", err)
	}
	if err := leaf.VerifyHostname(host); err != nil {
		names := append([]string{}, leaf.DNSNames...)
		for _, ip := range leaf.IPAddresses {
			names = append(names, ip.String())
		}
		covered := "no names"
		if len(names) > 0 {
			covered = strings.Join(names, ", ")
		}
		return fmt.Errorf("the certificate does not cover %s, which clients will connect to (it covers %s)", host, covered)
	}
	return nil
}

// AdvertisedCA is the CA bundle (base64) clients should trust for an
// admin-provided certificate: spec.tls.certificateAuthorityData, else the
// Secret's ca.crt, else nothing (a publicly trusted certificate).
func (s *Settings) AdvertisedCA(secretCACrt []byte) string {
	if s.CAData != "" {
		return s.CAData
	}
	if len(secretCACrt) > 0 {
		return base64.StdEncoding.EncodeToString(secretCACrt)
	}
	return ""
}

// ServingSecretName is the Secret every replica serves from.
func (s *Settings) ServingSecretName() string {
	if s.TLSSecretName != "" {
		return s.TLSSecretName
	}
	return GeneratedTLSSecret
}
