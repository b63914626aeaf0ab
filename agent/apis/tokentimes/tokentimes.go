// Package tokentimes holds the rules for a token's times (exp, nbf, iat)
// and how far an issuer's clock may be from the clock that checks them,
// shared by the agent (which decides what a token is worth) and the CLI
// (which must not refuse what the agent would take). Standard library
// only: the CLI links it.
package tokentimes

import (
	"encoding/json"
	"errors"
	"math"
	"time"
)

// NotBeforeLeeway is how long before its nbf a token is accepted: the
// minute kube-apiserver's OIDC authenticator allows (go-oidc v2, which it
// uses). iat gets the same: an issuer whose clock runs ahead would
// otherwise hand out tokens that live that much longer.
const NotBeforeLeeway = time.Minute

// MaxClockSkew caps a JWTAuthenticator's spec.allowedClockSkew (the CRD
// refuses more, and Check clamps to it). Skew allowed on exp lengthens a
// stolen token's life by as much (and each exchange mints a fresh
// 5-minute certificate), so it is the administrator's to allow and
// bounded. 3 minutes covers an issuer 2 minutes behind whose 2-minute
// tokens (a Pinniped Supervisor's cluster-scoped ones) arrive already
// expired, plus up to 30 s of a login's retries.
const MaxClockSkew = 3 * time.Minute

// CLISkew is the skew the CLI allows a fresh token from the issuer: the
// most any agent may allow, so the CLI never refuses a token an agent
// would take. A token it accepts and the agent refuses is only renewed.
const CLISkew = MaxClockSkew

// The rules a token's times can break. They name the rule, never a
// claim's value: the agent logs them.
var (
	ErrNoExpiry       = errors.New("token has no exp claim (the issuer must set one)")
	ErrExpired        = errors.New("token expired (exp is past)")
	ErrNotYetValid    = errors.New("token not yet valid (nbf is ahead by more than 1m0s and the allowed clock skew)")
	ErrIssuedInFuture = errors.New("token issued in the future (iat is ahead by more than 1m0s and the allowed clock skew)")
)

// ClampSkew is skew within [0, MaxClockSkew].
func ClampSkew(skew time.Duration) time.Duration {
	return min(max(skew, 0), MaxClockSkew)
}

// Check applies kube-apiserver's rules to a token's times, and the nbf
// rule to iat too (kube-apiserver does not check iat), widened by skew
// (clamped by ClampSkew) each way: refused from exp on (exp itself is
// still in, as go-oidc has it), and when nbf or iat is more than
// NotBeforeLeeway ahead. exp must be present (a token without one would
// never expire); iat and nbf may be zero (absent). The error is one of
// the Err values above.
func Check(now, exp, iat, nbf time.Time, skew time.Duration) error {
	skew = ClampSkew(skew)
	switch {
	case exp.IsZero():
		return ErrNoExpiry
	case now.After(exp.Add(skew)):
		return ErrExpired
	case !nbf.IsZero() && nbf.After(now.Add(NotBeforeLeeway+skew)):
		return ErrNotYetValid
	case !iat.IsZero() && iat.After(now.Add(NotBeforeLeeway+skew)):
		return ErrIssuedInFuture
	}
	return nil
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
