package frontproxy

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/utils/lru"

	"github.com/pinniped-kit/pinniped/agent/certauthority"
)

// fixture is a verifiedProxy whose CA bundle, allowed names and clock the
// test controls, counting how often the chain is really verified.
type fixture struct {
	v        *verifiedProxy
	ca       *certauthority.CA
	bundle   []byte
	names    []string
	now      time.Time
	verifies int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ca, err := certauthority.New("front-proxy-ca", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ca: ca, bundle: ca.CertPEM(), names: []string{"front-proxy-client"}, now: time.Now()}
	f.v = &verifiedProxy{
		verifyOptions: func() (x509.VerifyOptions, bool) {
			f.verifies++
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
	issued, err := ca.IssueClientCert(cn, nil, lifetime)
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
	if u, ok := f.user(good, "bob"); !ok || u != "bob" || f.verifies != 1 {
		t.Fatalf("second request: %q %v after %d verifications, want bob after 1", u, ok, f.verifies)
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
		if _, ok := f.user(good, "alice"); !ok || f.verifies != 2 {
			t.Fatalf("ok=%v after %d verifications, want a fresh verification", ok, f.verifies)
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
		if f.verifies != 2 {
			t.Fatalf("%d verifications, want the expired entry dropped (2)", f.verifies)
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
	if f.verifies != 4 {
		t.Fatalf("%d verifications, want every refusal checked afresh (4)", f.verifies)
	}
}
