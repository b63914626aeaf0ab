package webhook_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/pinniped-kit/pinniped/agent/tokenauth/webhook"
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
