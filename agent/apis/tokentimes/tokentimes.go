// Package tokentimes holds the one rule for how far a token's issuer's
// clock may be from the clock that checks the token, shared by the agent
// (which decides what a token is worth) and the CLI (which must not refuse
// what the agent would take). Standard library only: the CLI links it.
package tokentimes

import (
	"encoding/json"
	"errors"
	"math"
	"time"
)

// Leeway is how far the issuer's clock may be from the checker's, either
// way: a token is accepted from Leeway before its iat and nbf until
// ExpiryLeeway after its exp. It must cover a skew of 2 minutes plus a
// token's way from the issuer to the agent (a login's retries take up to
// 30 s): a Pinniped Supervisor's cluster-scoped ID tokens live only 2
// minutes, so from an issuer 2 minutes behind they arrive already expired
// by the agent's clock. It is bounded because leeway on exp lengthens a
// stolen token's life by as much (and each exchange mints a fresh 5-minute
// certificate); the checks on iat and nbf bound the other way, an issuer
// whose clock runs ahead handing out tokens that live that much longer.
// go-oidc (which Kubernetes' OIDC authenticator uses) checks exp strictly
// and nbf with 5 minutes; one leeway both ways is easier to reason about
// and to document (docs/security.md, "Clocks").
const Leeway = 3 * time.Minute

// ExpiryLeeway is how long after its exp a token is still accepted:
// Leeway, but at most half the token's lifetime (exp less iat), so a
// stolen token lives at most half again as long as its issuer meant. A
// Supervisor's 2-minute token from an issuer 2 minutes behind then has a
// minute to arrive; a 10-minute token from Dex the full Leeway.
func ExpiryLeeway(exp, iat time.Time) time.Duration {
	if iat.IsZero() {
		return Leeway
	}
	return max(0, min(Leeway, exp.Sub(iat)/2))
}

// NumericDate reads a JWT NumericDate (seconds since the epoch, possibly
// fractional, RFC 7519 section 2); absent or null is the zero time.
func NumericDate(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, nil
	}
	// A float64, not a json.Number: that would take a number in a string.
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return time.Time{}, errNotNumericDate
	}
	sec := math.Floor(f)
	return time.Unix(int64(sec), int64((f-sec)*1e9)), nil
}

var errNotNumericDate = errors.New("must be a number of seconds since the epoch")
