package profiling

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

func TestCheckAddress(t *testing.T) {
	for addr, ok := range map[string]bool{
		"":                 true,
		"127.0.0.1:6060":   true,
		"127.0.0.2:6060":   true,
		"[::1]:6060":       true,
		"localhost:6060":   true,
		":6060":            false, // every interface
		"0.0.0.0:6060":     false,
		"[::]:6060":        false,
		"10.0.0.1:6060":    false,
		"example.com:6060": false,
		"127.0.0.1":        false,
		"127.0.0.1:":       false,
	} {
		if err := CheckAddress(addr); (err == nil) != ok {
			t.Errorf("CheckAddress(%q) = %v, want ok %v", addr, err, ok)
		}
	}
}

// TestHandlerServesProfilesOnly: the named profiles are there; the command
// line, everything outside /debug/pprof/ and a profile longer than the
// bound are not. The first request turns allocation sampling on.
func TestHandlerServesProfilesOnly(t *testing.T) {
	DisableAllocationSampling()
	h := Handler()
	for path, want := range map[string]int{
		"/debug/pprof/":                    http.StatusOK,
		"/debug/pprof/heap":                http.StatusOK,
		"/debug/pprof/allocs":              http.StatusOK,
		"/debug/pprof/goroutine?debug=1":   http.StatusOK,
		"/debug/pprof/cmdline":             http.StatusNotFound,
		"/debug/pprof/profile?seconds=601": http.StatusBadRequest,
		"/debug/pprof/trace?seconds=1e9":   http.StatusBadRequest,
		"/debug/pprof/allocs?seconds=-1":   http.StatusBadRequest,
		"/debug/pprof/allocs?seconds=x":    http.StatusBadRequest,
		"/debug/pprof/nothing":             http.StatusNotFound,
		"/metrics":                         http.StatusNotFound,
		"/":                                http.StatusNotFound,
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Host = "127.0.0.1:6060"
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
	}
	if runtime.MemProfileRate == 0 {
		t.Error("allocation sampling is still off after the profiles were read")
	}
}

// TestHandlerRefusesWhatCouldSlipPastItsChecks: a POST (pprof reads a
// POST's body for its parameters, past the bound on seconds) and a Host
// that is not loopback (a page in the user's browser whose name was
// pointed at 127.0.0.1).
func TestHandlerRefusesWhatCouldSlipPastItsChecks(t *testing.T) {
	h := Handler()
	for _, c := range []struct {
		method, host, path, body string
		want                     int
	}{
		{http.MethodPost, "127.0.0.1:6060", "/debug/pprof/profile", "seconds=100000", http.StatusMethodNotAllowed},
		{http.MethodPost, "127.0.0.1:6060", "/debug/pprof/profile?seconds=1", "seconds=100000", http.StatusMethodNotAllowed},
		{http.MethodPost, "127.0.0.1:6060", "/debug/pprof/symbol", "0x1", http.StatusMethodNotAllowed},
		{http.MethodGet, "evil.example.com:6060", "/debug/pprof/heap", "", http.StatusForbidden},
		{http.MethodGet, "127.0.0.1.nip.io", "/debug/pprof/heap", "", http.StatusForbidden},
		{http.MethodGet, "localhost:6060", "/debug/pprof/heap", "", http.StatusOK},
		{http.MethodGet, "[::1]:6060", "/debug/pprof/heap", "", http.StatusOK},
		{http.MethodHead, "127.0.0.1", "/debug/pprof/heap", "", http.StatusOK},
	} {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		req.Host = c.host
		if c.body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s %s (Host %s): %d, want %d", c.method, c.path, c.host, rec.Code, c.want)
		}
	}
}

// TestListenRefusesWhatIsNotLoopback, and serves where it is.
func TestListenRefusesWhatIsNotLoopback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Listen(ctx, "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("Listen(0.0.0.0:0) = %v, want a refusal", err)
	}
	for _, addr := range []string{"localhost:0", "[::ffff:127.0.0.1]:0"} {
		ln, err := Listen(ctx, addr)
		if err != nil {
			t.Fatalf("Listen(%s): %v", addr, err)
		}
		_ = ln.Close()
	}
	ln, err := Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		Serve(ctx, Server(Handler()), ln, slog.New(slog.NewTextHandler(io.Discard, nil)))
		close(done)
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+"/debug/pprof/heap", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("heap profile: %d", resp.StatusCode)
	}
	cancel()
	<-done
}
