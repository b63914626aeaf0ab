package health

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestHealthListenerBoundsEveryPhase: a client that opens connections and
// sends nothing, or sends slowly, or never closes, cannot hold them.
func TestHealthListenerBoundsEveryPhase(t *testing.T) {
	s := newServer(":0", http.NotFoundHandler())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 {
		t.Fatalf("unbounded: header %v, read %v, write %v, idle %v", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout)
	}
}

// TestEndpoints: /healthz is ok from the start; /readyz only once the
// aggregated API is served, and says what it waits for until then;
// /metrics is the handler given.
func TestEndpoints(t *testing.T) {
	var ready atomic.Bool
	h := handler(func() error {
		if !ready.Load() {
			return errors.New("the aggregated API is not served yet")
		}
		return nil
	}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metric 1\n")) }))
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	for _, c := range []struct {
		path, body string
		code       int
		ready      bool
	}{
		{"/healthz", "ok\n", http.StatusOK, false},
		{"/readyz", "not ready: the aggregated API is not served yet", http.StatusServiceUnavailable, false},
		{"/readyz", "ok\n", http.StatusOK, true},
		{"/metrics", "metric 1\n", http.StatusOK, false},
		{"/debug/pprof/", "404 page not found", http.StatusNotFound, false},
	} {
		ready.Store(c.ready)
		code, body := get(c.path)
		if code != c.code || !strings.HasPrefix(body, c.body) {
			t.Errorf("%s (ready %v): %d %q, want %d %q", c.path, c.ready, code, body, c.code, c.body)
		}
	}
}

// TestServeStopsWithItsContext: the listener is released when the agent
// shuts down, and Serve returns.
func TestServeStopsWithItsContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Serve(ctx, addr, func() error { return nil }, http.NotFoundHandler(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		close(done)
	}()
	var resp *http.Response
	for deadline := time.Now().Add(5 * time.Second); ; {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
		resp, err = http.DefaultClient.Do(req)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("never served: %v", err)
	}
	_ = resp.Body.Close()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}
