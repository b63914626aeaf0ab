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
	"time"

	"golang.org/x/oauth2"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
)

// impersonatorToken is what fakeImpersonatorToken hands out first: the
// impersonation ServiceAccount's token in these tests.
const impersonatorToken = "impersonator-sa"

// fakeImpersonatorToken is the impersonation ServiceAccount's cached token:
// each reset makes the next Token a new one; fail makes Token fail.
type fakeImpersonatorToken struct {
	mu     sync.Mutex
	resets []time.Time
	fail   error
}

func (f *fakeImpersonatorToken) Token() (*oauth2.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	if len(f.resets) == 0 {
		return &oauth2.Token{AccessToken: impersonatorToken}, nil
	}
	return &oauth2.Token{AccessToken: impersonatorToken + "-" + strings.Repeat("x", len(f.resets))}, nil
}

func (f *fakeImpersonatorToken) ResetTokenOlderThan(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resets = append(f.resets, t)
}

func (f *fakeImpersonatorToken) resetCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.resets)
}

// TestImpersonatorToken: each impersonated request carries the
// impersonation ServiceAccount's token and nothing of the client's; a 401
// from the API server (which then took no token of ours) makes the next
// request fetch a new one, as client-go's token transport did; a token
// that cannot be had answers 503 and sends nothing; and the token never
// goes on a request forwarded as the client itself.
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

	before := time.Now()
	if code := status(t, srv.URL+"/refuse", nil); code != http.StatusUnauthorized {
		t.Fatalf("status %d, want the API server's 401", code)
	}
	if src.resetCount() != 1 || src.resets[0].Before(before) {
		t.Fatalf("after a 401 the token source was reset %d times (%v), want once, at or after the request", src.resetCount(), src.resets)
	}
	if code := status(t, srv.URL+"/api", nil); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if got := last().Get("Authorization"); got != "Bearer "+impersonatorToken+"-x" {
		t.Fatalf("after the reset the API server saw %q, want the new token", got)
	}
	if src.resetCount() != 1 {
		t.Fatalf("a 200 reset the token source")
	}

	// Anonymous, forwarded as itself: no token of the agent's.
	if code := status(t, srv.URL+"/api", map[string][]string{"X-Test-Anonymous": {"1"}}); code != http.StatusOK {
		t.Fatalf("anonymous: status %d", code)
	}
	if got := last().Values("Authorization"); len(got) != 0 || last().Get("Impersonate-User") != "" {
		t.Fatalf("an anonymous request reached the API server with Authorization %q, Impersonate-User %q", got, last().Get("Impersonate-User"))
	}

	// No token to be had: a 503 that says to try again, and nothing sent.
	src.mu.Lock()
	src.fail = errors.New("the TokenRequest API is down")
	src.mu.Unlock()
	n := calls()
	resp := get(t, srv.URL+"/api", nil)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "try again") || calls() != n {
		t.Fatalf("without a token: status %d, body %s, upstream calls %d more", resp.StatusCode, body, calls()-n)
	}
	if strings.Contains(string(body), "TokenRequest") {
		t.Fatalf("the client was told the agent's own error: %s", body)
	}
}
