package impersonator_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
)

// impersonatorToken is what fakeImpersonatorToken hands out first: the
// impersonation ServiceAccount's token in these tests.
const impersonatorToken = "impersonator-sa"

// fakeImpersonatorToken is the impersonation ServiceAccount's cached
// token; fail makes Token fail, empty makes it return no token.
type fakeImpersonatorToken struct {
	mu    sync.Mutex
	fail  error
	empty bool
}

func (f *fakeImpersonatorToken) Token() (*oauth2.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.fail != nil:
		return nil, f.fail
	case f.empty:
		return nil, nil
	}
	return &oauth2.Token{AccessToken: impersonatorToken}, nil
}

// TestImpersonatorToken: each impersonated request carries the
// impersonation ServiceAccount's token and nothing of the client's, also
// not a bearer token in a WebSocket subprotocol (the API server would read
// it were ours refused); a token that cannot be had answers 503 with
// Retry-After and sends nothing; and the token never goes on a request
// forwarded as the client itself.
func TestImpersonatorToken(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		if r.URL.Path == "/refuse" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(upSrv.Close)
	last := func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return nil
		}
		return seen[len(seen)-1]
	}
	calls := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	u, _ := url.Parse(upSrv.URL)
	src := &fakeImpersonatorToken{}
	p := &impersonator.Proxy{
		Log:      slog.New(slog.DiscardHandler),
		Upstream: u, Transport: http.DefaultTransport, UpgradeTransport: &http.Transport{}, ImpersonatorToken: src,
		DirectTransport: http.DefaultTransport, DirectUpgradeTransport: &http.Transport{},
		Authn: fixedAuthn{u: &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}}},
		Authz: policy{allow: false},
	}
	p.Init()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)

	// The client's own Authorization, in two lines, is replaced.
	stolen := map[string][]string{"Authorization": {"Bearer stolen", "Bearer stolen-too"}}
	if code := status(t, srv.URL+"/api", stolen); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if got := last().Values("Authorization"); !slices.Equal(got, []string{"Bearer " + impersonatorToken}) {
		t.Fatalf("the API server saw Authorization %q, want only the impersonation ServiceAccount's token", got)
	}

	// A WebSocket upgrade with a bearer subprotocol beside the certificate:
	// refused, whatever the case or the header line.
	for _, protos := range [][]string{
		{"base64url.bearer.authorization.k8s.io.c3RvbGVu"},
		{"v5.channel.k8s.io", "BASE64URL.BEARER.AUTHORIZATION.K8S.IO.c3RvbGVu"},
		{"v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.c3RvbGVu"},
	} {
		n := calls()
		h := map[string][]string{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Protocol": protos}
		if code := status(t, srv.URL+"/api/v1/namespaces/x/pods/y/exec", h); code != http.StatusBadRequest || calls() != n {
			t.Fatalf("%q: status %d, upstream calls %d more, want 400 and none", protos, code, calls()-n)
		}
	}
	// Without a bearer entry the same subprotocols are the client's own.
	if code := status(t, srv.URL+"/api", map[string][]string{"Sec-Websocket-Protocol": {"v5.channel.k8s.io"}}); code != http.StatusOK {
		t.Fatalf("a plain subprotocol: status %d", code)
	}

	// Anonymous, forwarded as itself: no token of the agent's.
	if code := status(t, srv.URL+"/api", map[string][]string{"X-Test-Anonymous": {"1"}}); code != http.StatusOK {
		t.Fatalf("anonymous: status %d", code)
	}
	if got := last().Values("Authorization"); len(got) != 0 || last().Get("Impersonate-User") != "" {
		t.Fatalf("an anonymous request reached the API server with Authorization %q, Impersonate-User %q", got, last().Get("Impersonate-User"))
	}

	// No token to be had: a 503 that says to try again, and nothing sent.
	for _, c := range []struct {
		name  string
		fail  error
		empty bool
	}{{"an error", errors.New("the TokenRequest API is down"), false}, {"no token and no error", nil, true}} {
		src.mu.Lock()
		src.fail, src.empty = c.fail, c.empty
		src.mu.Unlock()
		n := calls()
		resp := get(t, srv.URL+"/api", nil)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "try again") || calls() != n {
			t.Fatalf("%s: status %d, Retry-After %q, body %s, upstream calls %d more", c.name, resp.StatusCode, resp.Header.Get("Retry-After"), body, calls()-n)
		}
		if strings.Contains(string(body), "TokenRequest") {
			t.Fatalf("the client was told the agent's own error: %s", body)
		}
	}
}
