package frontproxy

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"net/http"
	"slices"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/utils/lru"
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
	h := sha256.New()
	for _, c := range r.TLS.PeerCertificates {
		h.Write(c.Raw)
	}
	key := string(h.Sum(nil))
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
		if until, ok := v.verdictEnd(r.TLS.PeerCertificates, now); ok {
			v.lru.Add(key, &verdict{caBundle: ca, names: slices.Clone(names), until: until})
		}
	}
	return resp, ok, err
}

// verdictEnd is when a verdict reached now stops holding: a minute on, or
// earlier when any certificate of a chain it verified through (the client
// certificate, an intermediate, the CA) expires. The chains are built again
// for this, once a minute at most, since the library does not return them.
// Wall-clock times throughout, as x509 compares.
func (v *verifiedProxy) verdictEnd(presented []*x509.Certificate, now time.Time) (time.Time, bool) {
	opts, ok := v.verifyOptions()
	if !ok {
		return time.Time{}, false
	}
	if opts.Intermediates == nil && len(presented) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range presented[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	chains, err := presented[0].Verify(opts)
	if err != nil {
		return time.Time{}, false
	}
	until := now.Round(0).Add(verifiedCacheTTL)
	for _, chain := range chains {
		for _, c := range chain {
			if c.NotAfter.Before(until) {
				until = c.NotAfter
			}
		}
	}
	return until, true
}

type stringSlice func() []string

func (f stringSlice) Value() []string { return f() }
