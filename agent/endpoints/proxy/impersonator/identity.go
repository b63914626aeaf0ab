package impersonator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/pinniped-kit/pinniped/agent/apis/proxyheaders"
)

// The proxy fails closed: every request it forwards carries, in its
// context, the exact identity headers the proxy decided on (an empty set
// for anonymous requests). The reverse proxy's Rewrite hook sets them as
// its last step, and identityCheck, the last thing before the wire,
// refuses any request whose identity headers differ from them or that has
// no decision at all. A request that would reach the API server as the
// proxy's own ServiceAccount, or as anyone but the decided identity, is
// never sent.

type identityKey struct{}

// withIdentity attaches the identity headers a request must go upstream with.
func withIdentity(r *http.Request, id http.Header) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
}

func assertedIdentity(ctx context.Context) (http.Header, bool) {
	id, ok := ctx.Value(identityKey{}).(http.Header)
	return id, ok && id != nil
}

// errIdentityMismatch means a request was about to leave with identity
// headers other than the proxy's decision; it is a bug, never sent.
var errIdentityMismatch = errors.New("identity headers differ from the proxy's decision")

// identityCheck wraps the transports to the API server. On the transports
// that carry the proxy's own ServiceAccount, impersonate is set: a request
// without an Impersonate-User would run as that account itself.
type identityCheck struct {
	next        http.RoundTripper
	impersonate bool
}

func (c *identityCheck) RoundTrip(r *http.Request) (*http.Response, error) {
	want, ok := assertedIdentity(r.Context())
	if !ok {
		return nil, fmt.Errorf("%w: the request has no identity decision", errIdentityMismatch)
	}
	if c.impersonate && want.Get("Impersonate-User") == "" {
		return nil, fmt.Errorf("%w: a request on the impersonating transport names nobody to impersonate", errIdentityMismatch)
	}
	got := http.Header{}
	for k, vs := range r.Header {
		if proxyheaders.IsIdentityHeader(k) {
			got[k] = vs
		}
	}
	if !sameHeaders(got, want) {
		names := make([]string, 0, len(got))
		for k := range got {
			names = append(names, k)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("%w: outgoing identity headers %v", errIdentityMismatch, names)
	}
	return c.next.RoundTrip(r)
}

func sameHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !slices.Equal(va, vb) {
			return false
		}
	}
	return true
}
