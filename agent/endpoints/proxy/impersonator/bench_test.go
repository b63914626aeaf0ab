package impersonator_test

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
)

// listBody is about what kube-apiserver answers for a LIST of 50 small
// ConfigMaps (about 18 KB: each item carries its managed fields), more
// than the HTTP/2 server buffers before it must send the response without
// a Content-Length.
var listBody = strings.Repeat(`{"metadata":{"name":"cm-00","namespace":"proxy-load","uid":"6f1c8f6e-2b7d-4a4e-9d51-0c3b6f0f2a11",`+
	`"resourceVersion":"123456","creationTimestamp":"2026-12-07T21:10:17Z","managedFields":[{"manager":"kubectl-create",`+
	`"operation":"Update","apiVersion":"v1","time":"2026-12-07T21:10:17Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:k":{}}}}]},`+
	`"data":{"k":"v"}},`, 50)

// benchBed is an "API server" and the proxy in front of it, both over TLS
// and offering HTTP/2, as in a cluster; the proxy talks to it over
// NewTransports' transports, as the agent does. Clients present a
// certificate.
type benchBed struct {
	direct, viaProxy *http.Client
	// viaProxyToken presents no certificate but a proxy token, as clients
	// of the proxy's own TokenCredentialRequest do.
	viaProxyToken   *http.Client
	upURL, proxyURL string
	// directH1 and viaProxyH1 speak only HTTP/1.1 from the client.
	directH1, viaProxyH1 *http.Client
	// viaH2Upstream is a second proxy whose every request goes upstream
	// over one HTTP/2 connection, as before NewTransports split them.
	viaH2Upstream *http.Client
	h2UpstreamURL string
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
	transports, err := impersonator.NewTransports(&rest.Config{Host: up.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw}),
	}}, &fakeImpersonatorToken{})
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	cas := &impersonator.ClientCAs{}
	cas.Set(ca.CertPEM())
	key, err := proxytoken.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	aud := proxytoken.ForInstall("bench")
	tokens := &impersonator.ProxyTokens{}
	tokens.Set(&proxytoken.KeySet{Signing: key, Verify: map[string]*ecdsa.PublicKey{key.ID: &key.Private.PublicKey}}, aud)
	token, _, _, err := proxytoken.Sign(key, aud, &user.DefaultInfo{Name: "alice", Groups: []string{"developers", "admins"}}, time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	serve := func(p *impersonator.Proxy) *httptest.Server {
		p.Init()
		ps := httptest.NewUnstartedServer(p)
		ps.EnableHTTP2 = true
		ps.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
		ps.StartTLS()
		b.Cleanup(ps.Close)
		return ps
	}
	ps := serve(&impersonator.Proxy{Log: slog.New(slog.DiscardHandler), Upstream: u,
		Transport: transports.Impersonating, UpgradeTransport: transports.ImpersonatingUpgrade, ImpersonatorToken: transports.ImpersonatorToken,
		Authn: impersonator.NewCertAuthenticator(cas), ProxyTokens: tokens, Authz: policy{}})
	ps2 := serve(&impersonator.Proxy{Log: slog.New(slog.DiscardHandler), Upstream: u,
		Transport: upTransport(), UpgradeTransport: transports.ImpersonatingUpgrade, ImpersonatorToken: transports.ImpersonatorToken,
		Authn: impersonator.NewCertAuthenticator(cas), ProxyTokens: tokens, Authz: policy{}})

	clientFor := func(srv *httptest.Server, certs []tls.Certificate, bearer string, h1 bool) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		tr := &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}, ForceAttemptHTTP2: !h1, MaxIdleConnsPerHost: 64,
		}
		if h1 {
			tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		var rt http.RoundTripper = tr
		if bearer != "" {
			rt = bearerTransport{next: rt, header: "Bearer " + bearer}
		}
		return &http.Client{Transport: rt}
	}
	mine := []tls.Certificate{pair}
	return &benchBed{direct: clientFor(up, mine, "", false), viaProxy: clientFor(ps, mine, "", false), viaProxyToken: clientFor(ps, nil, token, false),
		upURL: up.URL, proxyURL: ps.URL,
		directH1: clientFor(up, mine, "", true), viaProxyH1: clientFor(ps, mine, "", true),
		viaH2Upstream: clientFor(ps2, mine, "", false), h2UpstreamURL: ps2.URL}
}

type bearerTransport struct {
	next   http.RoundTripper
	header string
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", t.header)
	return t.next.RoundTrip(r)
}

// cpuTime is this process's user and system CPU time so far: client, proxy
// and upstream all run here, so the proxy rows' excess over the direct row
// is the proxy's CPU per request.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
// the second TLS hop), with a client certificate and with a proxy token
// (which must cost no more); over HTTP/2 from the client and over
// HTTP/1.1 (each against direct over the same protocol); and through a
// proxy that sends everything upstream over HTTP/2, as it did before its
// requests went over HTTP/1.1. Sequential and parallel (throughput)
// variants; each reports the process's CPU per request (cpu-µs/op).
func BenchmarkList(b *testing.B) {
	bed := newBenchBed(b)
	for _, c := range []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"direct", bed.direct, bed.upURL}, {"proxy-certificate", bed.viaProxy, bed.proxyURL}, {"proxy-token", bed.viaProxyToken, bed.proxyURL},
		{"proxy-certificate-h2-upstream", bed.viaH2Upstream, bed.h2UpstreamURL},
		{"h1-client-direct", bed.directH1, bed.upURL}, {"h1-client-proxy-certificate", bed.viaProxyH1, bed.proxyURL},
	} {
		b.Run(c.name+"/sequential", func(b *testing.B) {
			benchGet(b, c.client, c.url+"/api/v1/configmaps") // connect outside the timing
			cpu := cpuTime(b)
			for b.Loop() {
				benchGet(b, c.client, c.url+"/api/v1/configmaps")
			}
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			benchGet(b, c.client, c.url+"/api/v1/configmaps")
			cpu := cpuTime(b)
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					benchGet(b, c.client, c.url+"/api/v1/configmaps")
				}
			})
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
