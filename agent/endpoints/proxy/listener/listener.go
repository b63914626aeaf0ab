// Package listener runs the impersonation proxy's TLS listener on every
// agent replica: it starts and stops with the CredentialIssuer's spec, swaps
// its serving certificate without a restart (rotation of the admin's Secret),
// keeps idle long-lived streams alive through load balancers, and drains
// in-flight requests (watches, exec sessions) before it stops.
package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Keepalive settings. Cloud load balancers drop connections idle for a few
// minutes (AWS: 350 s for NLB, 60 s by default for CLB); `kubectl logs -f`
// or a quiet exec session is idle for much longer. TCP keepalives and
// HTTP/2 pings keep both the client side and the load balancer's table warm.
const (
	tcpKeepAliveIdle     = 30 * time.Second
	tcpKeepAliveInterval = 15 * time.Second
	h2PingAfter          = 30 * time.Second
	h2PingTimeout        = 15 * time.Second
)

// Server is the proxy's listener. The zero value is not usable: set Addr
// and Handler.
type Server struct {
	Addr    string
	Handler http.Handler
	// Log is required: set once where the server is built.
	Log *slog.Logger
	// Drain is how long Stop lets in-flight requests finish before cutting
	// them; keep it below the pod's termination grace period.
	Drain time.Duration

	cert atomic.Pointer[tls.Certificate]

	mu      sync.Mutex
	running *instance
}

type instance struct {
	srv      *http.Server
	ln       net.Listener
	cancel   context.CancelFunc
	inflight sync.WaitGroup
	served   chan struct{}
}

// SetCertificate replaces the serving certificate; new handshakes use it at
// once, existing connections keep theirs.
func (s *Server) SetCertificate(c *tls.Certificate) { s.cert.Store(c) }

// HasCertificate reports whether a certificate is loaded.
func (s *Server) HasCertificate() bool { return s.cert.Load() != nil }

// Running reports whether the listener is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running != nil
}

// ListenAddr is the running listener's address (useful when Addr asked for
// port 0), or "" when stopped.
func (s *Server) ListenAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		return ""
	}
	return s.running.ln.Addr().String()
}

// Start listens, if not already listening.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running != nil {
		return nil
	}
	lc := net.ListenConfig{KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: tcpKeepAliveIdle, Interval: tcpKeepAliveInterval, Count: 4,
	}}
	ln, err := lc.Listen(context.Background(), "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("impersonation proxy: listen on %s: %w", s.Addr, err)
	}
	base, cancel := context.WithCancel(context.Background())
	in := &instance{ln: ln, cancel: cancel, served: make(chan struct{})}
	in.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in.inflight.Add(1)
			defer in.inflight.Done()
			s.Handler.ServeHTTP(w, r)
		}),
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				if c := s.cert.Load(); c != nil {
					return c, nil
				}
				return nil, errors.New("the impersonation proxy has no serving certificate yet")
			},
			// Client certificates are verified per request against CAs
			// that rotate (the agent's signer, the cluster's client CA);
			// the handshake only asks for one.
			ClientAuth: tls.RequestClientCert,
		},
		HTTP2:             &http.HTTP2Config{SendPingTimeout: h2PingAfter, PingTimeout: h2PingTimeout},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(in.served)
		if err := in.srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.Log.Error("impersonation proxy listener stopped", "error", err)
		}
	}()
	s.running = in
	s.Log.Info("impersonation proxy listening", "address", ln.Addr().String())
	return nil
}

// Stop stops accepting connections, lets in-flight requests finish for up
// to Drain, then cuts what is left (watches never finish by themselves).
func (s *Server) Stop() {
	s.mu.Lock()
	in := s.running
	s.running = nil
	s.mu.Unlock()
	if in == nil {
		return
	}
	drain := s.Drain
	if drain == 0 {
		drain = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	start := time.Now()
	// Shutdown closes the listener and idle connections and waits for
	// requests on the others; upgraded connections (exec, port-forward) are
	// not its business, so wait for their handlers too.
	_ = in.srv.Shutdown(ctx)
	finished := make(chan struct{})
	go func() { in.inflight.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		s.Log.Info("impersonation proxy: cutting requests still running after the drain period", "drain", drain)
	}
	// Cancelling the requests' context ends proxied streams and upgraded
	// connections (the reverse proxy closes both sides).
	in.cancel()
	_ = in.srv.Close()
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
		s.Log.Error("impersonation proxy: some requests did not end after being cut")
	}
	<-in.served
	s.Log.Info("impersonation proxy stopped", "drained", time.Since(start).Round(time.Millisecond))
}
