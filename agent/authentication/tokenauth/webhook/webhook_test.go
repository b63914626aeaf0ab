package webhook_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/webhook"
)

// reviewer is a TokenReview webhook that accepts the token "good" as alice,
// speaking only the API versions it is told to.
type reviewer struct {
	versions []string
	calls    atomic.Int64
}

func (rv *reviewer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rv.calls.Add(1)
	var req struct {
		APIVersion string `json:"apiVersion"`
		Spec       struct {
			Token string `json:"token"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !slices.Contains(rv.versions, req.APIVersion) {
		http.Error(w, "unsupported TokenReview version", http.StatusBadRequest)
		return
	}
	status := map[string]any{"authenticated": false}
	if req.Spec.Token == "good" {
		status = map[string]any{"authenticated": true, "user": map[string]any{"username": "alice", "groups": []string{"devs"}}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": req.APIVersion, "kind": "TokenReview", "status": status})
}

func start(t *testing.T, versions ...string) (*reviewer, webhook.Config) {
	rv := &reviewer{versions: versions}
	srv := httptest.NewTLSServer(rv)
	t.Cleanup(srv.Close)
	return rv, webhook.Config{Endpoint: srv.URL, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
}

func TestVersions(t *testing.T) {
	for name, versions := range map[string][]string{
		"v1":           {"authentication.k8s.io/v1"},
		"v1beta1 only": {"authentication.k8s.io/v1beta1"},
	} {
		t.Run(name, func(t *testing.T) {
			rv, cfg := start(t, versions...)
			a, err := webhook.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			resp, ok, err := a.AuthenticateToken(context.Background(), "good")
			if err != nil || !ok || resp.User.GetName() != "alice" || !slices.Equal(resp.User.GetGroups(), []string{"devs"}) {
				t.Fatalf("good token: ok=%v err=%v resp=%+v", ok, err, resp)
			}
			_, ok, err = a.AuthenticateToken(context.Background(), "bad")
			if ok {
				t.Fatalf("bad token accepted (err %v)", err)
			}
			before := rv.calls.Load()
			if _, ok, _ := a.AuthenticateToken(context.Background(), "good"); !ok {
				t.Fatal("good token refused on the second try")
			}
			if rv.calls.Load() != before {
				t.Error("a recently accepted token should be answered from the short cache")
			}
		})
	}
}

func TestUntrustedCertificateFails(t *testing.T) {
	_, cfg := start(t, "authentication.k8s.io/v1")
	cfg.CABundle = nil
	a, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.AuthenticateToken(context.Background(), "good"); ok || err == nil {
		t.Fatalf("token accepted over an untrusted connection: ok=%v err=%v", ok, err)
	}
}

func TestRefusesHTTP(t *testing.T) {
	if _, err := webhook.New(webhook.Config{Endpoint: "http://example.com/review"}); err == nil {
		t.Fatal("http endpoint accepted")
	}
}

// scripted is a TLS webhook answering each request with the next handler.
func scripted(t *testing.T, handlers ...http.HandlerFunc) (*atomic.Int64, webhook.Config) {
	var calls atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1)) - 1
		handlers[min(n, len(handlers)-1)](w, r)
	}))
	t.Cleanup(srv.Close)
	return &calls, webhook.Config{Endpoint: srv.URL, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
}

func answer(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

func TestUserFields(t *testing.T) {
	_, cfg := scripted(t, answer(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":true,
		"user":{"username":"bob","uid":"42","groups":["a","b"],"extra":{"scopes":["x","y"]}}}}`))
	a, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, ok, err := a.AuthenticateToken(context.Background(), "t")
	if err != nil || !ok {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	u := resp.User
	if u.GetName() != "bob" || u.GetUID() != "42" || !slices.Equal(u.GetGroups(), []string{"a", "b"}) || !slices.Equal(u.GetExtra()["scopes"], []string{"x", "y"}) {
		t.Errorf("user %+v", u)
	}
}

func TestRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		handler http.HandlerFunc
		wantErr string
	}{
		"not authenticated": {answer(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":false}}`), ""},
		"webhook error":     {answer(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":false,"error":"token of carol revoked"}}`), "the webhook refused the token"},
		"no username":       {answer(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":true,"user":{}}}`), "named no user"},
		"not JSON":          {answer(`<html>`), "not a TokenReview"},
		"forbidden":         {func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }, "HTTP 403"},
		"redirect not followed": {func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://127.0.0.1:1/steal", http.StatusTemporaryRedirect)
		}, "HTTP 307"},
		"huge answer": {func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"error":"`))
			_, _ = w.Write(make([]byte, 2<<20))
		}, "larger than"},
	} {
		t.Run(name, func(t *testing.T) {
			_, cfg := scripted(t, tc.handler)
			a, err := webhook.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, ok, err := a.AuthenticateToken(context.Background(), "t")
			if ok {
				t.Fatal("token accepted")
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err %v, want %q", err, tc.wantErr)
			}
			// The webhook's own words may name the person: only in the
			// error's detail, never in its message.
			var refused *tokenauth.RefusedError
			if err != nil && (strings.Contains(err.Error(), "carol") || errors.As(err, &refused) && refused.Detail != "token of carol revoked") {
				t.Errorf("err %v: the webhook's words in the message, or lost", err)
			}
		})
	}
}

func TestRetriesOnceAfterServerError(t *testing.T) {
	good := answer(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":true,"user":{"username":"alice"}}}`)
	unavailable := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }
	calls, cfg := scripted(t, unavailable, good)
	a, _ := webhook.New(cfg)
	if _, ok, err := a.AuthenticateToken(context.Background(), "t"); !ok || err != nil || calls.Load() != 2 {
		t.Fatalf("ok=%v err=%v calls=%d", ok, err, calls.Load())
	}
	calls, cfg = scripted(t, unavailable)
	a, _ = webhook.New(cfg)
	if _, ok, err := a.AuthenticateToken(context.Background(), "t"); ok || err == nil || calls.Load() != 2 {
		t.Fatalf("always unavailable: ok=%v err=%v calls=%d (want one retry)", ok, err, calls.Load())
	}
}

// A webhook that answers v1 requests with a v1beta1 TokenReview is treated
// as a v1beta1 webhook: asked again in v1beta1, and from then on only so.
func TestAnswerInAnotherVersion(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	_, cfg := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			APIVersion string `json:"apiVersion"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		asked = append(asked, req.APIVersion)
		mu.Unlock()
		answer(`{"apiVersion":"authentication.k8s.io/v1beta1","kind":"TokenReview","status":{"authenticated":true,"user":{"username":"alice"}}}`)(w, r)
	})
	a, _ := webhook.New(cfg)
	resp, ok, err := a.AuthenticateToken(context.Background(), "t")
	if !ok || err != nil || resp.User.GetName() != "alice" {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	if _, ok, _ := a.AuthenticateToken(context.Background(), "another"); !ok {
		t.Fatal("second token refused")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"authentication.k8s.io/v1", "authentication.k8s.io/v1beta1", "authentication.k8s.io/v1beta1"}; !slices.Equal(asked, want) {
		t.Errorf("asked in %q, want %q", asked, want)
	}
}

// Webhooks may answer without apiVersion and kind.
func TestAnswerWithoutTypeMeta(t *testing.T) {
	calls, cfg := scripted(t, answer(`{"status":{"authenticated":true,"user":{"username":"alice"}}}`))
	a, _ := webhook.New(cfg)
	if resp, ok, err := a.AuthenticateToken(context.Background(), "t"); !ok || err != nil || resp.User.GetName() != "alice" || calls.Load() != 1 {
		t.Fatalf("ok=%v err=%v calls=%d", ok, err, calls.Load())
	}
}

// Errors are logged by the exchange handler: they must not carry the
// credentials or query an endpoint URL may contain.
func TestErrorsDoNotRepeatEndpointSecrets(t *testing.T) {
	calls, cfg := scripted(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) })
	cfg.Endpoint = strings.Replace(cfg.Endpoint, "https://", "https://user:hunter2@", 1) + "/review?key=sesame"
	a, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = a.AuthenticateToken(context.Background(), "t")
	if err == nil || calls.Load() != 1 || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "sesame") || !strings.Contains(err.Error(), "/review") {
		t.Fatalf("err %v", err)
	}
	// And when the connection itself fails (url.Error names the URL).
	cfg.Endpoint = "https://user:hunter2@127.0.0.1:1/review?key=sesame"
	a, _ = webhook.New(cfg)
	_, _, err = a.AuthenticateToken(context.Background(), "t")
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "sesame") {
		t.Fatalf("err %v", err)
	}
}

// An untrusted certificate is not worth a retry.
func TestNoRetryForUntrustedCertificate(t *testing.T) {
	calls, cfg := scripted(t, answer(`{}`))
	cfg.CABundle = nil
	a, _ := webhook.New(cfg)
	start := time.Now()
	if _, ok, err := a.AuthenticateToken(context.Background(), "t"); ok || err == nil {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	if calls.Load() != 0 || time.Since(start) > 150*time.Millisecond {
		t.Errorf("calls=%d after %v: retried", calls.Load(), time.Since(start))
	}
}

func TestCloseIdleConnections(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(answer(`{"status":{"authenticated":true,"user":{"username":"alice"}}}`))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			conns.Add(-1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	a, _ := webhook.New(webhook.Config{Endpoint: srv.URL, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})})
	if _, ok, err := a.AuthenticateToken(context.Background(), "t"); !ok || err != nil {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	if conns.Load() != 1 {
		t.Fatalf("%d open connections, want the kept-alive one", conns.Load())
	}
	a.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for conns.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if conns.Load() != 0 {
		t.Errorf("%d connections still open", conns.Load())
	}
}
