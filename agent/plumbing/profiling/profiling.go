// Package profiling serves Go's pprof profiles on a loopback address when
// an operator asks for them (the agent's --profiling-listen, off by
// default), so that a benchmark, or a person allowed to port-forward to the
// pod, can see where a replica spends its CPU and memory. Loopback only:
// the profiles name the code's functions and the sizes of what it holds,
// and nothing on the pod network needs them.
package profiling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxSeconds bounds the seconds a caller may ask a CPU profile, a trace or
// a delta profile to run for.
const maxSeconds = 600

// memProfileRate is the Go runtime's default sampling of allocations: one
// sample per 512 KiB allocated.
const memProfileRate = 512 * 1024

// DisableAllocationSampling turns the runtime's allocation sampling off,
// for a process that serves no profiles. Linking net/http/pprof turns it
// on by default (without it the linker switches it off), and it costs a
// profiling table of up to 1.4 MiB that no one would read. Call it first
// thing in main; what package initialisers allocated before is sampled
// still (the agent's Deployment sets GODEBUG=memprofilerate=0, which is
// read before them).
func DisableAllocationSampling() { runtime.MemProfileRate = 0 }

// CheckAddress accepts host:port whose host is a loopback IP address or
// "localhost"; an empty address means profiling is off and is accepted.
func CheckAddress(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if port == "" {
		return fmt.Errorf("%q has no port", addr)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: profiles are served only on 127.0.0.1, ::1 or localhost", addr)
	}
	return nil
}

// Handler serves /debug/pprof/ (the index and every named profile),
// /debug/pprof/profile (CPU), /debug/pprof/trace and /debug/pprof/symbol,
// and nothing else. The command line is left out (the index still lists
// it): it is no profile, and an operator's flags are theirs.
//
// Before anything else it refuses what could read or start a profile
// other than as the operator meant: any method but GET and HEAD, and any
// request with a body (pprof reads its parameters from a body too, even a
// GET's multipart one, where the bound on seconds would not see them); a
// Host that is not a loopback address or localhost (a web page the user
// visits could point a name it controls at 127.0.0.1 and read the profiles:
// DNS rebinding); and a request a browser sent for a web page (an Origin,
// or Sec-Fetch-Site other than none), which could not read the answer but
// could start a ten-minute CPU profile. curl and go tool pprof send
// neither. inner, if not nil, wraps the profiles behind those checks (the
// CLI's same-user check, which costs a scan of the socket tables).
//
// The first profile served turns allocation sampling on, so a process pays
// for it only once someone reads its profiles; an allocation profile
// covers what was allocated from then on.
func Handler(inner func(http.Handler) http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
	var sampling sync.Once
	var profiles http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			sampling.Do(func() { runtime.MemProfileRate = memProfileRate })
		}
		mux.ServeHTTP(w, r)
	})
	if inner != nil {
		profiles = inner(profiles)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
			http.Error(w, "a request for a profile has no body: give its parameters in the URL", http.StatusBadRequest)
			return
		}
		if !loopbackHost(r.Host) {
			http.Error(w, "profiles are served only to requests for 127.0.0.1, ::1 or localhost", http.StatusForbidden)
			return
		}
		if r.Header.Get("Origin") != "" || (r.Header.Get("Sec-Fetch-Site") != "" && r.Header.Get("Sec-Fetch-Site") != "none") {
			http.Error(w, "profiles are not served to web pages", http.StatusForbidden)
			return
		}
		// The URL's query is all pprof may read: set, so it parses nothing.
		r.Form, r.PostForm = r.URL.Query(), url.Values{}
		if s := r.Form.Get("seconds"); s != "" {
			// pprof itself moves the write deadline out by whatever was
			// asked: the bound is here.
			if n, err := strconv.ParseFloat(s, 64); err != nil || !(n > 0 && n <= maxSeconds) {
				http.Error(w, fmt.Sprintf("seconds must be a number above 0 and at most %d", maxSeconds), http.StatusBadRequest)
				return
			}
		}
		profiles.ServeHTTP(w, r)
	})
}

// loopbackHost says whether a Host header names this machine's loopback.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Listen checks addr and listens on it.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	if addr == "" {
		return nil, errors.New("no profiling address")
	}
	if err := CheckAddress(addr); err != nil {
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s for profiles (choose another port, or leave --profiling-listen out): %w", addr, err)
	}
	// "localhost" is checked by what it resolved to, not by its name.
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		_ = ln.Close()
		return nil, fmt.Errorf("%s resolved to %s, which is not a loopback address", addr, ln.Addr())
	}
	return ln, nil
}

// Server is the HTTP server for h (Handler, or Handler behind a caller's
// own checks), its phases bounded.
func Server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second,
		// pprof extends this by the seconds a profile runs for.
		WriteTimeout: 30 * time.Second, IdleTimeout: 90 * time.Second}
}

// Serve serves srv on ln until ctx ends. A failure is logged, not fatal:
// profiles are a diagnostic, never what clients depend on. srv has its own
// handler, never http.DefaultServeMux, where importing net/http/pprof also
// registers the command line.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, log *slog.Logger) {
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("serving Go profiles", "address", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("profiling endpoint stopped", "address", ln.Addr().String(), "error", err)
	}
}
