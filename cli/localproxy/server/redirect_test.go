package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/localproxy/server"
	"github.com/pinniped-kit/pinniped/cli/localproxy/upstream"
)

// secretEveryRequest sets the local secret on every request, redirects
// included, as client-go's exec credential round tripper does.
type secretEveryRequest struct{ next http.RoundTripper }

func (s secretEveryRequest) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+secret)
	return s.next.RoundTrip(r)
}

// TestRedirectStaysInItsContext: every context shares the proxy's origin
// and secret, and clients follow redirects, so an API server's Location
// must not lead the client to another context (where the proxy would add
// that context's credential) or out of the proxy (where the client would
// send the local secret).
func TestRedirectStaysInItsContext(t *testing.T) {
	apiA, apiB := newAPIServer(t), newAPIServer(t)
	ua, err := url.Parse(apiA.URL + "/base")
	if err != nil {
		t.Fatal(err)
	}
	ub, err := url.Parse(apiB.URL)
	if err != nil {
		t.Fatal(err)
	}
	ha, hb := &upstream.Holder{}, &upstream.Holder{}
	ha.Swap(apiA.certGen(t, "alice-a", 1))
	hb.Swap(apiB.certGen(t, "alice-b", 1))
	h := server.New([]byte(secret), []*server.Target{
		{Context: "a", Slug: "a-1", Upstream: ua, Holder: ha},
		{Context: "b", Slug: "b-2", Upstream: ub, Holder: hb},
	}, slog.New(slog.DiscardHandler))
	p := httptest.NewUnstartedServer(h)
	p.EnableHTTP2 = true
	p.StartTLS()
	t.Cleanup(p.Close)

	var foreignCalls atomic.Int64
	foreign := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		foreignCalls.Add(1)
		_, _ = io.WriteString(w, "foreign saw auth="+r.Header.Get("Authorization"))
	}))
	t.Cleanup(foreign.Close)

	client := &http.Client{Transport: secretEveryRequest{next: p.Client().Transport}}
	get := func(to string) (int, string) {
		t.Helper()
		resp, err := client.Get(p.URL + "/ctx/a-1/redirect?to=" + url.QueryEscape(to))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	for _, to := range []string{
		"/ctx/b-2/api/v1/secrets",
		p.URL + "/ctx/b-2/api/v1/secrets",
		"../../../ctx/b-2/api/v1/secrets",
		foreign.URL + "/steal",
		"//" + foreign.Listener.Addr().String() + "/steal",
	} {
		code, body := get(to)
		if n := apiB.calls.Load(); n != 0 {
			t.Fatalf("a redirect of context a to %q reached context b's API server (%d calls): %d %s", to, n, code, body)
		}
		if n := foreignCalls.Load(); n != 0 {
			t.Fatalf("a redirect of context a to %q reached another server: %d %s", to, code, body)
		}
	}

	// A redirect to a place on the same API server still works, under the
	// context's prefix: the upstream's /base/healthz is /ctx/a-1/healthz.
	for _, to := range []string{"/base/healthz?x=1", apiA.URL + "/base/healthz?x=1", "healthz?x=1"} {
		code, body := get(to)
		if code != http.StatusOK || apiA.last(t).URI != "/base/healthz?x=1" || apiA.last(t).CN != "alice-a" {
			t.Errorf("a redirect of context a to %q: %d %s, the API server last saw %+v", to, code, body, apiA.last(t).URI)
		}
	}
}
