package impersonator_test

import (
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
)

// hopRecorder is an API server over TLS offering HTTP/2, as kube-apiserver
// does, that records how each request arrived; block, when set, holds
// each request until it is closed.
type hopRecorder struct {
	mu    sync.Mutex
	seen  map[string]hopSeen // by request URI
	block chan struct{}
	// arrived counts requests as they arrive, by protocol.
	h1, h2 atomic.Int64
}

type hopSeen struct{ proto, remote string }

func (h *hopRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 2 {
		h.h2.Add(1)
	} else {
		h.h1.Add(1)
	}
	h.mu.Lock()
	h.seen[r.RequestURI] = hopSeen{r.Proto, r.RemoteAddr}
	block := h.block
	h.mu.Unlock()
	if block != nil {
		<-block
	}
	_, _ = io.WriteString(w, "{}")
}

// newHopRecorder is a hopRecorder, its URL and the agent's transports to
// it.
func newHopRecorder(t *testing.T) (*hopRecorder, string, *impersonator.Transports) {
	t.Helper()
	h := &hopRecorder{seen: map[string]hopSeen{}}
	u, tr := shippedTransports(t, h)
	return h, u.String(), tr
}

// get sends GET base+uri through rt, reads and closes the response, and
// returns how the API server saw it arrive.
func (h *hopRecorder) get(rt http.RoundTripper, base, uri string) (hopSeen, error) {
	req, err := http.NewRequest(http.MethodGet, base+uri, nil)
	if err != nil {
		return hopSeen{}, err
	}
	h.mu.Lock()
	delete(h.seen, req.URL.RequestURI())
	h.mu.Unlock()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return hopSeen{}, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.seen[req.URL.RequestURI()]
	if !ok {
		return hopSeen{}, fmt.Errorf("%s never reached the API server as %s", uri, req.URL.RequestURI())
	}
	return s, nil
}

// TestTransportsSplitRequestsFromStreams: reads that end soon go to the
// API server over kept-alive HTTP/1.1 connections; watches, followed logs
// and writes over HTTP/2, for impersonated and direct requests alike,
// which share the connections; upgrades over HTTP/1.1. A parameter counts as the
// API server reads it: its name decoded, its first value a boolean.
func TestTransportsSplitRequestsFromStreams(t *testing.T) {
	h, base, tr := newHopRecorder(t)
	for uri, want := range map[string]string{
		"/api/v1/namespaces":                                "HTTP/1.1",
		"/api/v1/namespaces?limit=500":                      "HTTP/1.1",
		"/api/v1/configmaps?watch=true":                     "HTTP/2.0",
		"/api/v1/configmaps?limit=1&watch=1":                "HTTP/2.0",
		"/api/v1/configmaps?watch=":                         "HTTP/2.0",
		"/api/v1/configmaps?watch=True":                     "HTTP/2.0",
		"/api/v1/configmaps?%77atch=true":                   "HTTP/2.0",
		"/api/v1/configmaps?w%61tch=1&limit=2":              "HTTP/2.0",
		"/api/v1/configmaps?watch=false":                    "HTTP/1.1",
		"/api/v1/configmaps?watch=FALSE":                    "HTTP/1.1",
		"/api/v1/configmaps?watch=0":                        "HTTP/1.1",
		"/api/v1/configmaps?watch=0&watch=1":                "HTTP/1.1",
		"/api/v1/configmaps?allowWatchBookmarks=true":       "HTTP/1.1",
		"/api/v1/watch/namespaces/default/configmaps":       "HTTP/2.0",
		"/api/v1/namespaces/default/pods/p/log?follow=true": "HTTP/2.0",
		"/api/v1/namespaces/default/pods/p/log?fol%6Cow=1":  "HTTP/2.0",
		"/api/v1/namespaces/default/pods/p/log?follow=0":    "HTTP/1.1",
		"/api/v1/namespaces/default/pods/p/log":             "HTTP/1.1",
		"/api/v1/namespaces/default/pods/p/proxy/metrics":   "HTTP/2.0",
		"/api/v1/namespaces/default/services/s:80/proxy":    "HTTP/2.0",
		"/api/v1/nodes/n1/proxy/stats":                      "HTTP/2.0",
		"/debug/pprof/profile?seconds=30":                   "HTTP/2.0",
	} {
		for name, rt := range map[string]http.RoundTripper{"impersonating": tr.Impersonating, "direct": tr.Direct} {
			got, err := h.get(rt, base, uri)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got.proto != want {
				t.Errorf("%s %s went over %s, want %s", name, uri, got.proto, want)
			}
		}
		if got, err := h.get(tr.ImpersonatingUpgrade, base, uri); err != nil || got.proto != "HTTP/1.1" {
			t.Errorf("upgrade transport: %s went over %q (%v)", uri, got.proto, err)
		}
	}
	// Writes, and a read with a body, go over HTTP/2: Go's HTTP/1.1
	// transport would not send them again if the connection closed under
	// them.
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet} {
		for name, rt := range map[string]http.RoundTripper{"impersonating": tr.Impersonating, "direct": tr.Direct} {
			uri := "/api/v1/namespaces/default/configmaps/" + method
			req, _ := http.NewRequest(method, base+uri, strings.NewReader(`{}`))
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			h.mu.Lock()
			got := h.seen[uri]
			h.mu.Unlock()
			if got.proto != "HTTP/2.0" {
				t.Errorf("%s %s with a body went over %q, want HTTP/2.0", name, method, got.proto)
			}
		}
	}
	if got, err := h.get(tr.Impersonating, base, "/api/v1/namespaces?after-writes"); err != nil || got.proto != "HTTP/1.1" {
		t.Errorf("a GET after the writes went over %q (%v)", got.proto, err)
	}
	head, _ := http.NewRequest(http.MethodHead, base+"/api/v1/namespaces?head", nil)
	if resp, err := tr.Impersonating.RoundTrip(head); err != nil {
		t.Fatal(err)
	} else {
		_ = resp.Body.Close()
	}
	h.mu.Lock()
	if got := h.seen["/api/v1/namespaces?head"]; got.proto != "HTTP/1.1" {
		t.Errorf("HEAD went over %q, want HTTP/1.1", got.proto)
	}
	h.mu.Unlock()
	if n := impersonator.InFlight(tr.Impersonating); n != 0 {
		t.Errorf("%d reads still counted in flight after every response was closed", n)
	}
	// One request after another reuses the kept-alive connection, whether
	// impersonated or direct.
	first, err := h.get(tr.Impersonating, base, "/api/v1/namespaces/a")
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []http.RoundTripper{tr.Direct, tr.Impersonating} {
		if got, err := h.get(rt, base, "/api/v1/namespaces/b"); err != nil || got != first {
			t.Errorf("came over %+v (%v), the request before over %+v: the connection was not reused", got, err, first)
		}
	}
}

// TestTransportsBoundTheConnections: no more than client-go's idle pool of
// requests (25) are on HTTP/1.1 at once; the rest go over HTTP/2, so the
// clients cannot make the proxy open a connection per request. A request
// leaves the count when its response is closed.
func TestTransportsBoundTheConnections(t *testing.T) {
	h, base, tr := newHopRecorder(t)
	h.block = make(chan struct{})
	const n = 40
	errs := make(chan error, n)
	for i := range n {
		rt := tr.Impersonating
		if i%2 == 1 {
			rt = tr.Direct
		}
		go func() {
			_, err := h.get(rt, base, fmt.Sprintf("/api/v1/namespaces/n%d", i))
			errs <- err
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.h1.Load()+h.h2.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d and %d of %d requests arrived", h.h1.Load(), h.h2.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got1, got2 := h.h1.Load(), h.h2.Load(); got1 != 25 || got2 != n-25 {
		t.Errorf("%d requests in flight at once: %d arrived over HTTP/1.1 and %d over HTTP/2, want 25 and %d", n, got1, got2, n-25)
	}
	h.mu.Lock()
	close(h.block)
	h.block = nil
	h.mu.Unlock()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Every response closed: none is counted, and the next requests go
	// over HTTP/1.1 again.
	if n := impersonator.InFlight(tr.Impersonating); n != 0 {
		t.Fatalf("%d reads still counted in flight after every response was closed", n)
	}
	for i := range 30 {
		if got, err := h.get(tr.Impersonating, base, fmt.Sprintf("/api/v1/namespaces/after%d", i)); err != nil || got.proto != "HTTP/1.1" {
			t.Fatalf("request %d after the others ended went over %q (%v)", i, got.proto, err)
		}
	}
}

// TestTransportsVerifyTheAPIServer: requests and streams alike trust only
// the configured CA.
func TestTransportsVerifyTheAPIServer(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	up.EnableHTTP2 = true
	up.StartTLS()
	t.Cleanup(up.Close)
	other, err := certauthority.New("some other CA", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ca, trusted := range map[string]bool{string(other.CertPEM()): false,
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw})): true} {
		tr, err := impersonator.NewTransports(&rest.Config{Host: up.URL, TLSClientConfig: rest.TLSClientConfig{CAData: []byte(ca)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, uri := range []string{"/api/v1/namespaces", "/api/v1/namespaces?watch=true"} {
			req, _ := http.NewRequest(http.MethodGet, up.URL+uri, nil)
			resp, err := tr.Impersonating.RoundTrip(req)
			if err == nil {
				_ = resp.Body.Close()
			}
			if got := err == nil; got != trusted {
				t.Errorf("%s with the API server's own CA %v: trusted %v (%v)", uri, trusted, got, err)
			}
		}
	}
}

// TestReadsLeaveTheCountWhenClientsGoAway: a client that hangs up in the
// middle of a response through the proxy does not keep its read counted
// (the reverse proxy closes the response), so clients cannot push reads
// off HTTP/1.1 by leaving.
func TestReadsLeaveTheCountWhenClientsGoAway(t *testing.T) {
	body := strings.Repeat("x", 1<<20)
	u, tr := shippedTransports(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < len(body); i += 1 << 14 {
			if _, err := io.WriteString(w, body[i:i+1<<14]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
	}))
	p := &impersonator.Proxy{Log: slog.New(slog.DiscardHandler), Upstream: u,
		Transport: tr.Impersonating, UpgradeTransport: tr.ImpersonatingUpgrade, ImpersonatorToken: &fakeImpersonatorToken{},
		Authn: fixedAuthn{u: &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}}}, Authz: policy{allow: false}}
	p.Init()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	for i := range 5 {
		resp, err := srv.Client().Get(srv.URL + "/api/v1/configmaps")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(resp.Body, make([]byte, 1<<15)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if n := impersonator.InFlight(tr.Impersonating); n != 1 {
			t.Fatalf("request %d: %d reads counted in the middle of one response, want 1", i, n)
		}
		_ = resp.Body.Close() // hang up with most of it unread
		deadline := time.Now().Add(10 * time.Second)
		for impersonator.InFlight(tr.Impersonating) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("request %d: still counted 10 s after the client went away", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
