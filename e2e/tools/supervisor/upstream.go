package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/ory/fosite"
	"golang.org/x/oauth2"
)

// UpstreamConfig is the upstream OIDC provider (the bed's Dex) behind both identity
// providers, and this server's two clients there.
type UpstreamConfig struct {
	Issuer     string
	HTTPClient *http.Client // trusts the upstream's CA

	// ClientID and ClientSecret: the OIDC provider's confidential client, with redirect
	// {issuer}/callback, for its browser logins and (as an OIDCIdentityProvider with
	// allowPasswordGrant) its cli_password logins.
	ClientID, ClientSecret string
	// PasswordClientID: the public client the LDAP provider checks passwords with. A
	// client of its own: Dex keeps one refresh token per user and client, so a login
	// through one provider (or straight at Dex) must not end another's session.
	PasswordClientID string
}

// Scopes asked of the upstream, the browser login's as an OIDCIdentityProvider's
// additionalScopes would ask them. Both ask for offline_access: every downstream refresh
// re-checks the user at the upstream with its refresh token, as upstream does (for an LDAP
// provider upstream searches the directory again instead; Dex is this one's directory).
var (
	browserScopes  = []string{oidc.ScopeOpenID, "email", "profile", "groups", oidc.ScopeOfflineAccess}
	passwordScopes = []string{oidc.ScopeOpenID, "email", "profile", "groups", oidc.ScopeOfflineAccess}
)

// idp is one of the FederationDomain's identity providers as the IDP discovery endpoint
// lists it.
type idp struct {
	Name  string   `json:"name"` // the displayName, also the authorize request's pinniped_idp_name
	Type  string   `json:"type"`
	Flows []string `json:"flows"` // the first is the default

	// prefix goes before the username and each group, as a FederationDomain identity
	// transform would put it, so the two providers give one person two identities.
	prefix string
}

// identityProviders are both backed by Dex: "Bed Dex" as an OIDCIdentityProvider with
// allowPasswordGrant, "Bed LDAP" standing in for an LDAPIdentityProvider that takes
// passwords only (no browser login form here). Sorted by name, as upstream lists them.
func identityProviders() []*idp {
	return []*idp{
		{Name: "Bed Dex", Type: "oidc", Flows: []string{"browser_authcode", "cli_password"}},
		{Name: "Bed LDAP", Type: "ldap", Flows: []string{"cli_password"}, prefix: "ldap:"},
	}
}

func (p *idp) offers(flow string) bool {
	for _, f := range p.Flows {
		if f == flow {
			return true
		}
	}
	return false
}

// identity is a downstream identity: the ID token's sub, username and groups, and the
// upstream grant a refresh checks it again with.
type identity struct {
	subject, username string
	groups            []string
	upstream          upstreamGrant
}

// upstreamGrant is what a login got from the upstream that outlives it: Dex's refresh token
// and the client it belongs to.
type upstreamGrant struct {
	clientID, refreshToken string
}

// upstreamClaims are what this server reads from Dex's ID token.
type upstreamClaims struct {
	Issuer        string   `json:"iss"`
	Subject       string   `json:"sub"`
	Email         string   `json:"email"`
	EmailVerified *bool    `json:"email_verified"`
	Groups        []string `json:"groups"`

	grant upstreamGrant // not a claim: the token response's refresh token
}

// identity maps the upstream's claims as an OIDCIdentityProvider with claims {username:
// email, groups: groups} does; the subject names the upstream and this provider.
func (p *idp) identity(c *upstreamClaims) (identity, error) {
	if c.Email == "" {
		return identity{}, errors.New("required claim in upstream ID token missing")
	}
	if c.EmailVerified != nil && !*c.EmailVerified {
		return identity{}, errors.New("email_verified claim in upstream ID token has false value")
	}
	groups := make([]string, 0, len(c.Groups))
	for _, g := range c.Groups {
		groups = append(groups, p.prefix+g)
	}
	return identity{
		subject:  fmt.Sprintf("%s?idpName=%s&sub=%s", c.Issuer, url.QueryEscape(p.Name), url.QueryEscape(c.Subject)),
		username: p.prefix + c.Email,
		groups:   groups,
		upstream: c.grant,
	}, nil
}

// errUnexpectedLDAP is upstream's answer when its LDAP server fails (here: Dex fails).
var errUnexpectedLDAP = &fosite.RFC6749Error{
	ErrorField:       "error",
	DescriptionField: "Unexpected error during upstream LDAP authentication.",
	CodeField:        http.StatusBadGateway,
}

// passwordLogin checks a cli_password login with Dex's password grant and answers with
// upstream's errors for the provider's type.
func (s *Server) passwordLogin(r *http.Request, p *idp, username, password string) (identity, error) {
	claims, err := s.upstream.passwordGrant(r.Context(), p.Type, username, password)
	if err != nil {
		isRefusal := upstreamStatus(err) > 0 && upstreamStatus(err) < 500
		note(r, "upstream password grant: "+describeUpstreamError(err))
		if p.Type == "ldap" {
			if isRefusal {
				return identity{}, fosite.ErrAccessDenied.WithHint("Username/password not accepted by LDAP provider.")
			}
			return identity{}, errUnexpectedLDAP
		}
		// An OIDC provider's refusal is not explained to the client, as upstream.
		return identity{}, fosite.ErrAccessDenied
	}
	id, err := p.identity(claims)
	if err != nil {
		note(r, err.Error())
		return identity{}, fosite.ErrAccessDenied.WithHintf("Reason: %s.", err.Error())
	}
	return id, nil
}

// upstream talks to Dex.
type upstream struct {
	cfg         UpstreamConfig
	redirectURI string

	mu       sync.Mutex
	provider *oidc.Provider
}

// discover reads Dex's discovery document on first use and keeps it: the bed starts Dex and
// this server together, so Dex may not answer yet when this one starts.
func (u *upstream) discover() (*oidc.Provider, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.provider == nil {
		// Not a request's context: the provider keeps it to fetch Dex's keys later.
		p, err := oidc.NewProvider(oidc.ClientContext(context.Background(), u.cfg.HTTPClient), u.cfg.Issuer)
		if err != nil {
			return nil, fmt.Errorf("upstream discovery: %w", err)
		}
		u.provider = p
	}
	return u.provider, nil
}

func (u *upstream) clientContext(ctx context.Context) context.Context {
	return oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, u.cfg.HTTPClient), u.cfg.HTTPClient)
}

// passwordGrant checks a password at Dex with the client of provider type kind: the OIDC
// provider's own confidential client, or the LDAP provider's public one.
func (u *upstream) passwordGrant(ctx context.Context, kind, username, password string) (*upstreamClaims, error) {
	p, err := u.discover()
	if err != nil {
		return nil, err
	}
	oc := u.clientConfig(p, kind)
	oc.Scopes = passwordScopes
	tok, err := oc.PasswordCredentialsToken(u.clientContext(ctx), username, password)
	if err != nil {
		return nil, err
	}
	return u.verify(ctx, p, tok, oc.ClientID, "")
}

// clientConfig is the Dex client a provider of type kind uses, with its way of
// authenticating.
func (u *upstream) clientConfig(p *oidc.Provider, kind string) oauth2.Config {
	if kind == "ldap" {
		oc := oauth2.Config{ClientID: u.cfg.PasswordClientID, Endpoint: p.Endpoint()}
		oc.Endpoint.AuthStyle = oauth2.AuthStyleInParams // a public client: client_id, no secret
		return oc
	}
	return oauth2.Config{ClientID: u.cfg.ClientID, ClientSecret: u.cfg.ClientSecret, Endpoint: p.Endpoint()}
}

func (u *upstream) browserConfig(p *oidc.Provider) oauth2.Config {
	return oauth2.Config{
		ClientID:     u.cfg.ClientID,
		ClientSecret: u.cfg.ClientSecret,
		Endpoint:     p.Endpoint(),
		RedirectURL:  u.redirectURI,
		Scopes:       browserScopes,
	}
}

// authCodeURL is where a browser login goes: Dex's authorize endpoint with this server's own
// state, nonce and PKCE.
func (u *upstream) authCodeURL(state, nonce, verifier string) (string, error) {
	p, err := u.discover()
	if err != nil {
		return "", err
	}
	oc := u.browserConfig(p)
	return oc.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// exchange redeems the code Dex sent to {issuer}/callback.
func (u *upstream) exchange(ctx context.Context, code, nonce, verifier string) (*upstreamClaims, error) {
	p, err := u.discover()
	if err != nil {
		return nil, err
	}
	oc := u.browserConfig(p)
	tok, err := oc.Exchange(u.clientContext(ctx), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, err
	}
	return u.verify(ctx, p, tok, u.cfg.ClientID, nonce)
}

// verify checks Dex's ID token (signature, issuer, audience, expiry, and nonce if given).
func (u *upstream) verify(ctx context.Context, p *oidc.Provider, tok *oauth2.Token, clientID, nonce string) (*upstreamClaims, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, errors.New("the upstream returned no ID token")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: clientID}).Verify(u.clientContext(ctx), raw)
	if err != nil {
		return nil, err
	}
	if nonce != "" && idt.Nonce != nonce {
		return nil, errors.New("the upstream ID token's nonce does not match")
	}
	var c upstreamClaims
	if err := idt.Claims(&c); err != nil {
		return nil, err
	}
	c.grant = upstreamGrant{clientID: clientID, refreshToken: tok.RefreshToken}
	return &c, nil
}

// refresh redeems a login's upstream refresh token with the client that got it, and checks
// the new ID token. Dex rotates refresh tokens: the new one is in the claims' grant.
func (u *upstream) refresh(ctx context.Context, g upstreamGrant) (*upstreamClaims, error) {
	if g.refreshToken == "" {
		return nil, errors.New("the login has no upstream refresh token")
	}
	p, err := u.discover()
	if err != nil {
		return nil, err
	}
	kind := "oidc"
	if g.clientID == u.cfg.PasswordClientID {
		kind = "ldap"
	}
	oc := u.clientConfig(p, kind)
	tok, err := oc.TokenSource(u.clientContext(ctx), &oauth2.Token{RefreshToken: g.refreshToken}).Token()
	if err != nil {
		return nil, err
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = g.refreshToken // a provider that does not rotate keeps the old one valid
	}
	return u.verify(ctx, p, tok, g.clientID, "")
}

// upstreamStatus is the HTTP status of the upstream's token endpoint in err, or 0.
func upstreamStatus(err error) int {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		return re.Response.StatusCode
	}
	return 0
}

// describeUpstreamError is err for the log: only the status when the upstream answered, as
// its body is not ours to log.
func describeUpstreamError(err error) string {
	if code := upstreamStatus(err); code != 0 {
		return fmt.Sprintf("the upstream answered HTTP %d", code)
	}
	return err.Error()
}
