package impersonator_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
)

func requestWithCert(t *testing.T, c *certauthority.Issued) *http.Request {
	t.Helper()
	pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest(http.MethodGet, "https://proxy/api", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}
	return r
}

func issue(t *testing.T, ca *certauthority.CA, name string) *certauthority.Issued {
	t.Helper()
	c, err := ca.IssueClientCert(name, "", []string{"devs"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The verification cache never outlives trust: once the CAs change, a
// certificate is verified again, and a refusal is never remembered.
func TestCertCacheFollowsTrust(t *testing.T) {
	caA, _ := certauthority.New("A", time.Hour, nil)
	caB, _ := certauthority.New("B", time.Hour, nil)
	cas := &impersonator.ClientCAs{}
	cas.Set(caA.CertPEM())
	authn := impersonator.NewCertAuthenticator(cas)

	fromA := issue(t, caA, "alice")
	for i := range 3 {
		resp, ok, err := authn.AuthenticateRequest(requestWithCert(t, fromA))
		if err != nil || !ok || resp.User.GetName() != "alice" {
			t.Fatalf("request %d: %v %v", i, ok, err)
		}
	}
	cas.Set(caA.CertPEM()) // unchanged: nothing to re-verify, still accepted
	if _, ok, _ := authn.AuthenticateRequest(requestWithCert(t, fromA)); !ok {
		t.Fatal("an unchanged CA set refused a cached certificate")
	}
	cas.Set(caB.CertPEM()) // A is no longer trusted
	if _, ok, _ := authn.AuthenticateRequest(requestWithCert(t, fromA)); ok {
		t.Fatal("a certificate from a CA that is no longer trusted was accepted from the cache")
	}

	fromB := issue(t, caB, "bob")
	cas.Set(caA.CertPEM())
	if _, ok, _ := authn.AuthenticateRequest(requestWithCert(t, fromB)); ok {
		t.Fatal("an untrusted certificate was accepted")
	}
	cas.Set(caA.CertPEM(), caB.CertPEM())
	if resp, ok, _ := authn.AuthenticateRequest(requestWithCert(t, fromB)); !ok || resp.User.GetName() != "bob" {
		t.Fatal("a refusal was remembered after the CA became trusted")
	}
	r, _ := http.NewRequest(http.MethodGet, "https://proxy/api", nil)
	if _, ok, err := authn.AuthenticateRequest(r); ok || err != nil {
		t.Fatalf("no certificate: %v %v", ok, err)
	}
}
