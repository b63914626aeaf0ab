package requestheader

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/utils/lru"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
)

// fixture is a verifiedProxy whose CA bundle, allowed names and clock the
// test controls, counting how often the chain is really verified (each
// verification asks for the options twice: the library's check, then the
// chain's expiry).
type fixture struct {
	v      *verifiedProxy
	ca     *certauthority.CA
	bundle []byte
	names  []string
	now    time.Time
	calls  int
}

func (f *fixture) verifications() int { return f.calls / 2 }

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ca, err := certauthority.New("front-proxy-ca", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ca: ca, bundle: ca.CertPEM(), names: []string{"front-proxy-client"}, now: time.Now()}
	f.v = &verifiedProxy{
		verifyOptions: func() (x509.VerifyOptions, bool) {
			f.calls++
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(f.bundle)
			return x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, true
		},
		caBundle:     func() []byte { return f.bundle },
		allowedNames: func() []string { return f.names },
		headers: headerrequest.NewDynamic(headerrequest.StaticStringSlice{"X-Remote-User"}, headerrequest.StaticStringSlice{},
			headerrequest.StaticStringSlice{"X-Remote-Group"}, headerrequest.StaticStringSlice{"X-Remote-Extra-"}),
		now: func() time.Time { return f.now },
		lru: lru.New(verifiedCacheSize),
	}
	return f
}

func (f *fixture) cert(t *testing.T, ca *certauthority.CA, cn string, ttl ...time.Duration) *x509.Certificate {
	t.Helper()
	lifetime := time.Hour
	if len(ttl) > 0 {
		lifetime = ttl[0]
	}
	issued, err := ca.IssueClientCert(cn, "", nil, lifetime)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// user authenticates one request carrying cert and X-Remote-User: user.
func (f *fixture) user(cert *x509.Certificate, user string) (string, bool) {
	r, _ := http.NewRequest(http.MethodGet, "https://agent/", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	r.Header.Set("X-Remote-User", user)
	resp, ok, err := f.v.AuthenticateRequest(r)
	if err != nil || !ok {
		return "", false
	}
	if r.Header.Get("X-Remote-User") != "" {
		return "headers not consumed", true
	}
	return resp.User.GetName(), true
}

func TestVerifiedProxyReusesOnlyTheVerdict(t *testing.T) {
	f := newFixture(t)
	good := f.cert(t, f.ca, "front-proxy-client")
	if u, ok := f.user(good, "alice"); !ok || u != "alice" {
		t.Fatalf("first request: %q %v", u, ok)
	}
	// The same certificate again: not verified again, and the user is
	// this request's, not the cached one's.
	if u, ok := f.user(good, "bob"); !ok || u != "bob" || f.verifications() != 1 {
		t.Fatalf("second request: %q %v after %d verifications, want bob after 1", u, ok, f.verifications())
	}
	// No X-Remote-User: not authenticated, cached verdict or not.
	if _, ok := f.user(good, ""); ok {
		t.Fatal("a request without a username header authenticated")
	}
}

func TestVerifiedProxyForgetsOnChange(t *testing.T) {
	other, err := certauthority.New("other", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(f *fixture){
		"CA rotated away":     func(f *fixture) { f.bundle = other.CertPEM() },
		"allowed names moved": func(f *fixture) { f.names = []string{"someone-else"} },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			good := f.cert(t, f.ca, "front-proxy-client")
			if _, ok := f.user(good, "alice"); !ok {
				t.Fatal("first request refused")
			}
			change(f)
			if u, ok := f.user(good, "alice"); ok {
				t.Fatalf("accepted as %q after the change", u)
			}
		})
	}
	t.Run("a minute passed", func(t *testing.T) {
		f := newFixture(t)
		good := f.cert(t, f.ca, "front-proxy-client")
		f.user(good, "alice")
		f.now = f.now.Add(verifiedCacheTTL + time.Second)
		if _, ok := f.user(good, "alice"); !ok || f.verifications() != 2 {
			t.Fatalf("ok=%v after %d verifications, want a fresh verification", ok, f.verifications())
		}
	})
	t.Run("certificate expired", func(t *testing.T) {
		f := newFixture(t)
		good := f.cert(t, f.ca, "front-proxy-client", 30*time.Second)
		f.user(good, "alice")
		// Before the cache's minute is up, but past NotAfter: verified
		// again (by the library, against the real clock).
		f.now = good.NotAfter.Add(time.Second)
		f.user(good, "alice")
		if f.verifications() != 2 {
			t.Fatalf("%d verifications, want the expired entry dropped (2)", f.verifications())
		}
	})
}

func TestVerifiedProxyNeverCachesRefusals(t *testing.T) {
	f := newFixture(t)
	other, _ := certauthority.New("other", time.Hour, nil)
	wrongCA := f.cert(t, other, "front-proxy-client")
	wrongName := f.cert(t, f.ca, "someone-else")
	for range 2 {
		for _, c := range []*x509.Certificate{wrongCA, wrongName} {
			if u, ok := f.user(c, "alice"); ok {
				t.Fatalf("accepted %s as %q", c.Subject.CommonName, u)
			}
		}
	}
	if f.calls != 4 {
		t.Fatalf("%d verifications, want every refusal checked afresh (4)", f.calls)
	}
}

// A verdict ends when any certificate of the chain expires, not only the
// client's: here an intermediate CA lives 30 s.
func TestVerifiedProxyHonoursTheChainsExpiry(t *testing.T) {
	now := time.Now()
	mk := func(tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c, key
	}
	ca := func(serial int64, cn string, ttl time.Duration) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, NotBefore: now.Add(-time.Minute),
			NotAfter: now.Add(ttl), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	root, rootKey := mk(ca(1, "root", time.Hour), nil, nil)
	mid, midKey := mk(ca(2, "intermediate", 30*time.Second), root, rootKey)
	leaf, _ := mk(&x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "front-proxy-client"}, NotBefore: now.Add(-time.Minute),
		NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, mid, midKey)

	f := newFixture(t)
	f.bundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})
	f.now = now
	authenticate := func() bool {
		r, _ := http.NewRequest(http.MethodGet, "https://agent/", nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf, mid}}
		r.Header.Set("X-Remote-User", "alice")
		_, ok, _ := f.v.AuthenticateRequest(r)
		return ok
	}
	first, second := authenticate(), authenticate()
	if !first || !second || f.verifications() != 1 {
		t.Fatalf("a chain through an intermediate: %d verifications for two requests, want 1", f.verifications())
	}
	f.now = mid.NotAfter.Add(time.Second) // within the minute, past the intermediate
	authenticate()
	if f.verifications() != 2 {
		t.Fatalf("%d verifications: the verdict outlived the intermediate CA", f.verifications())
	}
}
