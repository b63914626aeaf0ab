package localproxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandlerChecksTheSecretBeforeThePeer: the proxy's request path asks
// for the local secret before it looks up the peer's user, which costs a
// scan of the kernel's socket tables. A request with no peer to look up
// (no ConnContext) shows the order: without the secret it is refused for
// the secret (401), never reaching the peer check; with the secret the
// peer check still runs, and fails closed (403).
func TestHandlerChecksTheSecretBeforeThePeer(t *testing.T) {
	const secret = "local-secret-0123456789abcdef" //nolint:gosec // a test secret
	h := handler([]byte(secret), nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, c := range []struct {
		auth string
		code int
		want string
	}{
		{"", http.StatusUnauthorized, "no secret"},
		{"Bearer not-the-secret", http.StatusUnauthorized, "does not match"},
		{"Bearer " + secret, http.StatusForbidden, "could not tell which local user"},
	} {
		req := httptest.NewRequest(http.MethodGet, "/ctx/dev/api", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("Authorization %q: %d %s; want %d with %q", c.auth, rec.Code, rec.Body, c.code, c.want)
		}
	}
}
