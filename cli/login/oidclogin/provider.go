// Package oidclogin gets ID tokens from an OIDC provider: by browser (auth
// code + PKCE on a loopback listener, with a paste-the-code fallback), by
// device code, by password grant, or by refresh; and trades them for other
// audiences (RFC 8693). It reads the discovery document with package
// discovery, verifies with go-oidc and uses golang.org/x/oauth2 for the
// grants.
package oidclogin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/pinniped-kit/pinniped/agent/apis/tokentimes"
	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/httpclient"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/discovery"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// signingAlgs are the asymmetric algorithms accepted for ID tokens; HS256
// would let anyone holding the client secret mint tokens.
var signingAlgs = []string{
	oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA,
}

// Provider is a discovered OIDC provider.
type Provider struct {
	cfg      *config.OIDC
	now      func() time.Time
	http     *http.Client
	oidc     *oidc.Provider
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
	// DeviceAuthURL is empty when the provider has no device flow.
	DeviceAuthURL string
	// TokenURL is used for RFC 8693 exchanges.
	TokenURL string
	// DroppedScopes are the asked-for scopes this issuer does not support,
	// left out of the request (a Pinniped Supervisor is asked for all).
	DroppedScopes []string
	// FormPost is set when the issuer is a Pinniped Supervisor that posts
	// the code back (form_post): its page then also shows the code to paste.
	FormPost bool
	doc      *discovery.Document
}

// Discover reads the provider's discovery document; every endpoint the
// login sends a secret to must be https. now is the clock ID tokens are
// checked against (nil: time.Now).
func Discover(ctx context.Context, c *config.OIDC, now func() time.Time) (*Provider, error) {
	client, err := httpclient.New(c.CABundle, 60*time.Second)
	if err != nil {
		return nil, fmt.Errorf("the issuer's CA bundle: %w", err)
	}
	doc, err := discovery.Fetch(ctx, client, c.Issuer)
	if err != nil {
		return nil, err
	}
	return New(ctx, c, client, doc, now), nil
}

// New is the provider c names, whose discovery document doc was read
// with client; it asks nothing of the network itself.
func New(ctx context.Context, c *config.OIDC, client *http.Client, doc *discovery.Document, now func() time.Time) *Provider {
	ctx = oidc.ClientContext(ctx, client)
	p := (&oidc.ProviderConfig{
		IssuerURL: doc.Issuer, AuthURL: doc.AuthorizationEndpoint, TokenURL: doc.TokenEndpoint,
		DeviceAuthURL: doc.DeviceAuthorizationEndpoint, UserInfoURL: doc.UserInfoEndpoint, JWKSURL: doc.JWKSURI,
		Algorithms: doc.IDTokenSigningAlgs,
	}).NewProvider(ctx)
	ep := p.Endpoint()
	// client_id (and a client secret, where a provider wants one from an
	// installed app) in the body: public clients have no other way.
	ep.AuthStyle = oauth2.AuthStyleInParams
	if now == nil {
		now = time.Now
	}
	scopes, dropped := c.Scopes, []string(nil)
	if !doc.IsSupervisor() {
		scopes, dropped = doc.SupportedScopes(c.Scopes)
	}
	return &Provider{
		cfg:  c,
		now:  now,
		http: client,
		oidc: p,
		verifier: p.Verifier(&oidc.Config{
			ClientID:             c.ClientID,
			SupportedSigningAlgs: signingAlgs,
			// go-oidc v3 allows nbf 5 minutes early; verify applies
			// tokentimes' rules with tokentimes.CLISkew instead.
			SkipExpiryCheck: true,
		}),
		oauth: oauth2.Config{
			ClientID:     c.ClientID,
			ClientSecret: c.ClientSecret,
			Endpoint:     ep,
			Scopes:       scopes,
		},
		DeviceAuthURL: doc.DeviceAuthorizationEndpoint,
		TokenURL:      ep.TokenURL,
		DroppedScopes: dropped,
		FormPost:      doc.IsSupervisor() && slices.Contains(doc.ResponseModesSupported, "form_post"),
		doc:           doc,
	}
}

func (p *Provider) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, p.http), p.http)
}

// tokens verifies the ID token in an OAuth2 response. wantNonce is checked
// when non-empty.
func (p *Provider) tokens(ctx context.Context, tok *oauth2.Token, wantNonce string) (*sessions.Tokens, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, errors.New("the provider returned no ID token (is the openid scope requested?)")
	}
	idt, err := p.verify(ctx, p.verifier, raw)
	if err != nil {
		return nil, fmt.Errorf("the provider's ID token does not verify: %w", err)
	}
	if wantNonce != "" && idt.Nonce != wantNonce {
		return nil, errors.New("the ID token's nonce does not match this login (possible replay); log in again")
	}
	// at_hash binds the access token (which a login may trade for the
	// cluster's audience) to the verified ID token.
	if idt.AccessTokenHash != "" {
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
			return nil, fmt.Errorf("the provider's access token does not match its ID token (at_hash): %w", err)
		}
	}
	var claims struct {
		Username          string `json:"username"`
		Email             string `json:"email"`
		PreferredUsername string `json:"preferred_username"`
		Name              string `json:"name"`
		Groups            any    `json:"groups"`
	}
	_ = idt.Claims(&claims)
	t := &sessions.Tokens{
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

// authorizeParams are the login's --authorize-param options.
func (p *Provider) authorizeParams() []oauth2.AuthCodeOption {
	var opts []oauth2.AuthCodeOption
	for i := range p.cfg.AuthorizeParams {
		// Validate refuses these; a parameter that slipped past it must
		// still not replace state, the redirect URI or PKCE.
		if name, value := p.cfg.AuthorizeParam(i); !config.IsReservedAuthorizeParam(name) {
			opts = append(opts, oauth2.SetAuthURLParam(name, value))
		}
	}
	return opts
}

// verify checks the token with v (which skips go-oidc's expiry check), then
// its exp, nbf and iat by tokentimes' rules with tokentimes.CLISkew.
func (p *Provider) verify(ctx context.Context, v *oidc.IDTokenVerifier, raw string) (*oidc.IDToken, error) {
	idt, err := v.Verify(p.ctx(ctx), raw)
	if err != nil {
		return nil, err
	}
	var times struct {
		NBF json.RawMessage `json:"nbf"`
	}
	if err := idt.Claims(&times); err != nil {
		return nil, fmt.Errorf("claim nbf: %w", err)
	}
	nbf, err := tokentimes.NumericDate(times.NBF)
	if err != nil {
		return nil, fmt.Errorf("claim nbf: %w", err)
	}
	// tokentimes.CLISkew: at least what any agent may allow, so a token
	// an agent could take is never refused here (one the agent refuses
	// fails that exchange, and its log names the rule).
	if err := tokentimes.Check(p.now(), idt.Expiry, idt.IssuedAt, nbf, tokentimes.CLISkew); err != nil {
		if errors.Is(err, tokentimes.ErrNoExpiry) {
			return nil, err
		}
		return nil, fmt.Errorf("%w, by this machine's clock with %s of clock skew allowed: check this machine's clock (`pinniped doctor` compares it with the issuer's)", err, tokentimes.CLISkew)
	}
	return idt, nil
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
func (p *Provider) Refresh(ctx context.Context, refreshToken string) (*sessions.Tokens, error) {
	tok, err := p.oauth.TokenSource(p.ctx(ctx), &oauth2.Token{RefreshToken: refreshToken}).Token()
	if err != nil {
		return nil, fmt.Errorf("refresh: %w", termsafe.Error(httpclient.Unwrap(err)))
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = refreshToken
	}
	return p.tokens(ctx, tok, "")
}

// PasswordGrant logs in with a username and password (resource owner
// password credentials). For CI; the provider must allow it.
func (p *Provider) PasswordGrant(ctx context.Context, username, password string) (*sessions.Tokens, error) {
	tok, err := p.oauth.PasswordCredentialsToken(p.ctx(ctx), username, password)
	if err != nil {
		// RFC 6749 section 5.2: invalid_grant is the resource owner's
		// credentials refused. Callers must not repeat such a try.
		if re := (*oauth2.RetrieveError)(nil); errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
			return nil, fmt.Errorf("password login: %w: %w", ErrPasswordRefused, termsafe.Error(err))
		}
		return nil, fmt.Errorf("password login: %w", termsafe.Error(err))
	}
	return p.tokens(ctx, tok, "")
}
