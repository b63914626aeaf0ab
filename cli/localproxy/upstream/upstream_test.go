package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority/catest"
	"github.com/pinniped-kit/pinniped/cache/credcache"
)

// apiServer is a TLS upstream that, like kube-apiserver, takes a client
// certificate from its CA when one is offered, and reports who it saw.
type apiServer struct {
	*httptest.Server
	ca       *certauthority.CA
	requests atomic.Int64
	// stream, when a request's path is /stream, is written to until closed.
	stream chan string
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	ca, serverTLS := catest.LoopbackServer(t)
	a := &apiServer{ca: ca, stream: make(chan string)}
	a.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.requests.Add(1)
		w.Header().Set("X-Seen", seen(r))
		if r.URL.Path == "/stream" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for line := range a.stream {
				_, _ = io.WriteString(w, line+"\n")
				w.(http.Flusher).Flush()
			}
			return
		}
		_, _ = io.WriteString(w, seen(r))
	}))
	a.EnableHTTP2 = true
	a.TLS = serverTLS
	a.StartTLS()
	t.Cleanup(a.Close)
	return a
}

// seen is who and how the upstream saw a request.
func seen(r *http.Request) string {
	cn := ""
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		cn = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	return fmt.Sprintf("cn=%s auth=%s proto=%s", cn, r.Header.Get("Authorization"), r.Proto)
}

func (a *apiServer) base() *rest.Config {
	return &rest.Config{
		Host:            a.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: a.ca.CertPEM()},
		// Ignored: only the generation's credential is ever sent.
		BearerToken: "kubeconfig-token",
	}
}

func (a *apiServer) certCred(t *testing.T, user string) credcache.Credential {
	t.Helper()
	c, err := a.ca.IssueClientCert(user, "", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return credcache.Credential{ClientCertificateData: string(c.CertPEM), ClientKeyData: string(c.KeyPEM), ExpirationTimestamp: c.NotAfter}
}

func get(t *testing.T, rt http.RoundTripper, u string, h http.Header) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestCertificateGeneration(t *testing.T) {
	api := newAPIServer(t)
	g, err := NewGeneration(api.base(), api.certCred(t, "alice"), 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := get(t, g.RoundTripper(false), api.URL+"/api", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "cn=alice auth= proto=HTTP/2.0"; got != want {
		t.Errorf("ordinary request: upstream saw %q, want %q", got, want)
	}
	got, err = get(t, g.RoundTripper(true), api.URL+"/api", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "cn=alice auth= proto=HTTP/1.1"; got != want {
		t.Errorf("upgrade transport: upstream saw %q, want %q", got, want)
	}
}

func TestTokenGeneration(t *testing.T) {
	api := newAPIServer(t)
	g, err := NewGeneration(api.base(), credcache.Credential{Token: "gen-token"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, upgrade := range []bool{false, true} {
		got, err := get(t, g.RoundTripper(upgrade), api.URL+"/api", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got, "cn= auth=Bearer gen-token ") {
			t.Errorf("upgrade=%v: upstream saw %q, want only the generation's token", upgrade, got)
		}
	}
}

func TestNoCredential(t *testing.T) {
	api := newAPIServer(t)
	if _, err := NewGeneration(api.base(), credcache.Credential{ClientCertificateData: "x"}, 1); !errors.Is(err, ErrNoCredential) {
		t.Errorf("a certificate without a key: got %v, want ErrNoCredential", err)
	}
}

// TestGuardRefusesForeignIdentity: whatever a caller forgot to strip, the
// generation's transport does not send it.
func TestGuardRefusesForeignIdentity(t *testing.T) {
	api := newAPIServer(t)
	certGen, err := NewGeneration(api.base(), api.certCred(t, "alice"), 1)
	if err != nil {
		t.Fatal(err)
	}
	tokenGen, err := NewGeneration(api.base(), credcache.Credential{Token: "gen-token"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []http.Header{
		{"Authorization": {"Bearer someone-else"}},
		{"authorization": {"Bearer someone-else"}},
		{"Impersonate-User": {"root"}},
		{"X-Remote-User": {"root"}},
		{"Sec-Websocket-Protocol": {"v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.eA"}},
	} {
		for _, g := range []*Generation{certGen, tokenGen} {
			for _, upgrade := range []bool{false, true} {
				if _, err := get(t, g.RoundTripper(upgrade), api.URL+"/api", h); !errors.Is(err, ErrIdentityHeader) {
					t.Errorf("%v on generation %d (upgrade %v): got %v, want ErrIdentityHeader", h, g.N, upgrade, err)
				}
			}
		}
	}
	if n := api.requests.Load(); n != 0 {
		t.Errorf("upstream received %d requests, want none", n)
	}
}

// TestAuthorizedRequest: a request that already carries exactly the
// generation's token (Authorize) goes as it is, without a copy; any other
// Authorization beside or instead of it, or on a certificate's generation,
// is refused.
func TestAuthorizedRequest(t *testing.T) {
	api := newAPIServer(t)
	certGen, err := NewGeneration(api.base(), api.certCred(t, "alice"), 1)
	if err != nil {
		t.Fatal(err)
	}
	tokenGen, err := NewGeneration(api.base(), credcache.Credential{Token: "gen-token"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	certGen.Authorize(h)
	if len(h) != 0 {
		t.Fatalf("a certificate's generation set %v", h)
	}
	tokenGen.Authorize(h)
	if !slices.Equal(h["Authorization"], []string{"Bearer gen-token"}) || len(h) != 1 {
		t.Fatalf("Authorize set %v, want only the generation's token", h)
	}
	for _, upgrade := range []bool{false, true} {
		got, err := get(t, tokenGen.RoundTripper(upgrade), api.URL+"/api", h)
		if err != nil {
			t.Fatalf("upgrade=%v: %v", upgrade, err)
		}
		if !strings.HasPrefix(got, "cn= auth=Bearer gen-token ") {
			t.Errorf("upgrade=%v: upstream saw %q, want only the generation's token", upgrade, got)
		}
	}
	// As it is: the transport below gets the very request.
	var sent *http.Request
	g := &guard{authorization: "Bearer gen-token", next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, api.URL+"/api", nil)
	tokenGen.Authorize(req.Header)
	if resp, err := g.RoundTrip(req); err != nil || sent != req {
		t.Fatalf("a request carrying the generation's token was copied or refused (%v)", err)
	} else {
		_ = resp.Body.Close()
	}

	n := api.requests.Load()
	for _, c := range []struct {
		g *Generation
		h http.Header
	}{
		{tokenGen, http.Header{"Authorization": {"Bearer gen-token", "Bearer gen-token"}}},
		{tokenGen, http.Header{"Authorization": {"Bearer gen-token", "Bearer someone-else"}}},
		{tokenGen, http.Header{"Authorization": {"Bearer gen-token"}, "authorization": {"Bearer someone-else"}}},
		{tokenGen, http.Header{"authorization": {"Bearer gen-token"}}},
		{tokenGen, http.Header{"Authorization": {"bearer gen-token"}}},
		{tokenGen, http.Header{"Authorization": {"Bearer gen-token "}}},
		{tokenGen, http.Header{"Authorization": {"Bearer gen-token"}, "Impersonate-User": {"root"}}},
		{tokenGen, http.Header{"Authorization": {"Bearer gen-token"}, "Sec-Websocket-Protocol": {"base64url.bearer.authorization.k8s.io.eA"}}},
		{certGen, http.Header{"Authorization": {"Bearer gen-token"}}},
		{certGen, http.Header{"Authorization": {"Bearer "}}},
	} {
		for _, upgrade := range []bool{false, true} {
			if _, err := get(t, c.g.RoundTripper(upgrade), api.URL+"/api", c.h); !errors.Is(err, ErrIdentityHeader) {
				t.Errorf("%v on generation %d (upgrade %v): got %v, want ErrIdentityHeader", c.h, c.g.N, upgrade, err)
			}
		}
	}
	if got := api.requests.Load(); got != n {
		t.Errorf("upstream received %d refused requests", got-n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestProxyFromConfig: the kubeconfig's proxy-url is honoured.
func TestProxyFromConfig(t *testing.T) {
	api := newAPIServer(t)
	var connects atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		connects.Add(1)
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		down, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			_ = up.Close()
			return
		}
		go func() { _, _ = io.Copy(up, buf); _ = up.Close() }()
		_, _ = io.Copy(down, up)
		_ = down.Close()
	}))
	t.Cleanup(proxy.Close)
	proxyURL, _ := url.Parse(proxy.URL)
	base := api.base()
	base.Proxy = http.ProxyURL(proxyURL)
	g, err := NewGeneration(base, api.certCred(t, "alice"), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, upgrade := range []bool{false, true} {
		if got, err := get(t, g.RoundTripper(upgrade), api.URL+"/api", nil); err != nil || !strings.HasPrefix(got, "cn=alice ") {
			t.Fatalf("through the proxy (upgrade %v): %q, %v", upgrade, got, err)
		}
	}
	if connects.Load() != 2 {
		t.Errorf("the proxy saw %d CONNECTs, want 2 (one per transport)", connects.Load())
	}
}

// TestHolderRetiresOldGeneration: after a swap, the old generation's idle
// connections close, its streaming request keeps flowing, and once that
// ends its last connection closes and it is dropped.
func TestHolderRetiresOldGeneration(t *testing.T) {
	api := newAPIServer(t)
	var h Holder
	h.RetireEvery = 20 * time.Millisecond
	var retired sync.Map
	h.Retired = func(g *Generation) { retired.Store(g.N, true) }
	if h.Load() != nil {
		t.Fatal("a new holder holds a generation")
	}
	gen1, err := NewGeneration(api.base(), api.certCred(t, "gen1"), 1)
	if err != nil {
		t.Fatal(err)
	}
	h.Swap(gen1)

	// An idle HTTP/1.1 connection and an HTTP/2 connection carrying a stream.
	if _, err := get(t, h.Load().RoundTripper(true), api.URL+"/api", nil); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, api.URL+"/stream", nil)
	resp, err := h.Load().RoundTripper(false).RoundTrip(req) //nolint:bodyclose // closed just below; the linter loses it in the reading goroutine
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := gen1.OpenConns(); got != 2 {
		t.Fatalf("gen1 has %d open connections, want 2", got)
	}

	gen2, err := NewGeneration(api.base(), api.certCred(t, "gen2"), 2)
	if err != nil {
		t.Fatal(err)
	}
	h.Swap(gen2)
	if h.Load() != gen2 {
		t.Fatal("Load after Swap is not the new generation")
	}
	if got := gen1.OpenConns(); got != 1 {
		t.Errorf("right after the swap gen1 has %d open connections, want 1 (the stream's)", got)
	}
	got, err := get(t, h.Load().RoundTripper(false), api.URL+"/api", nil)
	if err != nil || !strings.HasPrefix(got, "cn=gen2 ") {
		t.Errorf("a new request after the swap: %q, %v; want gen2's certificate", got, err)
	}

	// The stream outlives several retire passes.
	lines := make(chan string)
	go func() {
		b := make([]byte, 64)
		for {
			n, err := resp.Body.Read(b)
			if err != nil {
				close(lines)
				return
			}
			lines <- string(b[:n])
		}
	}()
	for i := range 5 {
		api.stream <- fmt.Sprint("event ", i)
		if got := <-lines; got != fmt.Sprintf("event %d\n", i) {
			t.Fatalf("stream after the swap: %q", got)
		}
		time.Sleep(30 * time.Millisecond)
	}
	if _, ok := retired.Load(1); ok || gen1.OpenConns() != 1 {
		t.Fatalf("gen1 retired (%v) or its stream's connection closed (%d open) while the stream ran", ok, gen1.OpenConns())
	}
	close(api.stream)
	if _, ok := <-lines; ok {
		t.Fatal("stream did not end")
	}
	deadline := time.Now().Add(5 * time.Second)
	for gen1.OpenConns() != 0 || !isRetired(&retired, 1) {
		if time.Now().After(deadline) {
			t.Fatalf("gen1 still has %d open connections after its stream ended", gen1.OpenConns())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if isRetired(&retired, 2) || gen2.OpenConns() == 0 {
		t.Error("the current generation was retired")
	}
}

func isRetired(m *sync.Map, n int) bool { _, ok := m.Load(n); return ok }
