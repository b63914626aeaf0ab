// Package jwt validates OIDC ID tokens (JWTs) from one issuer, as configured
// by a JWTAuthenticator, using github.com/coreos/go-oidc/v3.
package jwt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"k8s.io/apiserver/pkg/authentication/authenticator"

	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/claimrules"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/tlsclient"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
	"github.com/pinniped-kit/pinniped/agent/apis/tokentimes"
)

// Config is everything needed to validate tokens from one issuer.
type Config struct {
	// Spec is the JWTAuthenticator's: issuer, audiences and claim rules.
	// Its tls is read by the caller into CABundle.
	Spec authv1alpha1.JWTAuthenticatorSpec
	// CABundle is PEM; empty means the system roots.
	CABundle []byte
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Authenticator implements k8s.io/apiserver's authenticator.Token.
type Authenticator struct {
	verifier  *oidc.IDTokenVerifier
	now       func() time.Time
	skew      time.Duration   // spec.allowedClockSkew, clamped
	audiences map[string]bool // checked here when more than one
	rules     *claimrules.Rules
	// fipsRefused are the issuer's keys, seen when this was built, that
	// FIPS 140-only mode refuses, and why (fipsRefusedKeys).
	fipsRefused map[string]string
}

var _ authenticator.Token = (*Authenticator)(nil)

// HTTPClient builds the client used for discovery and JWKS fetches: the
// given CA bundle only, TLS 1.2+, short timeouts so a dead issuer cannot
// stall reconciliation, and redirects followed only to https.
func HTTPClient(caBundle []byte) (*http.Client, error) {
	return tlsclient.Client(caBundle, 2, 15*time.Second)
}

// ValidateIssuer checks the issuer URL without contacting it.
func ValidateIssuer(issuer string) error {
	if err := httpsurl.Check("issuer", issuer); err != nil {
		return err
	}
	u, _ := url.Parse(issuer)
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("issuer %q must not have a query, fragment or user info", issuer)
	}
	return nil
}

// StepError says which step of setting up an authenticator failed, named
// by the JWTAuthenticator condition type that reports it.
type StepError struct {
	Condition string
	Err       error
}

func (e *StepError) Error() string { return e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// Condition types, in the order New checks them.
const (
	CondTLSConfigurationValid = "TLSConfigurationValid"
	CondIssuerURLValid        = "IssuerURLValid"
	CondClaimRulesValid       = authv1alpha1.ConditionClaimRulesValid
	CondDiscoveryURLValid     = "DiscoveryURLValid"
	CondJWKSURLValid          = "JWKSURLValid"
	CondJWKSFetchValid        = "JWKSFetchValid"
)

// Steps lists the condition types New checks, in order.
var Steps = []string{CondTLSConfigurationValid, CondIssuerURLValid, CondClaimRulesValid, CondDiscoveryURLValid, CondJWKSURLValid, CondJWKSFetchValid}

func stepErr(condition string, err error) error { return &StepError{Condition: condition, Err: err} }

// New performs OIDC discovery against the issuer, fetches its keys once to
// prove they are usable, and returns an authenticator. Keys are refetched
// later when a token names an unknown key id (go-oidc's RemoteKeySet), at
// most once per KeyRefetchInterval. Errors are *StepError.
func New(ctx context.Context, cfg Config) (*Authenticator, error) {
	client, err := HTTPClient(cfg.CABundle)
	if err != nil {
		return nil, stepErr(CondTLSConfigurationValid, err)
	}
	issuer := cfg.Spec.Issuer
	if err := ValidateIssuer(issuer); err != nil {
		return nil, stepErr(CondIssuerURLValid, err)
	}
	if cfg.Spec.Audience == "" {
		return nil, stepErr(CondIssuerURLValid, errors.New("audience must not be empty"))
	}
	rules, err := claimrules.Compile(cfg.Spec)
	if err != nil {
		return nil, stepErr(CondClaimRulesValid, err)
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, client), issuer)
	if err != nil {
		return nil, stepErr(CondDiscoveryURLValid, fmt.Errorf("OIDC discovery at %s: %w", issuer, err))
	}
	var claims struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&claims); err != nil || claims.JWKSURI == "" {
		return nil, stepErr(CondJWKSURLValid, fmt.Errorf("discovery document of %s has no jwks_uri", issuer))
	}
	if httpsurl.Check("jwks_uri", claims.JWKSURI) != nil {
		return nil, stepErr(CondJWKSURLValid, fmt.Errorf("jwks_uri %q of %s must be an https URL", claims.JWKSURI, issuer))
	}
	// One client for every key fetch, the probe's included, so that the
	// first token is checked against the keys just probed.
	keyClient := throttledKeyClient(client, nowOrDefault(cfg.Now))
	keys, err := probeKeys(ctx, keyClient, claims.JWKSURI)
	if err != nil {
		return nil, stepErr(CondJWKSFetchValid, err)
	}
	refused, nRefused := fipsRefusedKeys(keys, fipsEnforced())
	if nRefused == len(keys) {
		return nil, stepErr(CondJWKSFetchValid, fmt.Errorf("every key at %s is an RSA key this agent cannot verify with: it runs FIPS 140-only (GODEBUG=fips140=only), so no token from %s can be verified", claims.JWKSURI, issuer))
	}
	// The key set must outlive ctx (it refreshes keys later), so it gets its
	// own background context carrying only the HTTP client.
	keySet := oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), keyClient), claims.JWKSURI)
	a := newAuthenticator(cfg, rules, keySet)
	a.fipsRefused = refused
	return a, nil
}

// probeKeys fetches the key set once so a broken JWKS endpoint shows up in
// status now rather than as failed logins later; it returns the keys.
func probeKeys(ctx context.Context, client *http.Client, jwksURI string) ([]json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jwksURI, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch keys from %s: %w", jwksURI, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch keys from %s: HTTP %d", jwksURI, resp.StatusCode)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return nil, fmt.Errorf("keys at %s are not a JSON Web Key Set: %w", jwksURI, err)
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("key set at %s is empty", jwksURI)
	}
	return set.Keys, nil
}

func newAuthenticator(cfg Config, rules *claimrules.Rules, keySet oidc.KeySet) *Authenticator {
	a := &Authenticator{now: nowOrDefault(cfg.Now), rules: rules, skew: AllowedClockSkew(cfg.Spec)}
	vc := &oidc.Config{
		ClientID: cfg.Spec.Audience,
		// Asymmetric algorithms only: with HS256 anyone holding the client
		// secret could mint tokens.
		SupportedSigningAlgs: []string{
			oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512,
			oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA,
		},
		// go-oidc v3 allows nbf 5 minutes early (kube-apiserver's v2, 1
		// minute) and knows no allowedClockSkew: checkTimes applies
		// tokentimes' rules instead.
		SkipExpiryCheck: true,
	}
	if len(cfg.Spec.Audiences) > 0 {
		// go-oidc checks one audience; any of several (MatchAny) is
		// checked in AuthenticateToken, as kube-apiserver does.
		vc.ClientID, vc.SkipClientIDCheck = "", true
		a.audiences = map[string]bool{cfg.Spec.Audience: true}
		for _, aud := range cfg.Spec.Audiences {
			a.audiences[aud] = true
		}
	}
	a.verifier = oidc.NewVerifier(cfg.Spec.Issuer, keySet, vc)
	return a
}

// AuthenticateToken verifies signature, issuer, audience and expiry, then
// maps claims to a Kubernetes user.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	idToken, err := a.verifier.Verify(ctx, token)
	if err != nil {
		// Only where the signature itself failed: go-oidc says so in its
		// error, and nothing else there is the key's doing.
		if msg := err.Error(); strings.HasPrefix(msg, "failed to verify signature") && !strings.Contains(msg, "fetching keys") {
			if why := fipsRefusal(token, a.fipsRefused); why != "" {
				return nil, false, fmt.Errorf("verify token: %s: %w", why, err)
			}
		}
		return nil, false, fmt.Errorf("verify token: %w", err)
	}
	var claims map[string]json.RawMessage
	if err := idToken.Claims(&claims); err != nil {
		return nil, false, fmt.Errorf("decode claims: %w", err)
	}
	if a.audiences != nil && !slices.ContainsFunc(idToken.Audience, func(aud string) bool { return a.audiences[aud] }) {
		return nil, false, fmt.Errorf("token's audience %q is none of this authenticator's", idToken.Audience)
	}
	if err := a.checkTimes(idToken.Expiry, idToken.IssuedAt, claims["nbf"]); err != nil {
		return nil, false, err
	}
	u, err := a.rules.User(ctx, claims)
	if err != nil {
		return nil, false, err
	}
	return &authenticator.Response{
		Audiences: authenticator.Audiences(idToken.Audience),
		User:      u,
	}, true, nil
}

func nowOrDefault(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// AllowedClockSkew is the skew spec allows, within [0,
// tokentimes.MaxClockSkew] whatever it says (the CRD refuses more, but an
// object stored under an older CRD, or written past it, is not).
func AllowedClockSkew(spec authv1alpha1.JWTAuthenticatorSpec) time.Duration {
	if spec.AllowedClockSkew == nil {
		return 0
	}
	return tokentimes.ClampSkew(spec.AllowedClockSkew.Duration)
}

// checkTimes applies tokentimes.Check with the authenticator's allowed
// skew. Its error names the rule and the skew in force, never a claim's
// value: the agent logs it.
func (a *Authenticator) checkTimes(exp, iat time.Time, rawNBF json.RawMessage) error {
	nbf, err := tokentimes.NumericDate(rawNBF)
	if err != nil {
		return fmt.Errorf("claim nbf: %w", err)
	}
	err = tokentimes.Check(a.now(), exp, iat, nbf, a.skew)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tokentimes.ErrNoExpiry):
		return err
	case errors.Is(err, tokentimes.ErrExpired):
		return fmt.Errorf("%w; spec.allowedClockSkew is %s: log in again; if a fresh token is refused too, the issuer's clock is behind the cluster's (`pinniped doctor` measures it): fix NTP, or set the JWTAuthenticator's spec.allowedClockSkew (at most %s)", err, a.skew, tokentimes.MaxClockSkew)
	}
	return fmt.Errorf("%w; spec.allowedClockSkew is %s: the issuer's clock is ahead of the cluster's (`pinniped doctor` measures it): fix NTP, or set the JWTAuthenticator's spec.allowedClockSkew (at most %s)", err, a.skew, tokentimes.MaxClockSkew)
}
