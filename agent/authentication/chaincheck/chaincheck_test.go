package chaincheck_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/authentication/chaincheck"
)

func TestUntilIsTheChainsEarliestExpiry(t *testing.T) {
	now := time.Now()
	mk := func(serial int64, cn string, ttl time.Duration, ca bool, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Minute), NotAfter: now.Add(ttl), BasicConstraintsValid: true, IsCA: ca}
		if ca {
			tmpl.KeyUsage = x509.KeyUsageCertSign
		} else {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		}
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return c, key
	}
	root, rootKey := mk(1, "root", time.Hour, true, nil, nil)
	mid, midKey := mk(2, "intermediate", 30*time.Second, true, root, rootKey)
	leaf, _ := mk(3, "client", time.Hour, false, mid, midKey)
	roots := x509.NewCertPool()
	roots.AddCert(root)
	opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}

	until, ok := chaincheck.Until([]*x509.Certificate{leaf, mid}, opts, now, time.Minute)
	if !ok || !until.Equal(mid.NotAfter) {
		t.Fatalf("until %v (ok %v), want the intermediate's NotAfter %v", until, ok, mid.NotAfter)
	}
	if until, ok := chaincheck.Until([]*x509.Certificate{leaf, mid}, opts, now, 10*time.Second); !ok || !until.Equal(now.Round(0).Add(10*time.Second)) {
		t.Fatalf("a ttl shorter than every expiry: %v", until)
	}
	if _, ok := chaincheck.Until([]*x509.Certificate{leaf}, opts, now, time.Minute); ok {
		t.Fatal("a chain missing its intermediate verified")
	}
	if chaincheck.Key([]*x509.Certificate{leaf, mid}) == chaincheck.Key([]*x509.Certificate{leaf}) {
		t.Fatal("the key ignores intermediates")
	}
}
