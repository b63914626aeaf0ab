package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
	"github.com/pinniped-kit/pinniped/cli/login/discovery"
)

// serve answers discovery with doc, where "ISSUER" stands for the server's URL.
func serve(t *testing.T, doc map[string]any) (*httptest.Server, string) {
	t.Helper()
	var url string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		b, _ := json.Marshal(doc)
		_, _ = w.Write([]byte(strings.ReplaceAll(string(b), "ISSUER", url)))
	}))
	t.Cleanup(srv.Close)
	url = srv.URL
	return srv, url
}

func good() map[string]any {
	return map[string]any{"issuer": "ISSUER", "authorization_endpoint": "ISSUER/auth", "token_endpoint": "ISSUER/token", "jwks_uri": "ISSUER/keys",
		"device_authorization_endpoint": "ISSUER/device", "scopes_supported": []string{"openid", "groups"}, "response_modes_supported": []string{"query", "form_post"},
		"discovery.supervisor.pinniped.dev/v1alpha1": map[string]any{"pinniped_identity_providers_endpoint": "ISSUER/v1alpha1/pinniped_identity_providers"}}
}

func TestFetch(t *testing.T) {
	srv, issuer := serve(t, good())
	d, err := discovery.Fetch(context.Background(), srv.Client(), issuer)
	if err != nil {
		t.Fatal(err)
	}
	if d.TokenEndpoint != issuer+"/token" || d.DeviceAuthorizationEndpoint == "" || !d.IsSupervisor() || len(d.ScopesSupported) != 2 {
		t.Fatalf("%+v", d)
	}
}

// TestFetchRefuses: a document for another issuer, endpoints that would
// send secrets in clear text, a Supervisor list served from elsewhere.
func TestFetchRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		change func(map[string]any)
		want   string
	}{
		"another issuer":      {func(d map[string]any) { d["issuer"] = "https://elsewhere" }, `calls itself "https://elsewhere", and the issuer must match it exactly: use that issuer (--issuer`},
		"http token endpoint": {func(d map[string]any) { d["token_endpoint"] = "http://x/token" }, `token endpoint "http://x/token"`},
		"http authorization":  {func(d map[string]any) { d["authorization_endpoint"] = "http://x/auth" }, `authorization endpoint "http://x/auth"`},
		"http keys":           {func(d map[string]any) { d["jwks_uri"] = "http://x/keys" }, `jwks_uri "http://x/keys"`},
		"not JSON":            {func(d map[string]any) { d["issuer"] = map[string]any{"x": 1} }, "not a discovery document"},
	} {
		doc := good()
		c.change(doc)
		srv, issuer := serve(t, doc)
		_, err := discovery.Fetch(context.Background(), srv.Client(), issuer)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.HasPrefix(name, "http ") != errors.Is(err, httpsurl.ErrNotHTTPS) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	// Dropped, not fatal: an http device endpoint (no device flow then),
	// and a Supervisor extension pointing away from the issuer.
	doc := good()
	doc["device_authorization_endpoint"] = "http://x/device"
	doc["discovery.supervisor.pinniped.dev/v1alpha1"] = map[string]any{"pinniped_identity_providers_endpoint": "ISSUER.evil.example/idps"}
	srv, issuer := serve(t, doc)
	d, err := discovery.Fetch(context.Background(), srv.Client(), issuer)
	if err != nil || d.DeviceAuthorizationEndpoint != "" || d.IsSupervisor() {
		t.Fatalf("%+v %v", d, err)
	}
	if _, err := discovery.Fetch(context.Background(), srv.Client(), "http://"+strings.TrimPrefix(issuer, "https://")); err == nil {
		t.Fatal("an http issuer was asked")
	}
	// Dot segments climb out of the issuer's path once resolved, also
	// percent-encoded.
	for _, ep := range []string{"ISSUER/../idps", "ISSUER/v1alpha1/%2e%2e/%2E%2E/idps", "ISSUER/./idps"} {
		doc := good()
		doc["discovery.supervisor.pinniped.dev/v1alpha1"] = map[string]any{"pinniped_identity_providers_endpoint": ep}
		srv, issuer := serve(t, doc)
		if d, err := discovery.Fetch(context.Background(), srv.Client(), issuer); err != nil || d.IsSupervisor() {
			t.Errorf("%s: kept as a Supervisor's list (%v)", ep, err)
		}
	}
}

func TestSupportedScopes(t *testing.T) {
	d := &discovery.Document{ScopesSupported: []string{"offline_access", "groups", "email"}}
	kept, dropped := d.SupportedScopes([]string{"offline_access", "openid", "pinniped:request-audience", "username", "groups"})
	// The Supervisor's username scope is asked as the standard one this
	// issuer lists (email; profile it does not list).
	if strings.Join(kept, ",") != "offline_access,openid,groups,email" || strings.Join(dropped, ",") != "pinniped:request-audience,username" {
		t.Fatalf("kept %v, dropped %v", kept, dropped)
	}
	d = &discovery.Document{ScopesSupported: []string{"openid", "email", "profile", "groups"}}
	if kept, _ := d.SupportedScopes([]string{"openid", "email", "username"}); strings.Join(kept, ",") != "openid,email,profile" {
		t.Fatalf("email asked already: %v", kept)
	}
	if kept, _ := d.SupportedScopes([]string{"openid", "groups"}); strings.Join(kept, ",") != "openid,groups" {
		t.Fatalf("no username asked, nothing added: %v", kept)
	}
	if kept, dropped := (&discovery.Document{}).SupportedScopes([]string{"a", "pinniped:request-audience", "b", "username"}); strings.Join(kept, ",") != "a,b" || strings.Join(dropped, ",") != "pinniped:request-audience,username" {
		t.Fatalf("an issuer that lists nothing: %v %v", kept, dropped)
	}
}

// An issuer whose certificate this machine does not trust: the error says
// so and names the flag that fixes it.
func TestFetchUnknownCA(t *testing.T) {
	_, issuer := serve(t, good())
	_, err := discovery.Fetch(context.Background(), &http.Client{}, issuer)
	if err == nil || !strings.Contains(err.Error(), "does not trust") || !strings.Contains(err.Error(), "--ca-bundle") {
		t.Fatalf("got %v", err)
	}
}
