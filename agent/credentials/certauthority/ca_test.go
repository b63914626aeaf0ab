package certauthority

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"slices"
	"testing"
	"time"

	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
)

var fixedNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func clock() time.Time { return fixedNow }

func parse(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemData)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", pemData)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestIssueClientCert(t *testing.T) {
	ca, err := New("test CA", 24*time.Hour, clock)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ca.IssueClientCert("alice@example.com", "", []string{"devs", "ops"}, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cert := parse(t, got.CertPEM)
	if cert.Subject.CommonName != "alice@example.com" || !sameSet(cert.Subject.Organization, []string{"devs", "ops"}) {
		t.Errorf("subject %v", cert.Subject)
	}
	if !cert.NotBefore.Equal(fixedNow.Add(-Backdate)) || !cert.NotAfter.Equal(fixedNow.Add(5*time.Minute)) || !got.NotAfter.Equal(cert.NotAfter) {
		t.Errorf("validity %v..%v", cert.NotBefore, cert.NotAfter)
	}
	if cert.IsCA || !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("usage: CA=%v ext=%v", cert.IsCA, cert.ExtKeyUsage)
	}
	if cert.SerialNumber.BitLen() < 64 {
		t.Errorf("serial %v has too little entropy", cert.SerialNumber)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: fixedNow, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("issued cert does not verify against its CA: %v", err)
	}
	block, _ := pem.Decode(got.KeyPEM)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("key is not PKCS#8: %v", err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() || !ec.PublicKey.Equal(cert.PublicKey) {
		t.Fatalf("key is not the P-256 key of the certificate")
	}
}

func TestRefusesEmptyUsername(t *testing.T) {
	ca, _ := New("ca", time.Hour, clock)
	if _, err := ca.IssueClientCert("", "", []string{"g"}, time.Minute); err == nil {
		t.Fatal("empty username must be refused")
	}
}

func TestCappedAtCAExpiry(t *testing.T) {
	ca, _ := New("ca", time.Minute, clock)
	got, err := ca.IssueClientCert("bob", "", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !got.NotAfter.Equal(ca.Certificate().NotAfter) {
		t.Fatalf("not capped: %v vs CA %v", got.NotAfter, ca.Certificate().NotAfter)
	}
}

// TestLoadRSAClusterKey mimics the cluster signing key of a kubeadm cluster:
// an RSA CA with a PKCS#1 key.
func TestLoadRSAClusterKey(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: fixedNow.Add(-time.Hour), NotAfter: fixedNow.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})

	ca, err := Load(certPEM, keyPEM, clock)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ca.IssueClientCert("carol", "", []string{"g"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	if _, err := parse(t, got.CertPEM).Verify(x509.VerifyOptions{Roots: roots, CurrentTime: fixedNow, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatal(err)
	}

	other, _ := New("other", time.Hour, clock)
	otherKey, _ := other.KeyPEM()
	if _, err := Load(certPEM, otherKey, clock); err == nil {
		t.Fatal("mismatched key must be refused")
	}
	leaf, _ := other.IssueServingCert("x", []string{"x.svc"}, []net.IP{net.ParseIP("10.0.0.1")}, time.Hour)
	if _, err := Load(leaf.CertPEM, leaf.KeyPEM, clock); err == nil {
		t.Fatal("a non-CA certificate must be refused")
	}
}

func BenchmarkIssueClientCertECDSA(b *testing.B) {
	ca, _ := New("ca", time.Hour, nil)
	groups := []string{"devs", "ops", "system:authenticated"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ca.IssueClientCert("alice@example.com", "", groups, 5*time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// sameSet compares ignoring order: DER sorts the values of the multi-valued
// organization RDN, and Kubernetes treats groups as a set anyway.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// The UID reaches Kubernetes as kube-apiserver's own x509 authenticator
// reads it; without one the subject is what it always was.
func TestClientCertCarriesTheUID(t *testing.T) {
	ca, err := New("test", time.Hour, clock)
	if err != nil {
		t.Fatal(err)
	}
	for uid, wantNames := range map[string]int{"0000-aaaa": 3, "": 2} {
		issued, err := ca.IssueClientCert("alice", uid, []string{"devs"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		cert := parse(t, issued.CertPEM)
		resp, ok, err := x509request.CommonNameUserConversion.User([]*x509.Certificate{cert})
		if err != nil || !ok {
			t.Fatalf("uid %q: %v", uid, err)
		}
		if resp.User.GetName() != "alice" || resp.User.GetUID() != uid || !slices.Equal(resp.User.GetGroups(), []string{"devs"}) {
			t.Errorf("uid %q: Kubernetes reads %+v", uid, resp.User)
		}
		if n := len(cert.Subject.Names); n != wantNames {
			t.Errorf("uid %q: %d subject attributes, want %d", uid, n, wantNames)
		}
	}
}

// TestNameConstraints: a CA made with NameConstraints carries them in a
// critical extension, and a leaf it signs outside them fails verification;
// one made without carries none.
func TestNameConstraints(t *testing.T) {
	_, loopback, _ := net.ParseCIDR("127.0.0.1/32")
	ca, err := New("constrained", time.Hour, nil, NameConstraints([]string{"localhost"}, []*net.IPNet{loopback}))
	if err != nil {
		t.Fatal(err)
	}
	c := ca.Certificate()
	if !c.PermittedDNSDomainsCritical || !slices.Equal(c.PermittedDNSDomains, []string{"localhost"}) ||
		len(c.PermittedIPRanges) != 1 || c.PermittedIPRanges[0].String() != "127.0.0.1/32" {
		t.Fatalf("constraints: critical %v, %v, %v", c.PermittedDNSDomainsCritical, c.PermittedDNSDomains, c.PermittedIPRanges)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	for name, want := range map[string]bool{"localhost": true, "example.com": false} {
		issued, err := ca.IssueServingCert("leaf", []string{name}, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(issued.CertPEM)
		leaf, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); (err == nil) != want {
			t.Errorf("a leaf for %s: %v, want verified %v", name, err, want)
		}
	}

	plain, err := New("plain", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := plain.Certificate(); p.PermittedDNSDomainsCritical || len(p.PermittedDNSDomains)+len(p.PermittedIPRanges) != 0 {
		t.Fatal("a CA made without options is constrained")
	}
}
