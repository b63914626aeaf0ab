package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DexProxy lets a person's browser outside the bed reach its Dex, which listens only inside
// the bed's network namespace: it serves https://localhost:PORT on this machine's loopback
// (localhost is in Dex's certificate) and passes each request to Dex, with connections
// dialled inside the namespace. Dex writes its issuer's address into redirects; those are
// rewritten to the proxy's, so a device login (or any Dex page) can be finished in a
// browser that only reaches this machine, e.g. through `ssh -L PORT:127.0.0.1:PORT`.
type DexProxy struct {
	Listener net.Listener
	Server   *http.Server
	// URL is where a browser on this machine finds Dex: https://localhost:PORT.
	URL string
	ns  *os.File // the bed's network namespace, which dials enter
}

// NewDexProxy listens on listen (a loopback address) for the bed described by cfg.
func NewDexProxy(ctx context.Context, cfg Config, listen string) (*DexProxy, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("--listen %q: must be a loopback address (127.0.0.1:PORT)", listen)
	}
	ns, err := os.Open(cfg.NetNSPath())
	if err != nil {
		return nil, fmt.Errorf("no bed %q is up: %w", cfg.Name, err)
	}
	caPEM, err := os.ReadFile(cfg.TestbedCAFile())
	if err != nil {
		_ = ns.Close()
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(filepath.Join(cfg.PKIDir(), "dex.crt"), filepath.Join(cfg.PKIDir(), "dex.key"))
	if err != nil {
		_ = ns.Close()
		return nil, err
	}
	issuer, err := url.Parse(cfg.DexIssuer())
	if err != nil {
		_ = ns.Close()
		return nil, err
	}
	if net.ParseIP(issuer.Hostname()) == nil {
		// A name would be resolved on another thread, outside the bed's namespace.
		_ = ns.Close()
		return nil, fmt.Errorf("the bed's Dex issuer %s: want an IP address, which the dial inside the bed's namespace needs", cfg.DexIssuer())
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		_ = ns.Close()
		return nil, err
	}
	public := fmt.Sprintf("https://localhost:%d", ln.Addr().(*net.TCPAddr).Port)

	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialIn(ctx, ns, network, addr)
		},
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(issuer)
			r.Out.Host = issuer.Host // Dex answers for its own address
		},
		Transport: transport,
		ModifyResponse: func(resp *http.Response) error {
			loc := resp.Header.Get("Location")
			if rest, ok := strings.CutPrefix(loc, cfg.DexIssuer()); ok && (rest == "" || strings.HasPrefix(rest, "/") || strings.HasPrefix(rest, "?")) {
				resp.Header.Set("Location", public+rest)
			}
			return nil
		},
	}
	srv := &http.Server{
		Handler:           proxy,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	srv.RegisterOnShutdown(transport.CloseIdleConnections)
	return &DexProxy{Listener: ln, Server: srv, URL: public, ns: ns}, nil
}

// Serve serves until ctx ends.
func (p *DexProxy) Serve(ctx context.Context) error {
	defer func() { _ = p.ns.Close() }() // after Shutdown: no dial is running any more
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = p.Server.Shutdown(sctx)
	}()
	if err := p.Server.ServeTLS(p.Listener, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// DialIn dials addr (an IP address and port) from inside the network namespace ns: a socket
// belongs to the namespace of the thread that creates it, so the dial runs on a thread of its
// own that enters ns and is never returned to the runtime (it ends with its goroutine).
func DialIn(ctx context.Context, ns *os.File, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // deliberately never unlocked
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("enter the bed's network namespace: %w", err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		done <- result{c, err}
	}()
	r := <-done
	return r.conn, r.err
}
