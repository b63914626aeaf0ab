package profiling

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	mpart "mime/multipart"
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
		"LOCALHOST:6060":   true,
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
	h := Handler(nil)
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

// TestHandlerRefusesWhatCouldSlipPastItsChecks: a POST, or any request
// with a body (pprof reads a body's form values too, past the bound on
// seconds); a Host that is not loopback (a page in the user's browser whose
// name was pointed at 127.0.0.1); a request a browser sent for a web page.
// None of them turns allocation sampling on. The requests' contexts are
// cancelled, so a profile a broken check let through ends at once.
func TestHandlerRefusesWhatCouldSlipPastItsChecks(t *testing.T) {
	DisableAllocationSampling()
	inner := 0
	h := Handler(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inner++; next.ServeHTTP(w, r) })
	})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	var multipart bytes.Buffer
	mw := mpart.NewWriter(&multipart)
	_ = mw.WriteField("seconds", "100000")
	_ = mw.Close()
	type request struct {
		method, host, path, contentType, body string
		header                                map[string]string
		want                                  int
	}
	const form = "application/x-www-form-urlencoded"
	for _, c := range []request{
		{http.MethodPost, "127.0.0.1:6060", "/debug/pprof/profile", form, "seconds=100000", nil, http.StatusMethodNotAllowed},
		{http.MethodPost, "127.0.0.1:6060", "/debug/pprof/profile?seconds=1", form, "seconds=100000", nil, http.StatusMethodNotAllowed},
		{http.MethodPost, "127.0.0.1:6060", "/debug/pprof/symbol", "", "0x1", nil, http.StatusMethodNotAllowed},
		{http.MethodGet, "127.0.0.1:6060", "/debug/pprof/profile", mw.FormDataContentType(), multipart.String(), nil, http.StatusBadRequest},
		{http.MethodGet, "127.0.0.1:6060", "/debug/pprof/trace?seconds=NaN", "", "", nil, http.StatusBadRequest},
		{http.MethodGet, "evil.example.com:6060", "/debug/pprof/heap", "", "", nil, http.StatusForbidden},
		{http.MethodGet, "127.0.0.1.nip.io", "/debug/pprof/heap", "", "", nil, http.StatusForbidden},
		{http.MethodGet, "localhost.evil.example", "/debug/pprof/heap", "", "", nil, http.StatusForbidden},
		{http.MethodGet, "localhost.", "/debug/pprof/heap", "", "", nil, http.StatusForbidden},
		{http.MethodGet, "10.0.0.1:6060", "/debug/pprof/heap", "", "", nil, http.StatusForbidden},
		{http.MethodGet, "", "/debug/pprof/heap", "", "", nil, http.StatusForbidden},
		{http.MethodGet, "127.0.0.1:6061", "/debug/pprof/profile?seconds=600", "", "", map[string]string{"Origin": "https://evil.example.com"}, http.StatusForbidden},
		{http.MethodGet, "127.0.0.1:6061", "/debug/pprof/profile?seconds=600", "", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
	} {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)).WithContext(cancelled)
		req.Host = c.host
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s %s (Host %q, %v): %d, want %d", c.method, c.path, c.host, c.header, rec.Code, c.want)
		}
	}
	if inner != 0 || runtime.MemProfileRate != 0 {
		t.Errorf("refused requests reached the profiles (%d) or turned sampling on (rate %d)", inner, runtime.MemProfileRate)
	}
	for _, c := range []request{
		{http.MethodGet, "LOCALHOST:6060", "/debug/pprof/heap", "", "", nil, http.StatusOK},
		{http.MethodGet, "[::1]:6060", "/debug/pprof/heap", "", "", nil, http.StatusOK},
		{http.MethodHead, "127.0.0.1", "/debug/pprof/heap", "", "", map[string]string{"Sec-Fetch-Site": "none"}, http.StatusOK},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Host = c.host
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s %s (Host %q): %d, want %d", c.method, c.path, c.host, rec.Code, c.want)
		}
	}
	if inner != 3 || runtime.MemProfileRate == 0 {
		t.Errorf("accepted requests: %d reached the profiles, want 3; sampling rate %d", inner, runtime.MemProfileRate)
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
		Serve(ctx, Server(Handler(nil)), ln, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
