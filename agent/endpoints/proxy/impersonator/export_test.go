package impersonator

import (
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
)

// CountVerifications makes p count the signature checks it does, for the
// tests of what its caches save. Call it before p is used.
func CountVerifications(p *ProxyTokens) *atomic.Int64 {
	n := &atomic.Int64{}
	p.verify = func(ks *proxytoken.KeySet, a proxytoken.Audience, tok string, now time.Time) (user.Info, time.Time, error) {
		n.Add(1)
		return proxytoken.Verify(ks, a, tok, now)
	}
	return n
}

// InFlight is how many reads rt (Transports.Impersonating or .Direct) has
// on HTTP/1.1 now.
func InFlight(rt http.RoundTripper) int64 { return rt.(*byDuration).inFlight.Load() }
