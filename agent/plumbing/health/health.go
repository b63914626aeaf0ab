// Package health serves the agent's plain-HTTP endpoints for the kubelet
// and for Prometheus: /healthz (the process is up), /readyz (this replica
// can serve an exchange: the aggregated API is served and its
// authenticators are built, so kube-apiserver may route to it) and
// /metrics. It is separate from the aggregated API's TLS listener so that
// probes work before the serving certificate and front-proxy configuration
// exist, which is exactly when the kubelet needs to see progress.
package health

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// Serve serves on addr until ctx ends; ready says why /readyz does not
// answer ok yet (nil: it does). A listener that cannot start is logged, not fatal: the aggregated
// API is what matters to clients, and the failing probes will say so.
func Serve(ctx context.Context, addr string, ready func() error, metrics http.Handler, log *slog.Logger) {
	srv := newServer(addr, handler(ready, metrics))
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("health endpoint stopped", "address", addr, "error", err)
	}
}

func handler(ready func() error, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("/metrics", metrics)
	return mux
}

// newServer bounds every phase of a connection: the endpoint is plain
// HTTP on the pod network, and nothing it serves needs long requests.
func newServer(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: h,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 90 * time.Second}
}
