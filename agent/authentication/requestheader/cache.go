package requestheader

import (
	"bytes"
	"net/http"
	"slices"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/utils/lru"

	"github.com/pinniped-kit/pinniped/agent/authentication/chaincheck"
)

// Sizes of the verification cache: the front proxy uses one certificate
// per kube-apiserver, so a handful of entries is plenty.
const (
	verifiedCacheSize = 64
	verifiedCacheTTL  = time.Minute
)

// verifiedProxy is k8s.io/apiserver's requestheader authenticator with the
// certificate check remembered. Every request from the aggregation layer
// presents the same front-proxy certificate, and verifying its chain (an
// ECDSA or RSA signature check) was 7% of the agent's CPU per exchange. The
// user still comes from each request's own X-Remote-* headers; only the
// verdict "this chain is the front proxy" is reused, for at most a minute,
// never past the NotAfter of any certificate in the chain, and only while
// the trusted CA bundle and the allowed names are exactly those it was
// reached under.
type verifiedProxy struct {
	verifyOptions x509request.VerifyOptionFunc
	caBundle      func() []byte
	allowedNames  func() []string
	headers       authenticator.Request
	now           func() time.Time
	lru           *lru.Cache // safe for concurrent use
}

type verdict struct {
	caBundle []byte
	names    []string
	until    time.Time
}

func (v *verifiedProxy) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	key := chaincheck.Key(r.TLS.PeerCertificates)
	ca, names, now := v.caBundle(), v.allowedNames(), v.now()
	if e, ok := v.lru.Get(key); ok {
		d := e.(*verdict)
		if now.Round(0).Before(d.until) && bytes.Equal(d.caBundle, ca) && slices.Equal(d.names, names) {
			return v.headers.AuthenticateRequest(r)
		}
		v.lru.Remove(key)
	}
	// The library's own check: chain to the CA, then the allowed names;
	// passed tells whether it got as far as the headers.
	passed := false
	headers := authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		passed = true
		return v.headers.AuthenticateRequest(r)
	})
	resp, ok, err := x509request.NewDynamicCAVerifier(v.verifyOptions, headers, stringSlice(func() []string { return names })).AuthenticateRequest(r)
	if passed {
		opts, _ := v.verifyOptions()
		if until, ok := chaincheck.Until(r.TLS.PeerCertificates, opts, now, verifiedCacheTTL); ok {
			v.lru.Add(key, &verdict{caBundle: ca, names: slices.Clone(names), until: until})
		}
	}
	return resp, ok, err
}

type stringSlice func() []string

func (f stringSlice) Value() []string { return f() }
