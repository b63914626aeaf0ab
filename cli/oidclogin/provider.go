// Package oidclogin gets ID tokens from an OIDC provider: by browser (auth
// code + PKCE on a loopback listener, with a paste-the-code fallback), by
// device code, by password grant, or by refresh; and trades them for other
// audiences (RFC 8693). It uses go-oidc for discovery and verification and
// golang.org/x/oauth2 for the grants.
package oidclogin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Config names the provider and client.
type Config struct {
	Issuer   string
	ClientID string
	Scopes   []string
	CABundle []byte // PEM; empty means system roots
	Now      func() time.Time
}

// Tokens are what a login yields.
type Tokens struct {
	IDToken           string    `json:"idToken"`
	IDTokenExpiry     time.Time `json:"idTokenExpiry"`
	AccessToken       string    `json:"accessToken,omitempty"`
	AccessTokenExpiry time.Time `json:"accessTokenExpiry,omitzero"`
	RefreshToken      string    `json:"refreshToken,omitempty"`
	// Username and Groups are read from the verified ID token, for display.
	Username string   `json:"username,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// signingAlgs are the asymmetric algorithms accepted for ID tokens; HS256
// would let anyone holding the client secret mint tokens.
var signingAlgs = []string{
	oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA,
}

// Provider is a discovered OIDC provider.
type Provider struct {
	cfg      Config
	http     *http.Client
	oidc     *oidc.Provider
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
	// DeviceAuthURL is empty when the provider has no device flow.
	DeviceAuthURL string
	// TokenURL is used for RFC 8693 exchanges.
	TokenURL string
}

// HTTPClient trusts caBundle (or the system roots), TLS 1.2+, with timeouts.
func HTTPClient(caBundle []byte) (*http.Client, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		tlsCfg.RootCAs = pool
	}
	return &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSClientConfig:     tlsCfg,
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
		},
	}, nil
}

func requireHTTPS(what, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s %q is not a URL", what, raw)
	}
	if u.Scheme != "https" {
		return fmt.Errorf("%s %q must use https", what, raw)
	}
	return nil
}

// Discover fetches the provider's discovery document. Every endpoint the
// login uses must be https.
func Discover(ctx context.Context, cfg Config) (*Provider, error) {
	if err := requireHTTPS("issuer", cfg.Issuer); err != nil {
		return nil, err
	}
	client, err := HTTPClient(cfg.CABundle)
	if err != nil {
		return nil, err
	}
	ctx = oidc.ClientContext(ctx, client)
	p, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discover OIDC provider %s: %w", cfg.Issuer, err)
	}
	var extra struct {
		DeviceAuthURL string `json:"device_authorization_endpoint"`
	}
	_ = p.Claims(&extra)
	ep := p.Endpoint()
	for what, u := range map[string]string{"authorization endpoint": ep.AuthURL, "token endpoint": ep.TokenURL} {
		if err := requireHTTPS(what, u); err != nil {
			return nil, fmt.Errorf("provider %s: %w", cfg.Issuer, err)
		}
	}
	if extra.DeviceAuthURL != "" {
		if err := requireHTTPS("device authorization endpoint", extra.DeviceAuthURL); err != nil {
			extra.DeviceAuthURL = ""
		}
	}
	ep.DeviceAuthURL = extra.DeviceAuthURL
	ep.AuthStyle = oauth2.AuthStyleInParams // public client: client_id in the body, no secret
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Provider{
		cfg:  cfg,
		http: client,
		oidc: p,
		verifier: p.Verifier(&oidc.Config{
			ClientID:             cfg.ClientID,
			SupportedSigningAlgs: signingAlgs,
			Now:                  now,
		}),
		oauth: oauth2.Config{
			ClientID: cfg.ClientID,
			Endpoint: ep,
			Scopes:   cfg.Scopes,
		},
		DeviceAuthURL: extra.DeviceAuthURL,
		TokenURL:      ep.TokenURL,
	}, nil
}

func (p *Provider) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, p.http), p.http)
}

// tokens verifies the ID token in an OAuth2 response. wantNonce is checked
// when non-empty.
func (p *Provider) tokens(ctx context.Context, tok *oauth2.Token, wantNonce string) (*Tokens, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, errors.New("the provider returned no ID token (is the openid scope requested?)")
	}
	idt, err := p.verifier.Verify(p.ctx(ctx), raw)
	if err != nil {
		return nil, fmt.Errorf("the provider's ID token does not verify: %w", err)
	}
	if wantNonce != "" && idt.Nonce != wantNonce {
		return nil, errors.New("the ID token's nonce does not match this login (possible replay); log in again")
	}
	var claims struct {
		Username          string `json:"username"`
		Email             string `json:"email"`
		PreferredUsername string `json:"preferred_username"`
		Name              string `json:"name"`
		Groups            any    `json:"groups"`
	}
	_ = idt.Claims(&claims)
	t := &Tokens{
		IDToken:       raw,
		IDTokenExpiry: idt.Expiry,
		AccessToken:   tok.AccessToken,
		RefreshToken:  tok.RefreshToken,
		Username:      firstNonEmpty(claims.Username, claims.Email, claims.PreferredUsername, claims.Name, idt.Subject),
		Groups:        stringList(claims.Groups),
	}
	if !tok.Expiry.IsZero() {
		t.AccessTokenExpiry = tok.Expiry
	}
	return t, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func stringList(v any) []string {
	switch g := v.(type) {
	case string:
		return []string{g}
	case []any:
		out := make([]string, 0, len(g))
		for _, e := range g {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Refresh trades a refresh token for fresh tokens. The provider may rotate
// the refresh token; the result carries whichever is current.
func (p *Provider) Refresh(ctx context.Context, refreshToken string) (*Tokens, error) {
	tok, err := p.oauth.TokenSource(p.ctx(ctx), &oauth2.Token{RefreshToken: refreshToken}).Token()
	if err != nil {
		return nil, fmt.Errorf("refresh: %w", err)
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = refreshToken
	}
	return p.tokens(ctx, tok, "")
}

// PasswordGrant logs in with a username and password (resource owner
// password credentials). For CI; the provider must allow it.
func (p *Provider) PasswordGrant(ctx context.Context, username, password string) (*Tokens, error) {
	tok, err := p.oauth.PasswordCredentialsToken(p.ctx(ctx), username, password)
	if err != nil {
		return nil, fmt.Errorf("password login: %w", err)
	}
	return p.tokens(ctx, tok, "")
}
