// Package chaincheck holds what the agent's two caches of verified client
// certificates (the front proxy's, the impersonation proxy's) must agree on:
// how a presented chain is named, and how long a verification of it may be
// trusted.
package chaincheck

import (
	"crypto/sha256"
	"crypto/x509"
	"time"
)

// Key names the whole presented chain: intermediates change the answer.
func Key(presented []*x509.Certificate) string {
	h := sha256.New()
	for _, c := range presented {
		h.Write(c.Raw)
	}
	return string(h.Sum(nil))
}

// Until is when a successful verification of presented, reached at now
// under opts, stops holding: ttl on, or earlier when any certificate of a
// chain it verifies through (the client's, an intermediate, the CA)
// expires. It builds the chains again, since k8s.io/apiserver's
// authenticators do not return them; callers do this once per cache miss.
// Times are wall-clock, as x509 compares them. ok is false if presented
// does not verify under opts.
func Until(presented []*x509.Certificate, opts x509.VerifyOptions, now time.Time, ttl time.Duration) (until time.Time, ok bool) {
	if len(presented) == 0 {
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
	until = now.Round(0).Add(ttl)
	for _, chain := range chains {
		for _, c := range chain {
			if c.NotAfter.Before(until) {
				until = c.NotAfter
			}
		}
	}
	return until, true
}
