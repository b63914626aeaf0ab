package impersonator_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
)

// TestOriginalUserKeyFollowsTheSuffix: under an API group suffix the real
// user of a nested impersonation is recorded, and reserved, under the
// suffixed key, as upstream's Concierge does.
func TestOriginalUserKeyFollowsTheSuffix(t *testing.T) {
	if impersonator.OriginalUserExtra != groupsuffix.OriginalUserExtra("") {
		t.Fatalf("the default key %s is not the rule's %s", impersonator.OriginalUserExtra, groupsuffix.OriginalUserExtra(""))
	}
	up := &upstream{}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	u, _ := url.Parse(upSrv.URL)
	p := &impersonator.Proxy{
		Log:      slog.New(slog.DiscardHandler),
		Upstream: u, Transport: http.DefaultTransport, UpgradeTransport: &http.Transport{},
		Authn:           fixedAuthn{u: &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}}},
		Authz:           policy{allow: true},
		OriginalUserKey: groupsuffix.OriginalUserExtra("tuna.io"),
	}
	p.Init()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)

	if code := status(t, srv.URL+"/api", map[string][]string{"Impersonate-User": {"bob"}}); code != 200 {
		t.Fatalf("status %d", code)
	}
	h := *up.last.Load()
	var original map[string]any
	if err := json.Unmarshal([]byte(h.Get("Impersonate-Extra-Original-User-Info.impersonation-Proxy.concierge.tuna.io")), &original); err != nil || original["username"] != "alice" {
		t.Fatalf("original user not recorded under the suffixed key: %v (%v)", h, err)
	}
	if v := h.Values("Impersonate-Extra-Original-User-Info.impersonation-Proxy.concierge.pinniped.dev"); len(v) > 0 {
		t.Fatalf("recorded under the default key too: %v", h)
	}
	reserved := map[string][]string{"Impersonate-User": {"bob"}, "Impersonate-Extra-Original-User-Info.impersonation-Proxy.concierge.tuna.io": {"{}"}}
	if code := status(t, srv.URL+"/api", reserved); code != http.StatusForbidden {
		t.Errorf("a client setting the suffixed key: status %d, want 403", code)
	}
	// Nor another install's key: audit tooling of the default install
	// reads that one.
	other := map[string][]string{"Impersonate-User": {"bob"}, "Impersonate-Extra-Original-User-Info.impersonation-Proxy.concierge.pinniped.dev": {"{}"}}
	if code := status(t, srv.URL+"/api", other); code != http.StatusForbidden {
		t.Errorf("a client setting the default install's key: status %d, want 403", code)
	}
}
