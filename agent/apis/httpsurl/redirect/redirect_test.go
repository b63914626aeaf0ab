package redirect_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/url"
	"testing"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl/redirect"
	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl/redirect/redirecttest"
)

func TestCheck(t *testing.T) {
	redirecttest.Check(t, func(ca []byte) (*http.Client, error) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		return &http.Client{
			Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
			CheckRedirect: redirect.Check,
		}, nil
	})
}

// TestOrigin: the origin is scheme, host (in any case) and port (the
// default one spelled or not).
func TestOrigin(t *testing.T) {
	req := func(method, raw string) *http.Request {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Request{Method: method, URL: u}
	}
	from := []*http.Request{req(http.MethodPost, "https://idp.example.com/token")}
	for to, same := range map[string]bool{
		"https://IDP.example.com:443/other": true,
		"https://idp.example.com:8443/":     false,
		"https://evil.example.com/token":    false,
		"https://example.com/token":         false,
	} {
		// A POST redirected by 307/308 stays a POST, by 301/302/303 becomes a
		// GET: either way it began as a POST, and only its origin may see it.
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			err := redirect.Check(req(method, to), from)
			if same != (err == nil) {
				t.Errorf("POST redirected as a %s to %s: err %v, want same origin %v", method, to, err, same)
			}
		}
		if err := redirect.Check(req(http.MethodGet, to), []*http.Request{req(http.MethodGet, "https://idp.example.com/token")}); err != nil {
			t.Errorf("GET to %s: %v", to, err)
		}
	}
	var via []*http.Request
	for range redirect.MaxRedirects {
		via = append(via, req(http.MethodGet, "https://idp.example.com/loop"))
	}
	if err := redirect.Check(req(http.MethodGet, "https://idp.example.com/loop"), via); err == nil {
		t.Error("a redirect loop must stop")
	}
}
