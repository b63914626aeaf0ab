package impersonator_test

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
)

// TestTransportsSplitRequestsFromStreams: requests that end soon go to the
// API server over kept-alive HTTP/1.1 connections, watches and followed
// logs over HTTP/2, for impersonated and direct requests alike; upgrades
// over HTTP/1.1. A parameter counts as the API server reads a boolean.
func TestTransportsSplitRequestsFromStreams(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // request URI → protocol and remote address
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.RequestURI] = r.Proto + " " + r.RemoteAddr
		mu.Unlock()
		_, _ = io.WriteString(w, "{}")
	}))
	up.EnableHTTP2 = true
	up.StartTLS()
	t.Cleanup(up.Close)
	tr, err := impersonator.NewTransports(&rest.Config{Host: up.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw}),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	do := func(rt http.RoundTripper, uri string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, up.URL+uri, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		return seen[req.URL.RequestURI()]
	}
	proto := func(s string) string { return s[:8] }
	for uri, want := range map[string]string{
		"/api/v1/namespaces":                                "HTTP/1.1",
		"/api/v1/namespaces?limit=500":                      "HTTP/1.1",
		"/api/v1/configmaps?watch=true":                     "HTTP/2.0",
		"/api/v1/configmaps?limit=1&watch=1":                "HTTP/2.0",
		"/api/v1/configmaps?watch=":                         "HTTP/2.0",
		"/api/v1/configmaps?watch=True":                     "HTTP/2.0",
		"/api/v1/configmaps?watch=false":                    "HTTP/1.1",
		"/api/v1/configmaps?watch=FALSE":                    "HTTP/1.1",
		"/api/v1/configmaps?watch=0":                        "HTTP/1.1",
		"/api/v1/configmaps?watch=0&watch=1":                "HTTP/1.1",
		"/api/v1/configmaps?allowWatchBookmarks=true":       "HTTP/1.1",
		"/api/v1/watch/namespaces/default/configmaps":       "HTTP/2.0",
		"/api/v1/namespaces/default/pods/p/log?follow=true": "HTTP/2.0",
		"/api/v1/namespaces/default/pods/p/log?follow=0":    "HTTP/1.1",
		"/api/v1/namespaces/default/pods/p/log":             "HTTP/1.1",
	} {
		for name, rt := range map[string]http.RoundTripper{"impersonating": tr.Impersonating, "direct": tr.Direct} {
			if got := proto(do(rt, uri)); got != want {
				t.Errorf("%s %s went over %s, want %s", name, uri, got, want)
			}
		}
		if got := proto(do(tr.ImpersonatingUpgrade, uri)); got != "HTTP/1.1" {
			t.Errorf("upgrade transport: %s went over %s", uri, got)
		}
	}
	// One request after another reuses the kept-alive connection.
	first := do(tr.Impersonating, "/api/v1/namespaces/a")
	for _, uri := range []string{"/api/v1/namespaces/b", "/api/v1/namespaces/c"} {
		if got := do(tr.Impersonating, uri); got != first {
			t.Errorf("%s came over %q, the request before over %q: the connection was not reused", uri, got, first)
		}
	}
}

// TestTransportsVerifyTheAPIServer: the HTTP/1.1 pool, like the HTTP/2
// transport, trusts only the configured CA.
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
