package peer

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/localproxy/server"
	"github.com/pinniped-kit/pinniped/cli/localuser"
)

// TestNoLookupWithoutTheSecret: behind the secret, as `pinniped proxy`
// wires it, a client without the secret, or with a wrong one, never makes
// the proxy scan the socket tables, however many connections and requests
// it sends; a client with it is looked up once per connection, and still
// refused when it is another user's or cannot be found.
func TestNoLookupWithoutTheSecret(t *testing.T) {
	const secret = "local-secret-0123456789abcdef" //nolint:gosec // a test secret
	var lookups atomic.Int64
	var found atomic.Value // lookupResult
	found.Store(lookupResult{uid: os.Getuid()})
	lookup := func(net.Addr, net.Addr) (int, error) {
		lookups.Add(1)
		r := found.Load().(lookupResult)
		return r.uid, r.err
	}

	srv := httptest.NewUnstartedServer(server.New([]byte(secret), nil, nil, server.AfterSecret(Check)))
	srv.Config.ConnContext = localuser.ConnContextWith(lookup)
	srv.Start()
	t.Cleanup(srv.Close)

	// send opens a new connection for each request unless keep is given.
	send := func(c *http.Client, auth string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/ctx/none/api", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	kept := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(kept.CloseIdleConnections)

	for _, auth := range []string{"", "Bearer not-the-secret", "Bearer " + secret + "x", "Basic " + secret} {
		for _, c := range []*http.Client{fresh, fresh, kept, kept} {
			if code := send(c, auth); code != http.StatusUnauthorized {
				t.Fatalf("Authorization %q: status %d, want 401", auth, code)
			}
		}
	}
	if n := lookups.Load(); n != 0 {
		t.Fatalf("clients without the secret made the proxy look up their user %d times", n)
	}

	// The secret, from our own user: looked up, then past the peer check
	// (404: no context is served here), once per connection.
	if code := send(kept, "Bearer "+secret); code != http.StatusNotFound {
		t.Fatalf("the secret from our own user: status %d, want 404", code)
	}
	if code := send(kept, "Bearer "+secret); code != http.StatusNotFound {
		t.Fatalf("the secret from our own user again: status %d, want 404", code)
	}
	if n := lookups.Load(); n != 1 {
		t.Fatalf("one connection with the secret: %d lookups, want 1", n)
	}

	// Fail closed: the right secret does not let another user, or a user
	// that cannot be found, in.
	for name, r := range map[string]lookupResult{
		"another user": {uid: os.Getuid() + 1},
		"unknown":      {err: errors.New("no socket")},
	} {
		found.Store(r)
		before := lookups.Load()
		if code := send(fresh, "Bearer "+secret); code != http.StatusForbidden {
			t.Errorf("%s with the secret: status %d, want 403", name, code)
		}
		if lookups.Load() != before+1 {
			t.Errorf("%s with the secret was not looked up", name)
		}
	}
}

type lookupResult struct {
	uid int
	err error
}
