package impersonator_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/certauthority"
	"github.com/pinniped-kit/pinniped/agent/proxy/impersonator"
)

// listBody is about the size of a small Kubernetes list response.
var listBody = strings.Repeat(`{"metadata":{"name":"cm-00","namespace":"proxy-load"},"data":{"k":"v"}},`, 50)

// benchBed is an "API server" and the proxy in front of it, both over TLS
// with HTTP/2, as in a cluster; clients present a certificate.
type benchBed struct {
	direct, viaProxy *http.Client
	upURL, proxyURL  string
}

func newBenchBed(b *testing.B) *benchBed {
	b.Helper()
	ca, err := certauthority.New("bench", time.Hour, nil)
	if err != nil {
		b.Fatal(err)
	}
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Impersonate-User") == "" && (r.TLS == nil || len(r.TLS.PeerCertificates) == 0) {
			http.Error(w, "who?", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ConfigMapList","items":[`+listBody+`{}]}`)
	}))
	up.EnableHTTP2 = true
	up.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	up.StartTLS()
	b.Cleanup(up.Close)

	client, err := ca.IssueClientCert("alice", "", []string{"developers", "admins"}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	pair, _ := tls.X509KeyPair(client.CertPEM, client.KeyPEM)

	upPool := x509.NewCertPool()
	upPool.AddCert(up.Certificate())
	upTransport := func() *http.Transport {
		return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: upPool}, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 64}
	}
	u, _ := url.Parse(up.URL)
	cas := &impersonator.ClientCAs{}
	cas.Set(ca.CertPEM())
	p := &impersonator.Proxy{Upstream: u, Transport: upTransport(), UpgradeTransport: upTransport(),
		Authn: impersonator.NewCertAuthenticator(cas), Authz: policy{}}
	p.Init()
	ps := httptest.NewUnstartedServer(p)
	ps.EnableHTTP2 = true
	ps.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	ps.StartTLS()
	b.Cleanup(ps.Close)

	clientFor := func(srv *httptest.Server) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		return &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 64,
		}}
	}
	return &benchBed{direct: clientFor(up), viaProxy: clientFor(ps), upURL: up.URL, proxyURL: ps.URL}
}

func benchGet(b *testing.B, c *http.Client, url string) {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("HTTP %d", resp.StatusCode)
	}
}

// BenchmarkList compares a LIST-sized GET straight to the upstream with the
// same request through the proxy, in the same process and run: the
// difference is the proxy's own cost (authentication, header rewriting,
// the second TLS hop). Sequential and parallel (throughput) variants.
func BenchmarkList(b *testing.B) {
	bed := newBenchBed(b)
	for _, c := range []struct {
		name   string
		client *http.Client
		url    string
	}{{"direct", bed.direct, bed.upURL}, {"proxy", bed.viaProxy, bed.proxyURL}} {
		b.Run(c.name+"/sequential", func(b *testing.B) {
			for b.Loop() {
				benchGet(b, c.client, c.url+"/api/v1/configmaps")
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					benchGet(b, c.client, c.url+"/api/v1/configmaps")
				}
			})
		})
	}
}
