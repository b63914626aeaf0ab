package oidclogin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/httpclient"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// What a Pinniped Supervisor adds to OIDC (its list of identity providers
// is read by package discovery): the choice of one in the authorize
// request, and its cli_password flow, in which the CLI sends a username and password in
// headers of the authorize request and reads the code from the redirect
// (upstream Pinniped's protocol, written down in docs/supervisor-protocol.md).

// IsSupervisor reports whether the issuer is a Pinniped Supervisor.
func (p *Provider) IsSupervisor() bool { return p.doc.IsSupervisor() }

// ResolveUpstream checks the identity provider a login names against the
// Supervisor's list and returns the flow to use: the one asked for, else
// the provider's first. Without a name nothing is checked, as upstream:
// the flow asked for, else browser_authcode.
func (p *Provider) ResolveUpstream(ctx context.Context, up config.Upstream) (string, error) {
	if up.Name == "" {
		if up.Flow != "" {
			return up.Flow, nil
		}
		return config.UpstreamFlowBrowser, nil
	}
	list, err := p.doc.IdentityProviders(ctx, p.http)
	if err != nil {
		return "", fmt.Errorf("--upstream-identity-provider-name %q: %w", up.Name, err)
	}
	typ := up.Type
	if typ == "" {
		typ = "oidc"
	}
	if !list.SupportsType(typ) {
		return "", fmt.Errorf("--upstream-identity-provider-type %q: the Supervisor supports %s", typ, strings.Join(list.Types, ", "))
	}
	matches := list.Find(up.Name, typ)
	for _, idp := range matches {
		switch {
		case up.Flow == "" && len(idp.Flows) > 0:
			return idp.Flows[0], nil
		case up.Flow == "":
			return config.UpstreamFlowBrowser, nil
		case slices.Contains(idp.Flows, up.Flow):
			return up.Flow, nil
		}
	}
	if len(matches) > 0 {
		return "", fmt.Errorf("the identity provider %q (%s) offers the flows %s, not %q; set --upstream-identity-provider-flow to one of them",
			up.Name, typ, strings.Join(matches[0].Flows, ", "), up.Flow)
	}
	return "", fmt.Errorf("unable to find upstream identity provider with name %q and type %q at the Supervisor %s. Found these providers: %s",
		up.Name, typ, p.cfg.Issuer, list)
}

// upstreamParams name the chosen identity provider in authorize requests.
func upstreamParams(up config.Upstream) []oauth2.AuthCodeOption {
	if up.Name == "" {
		return nil
	}
	typ := up.Type
	if typ == "" {
		typ = "oidc"
	}
	return []oauth2.AuthCodeOption{oauth2.SetAuthURLParam("pinniped_idp_name", up.Name), oauth2.SetAuthURLParam("pinniped_idp_type", typ)}
}

// ErrPasswordRefused means the issuer (a Supervisor, or the token endpoint's
// password grant) did not accept the username and password.
var ErrPasswordRefused = errors.New("the username or password was not accepted")

// CLIPasswordLogin is the Supervisor's cli_password flow: an authorize
// request carrying the username and password in headers, answered with a
// redirect to the loopback callback that holds the code (nothing listens:
// the redirect is read, not followed), then the usual code exchange with
// PKCE.
func (p *Provider) CLIPasswordLogin(ctx context.Context, up config.Upstream, listenPort int, username, password string) (*sessions.Tokens, error) {
	state, nonce, verifier, err := authorizeSecrets()
	if err != nil {
		return nil, err
	}
	oc := p.oauth
	oc.RedirectURL = fmt.Sprintf("http://127.0.0.1:%d/callback", listenPort)
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce), oauth2.AccessTypeOffline}, upstreamParams(up)...)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, oc.AuthCodeURL(state, opts...), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Pinniped-Username", username)
	req.Header.Set("Pinniped-Password", password)
	client := *p.http
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("authorize with a password at %s: %w", p.cfg.Issuer, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 300 || resp.StatusCode >= 400 {
		return nil, fmt.Errorf("authorize with a password at %s: expected to be redirected, got HTTP %d (is %q an identity provider of this Supervisor that takes passwords?)",
			p.cfg.Issuer, resp.StatusCode, up.Name)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	want, _ := url.Parse(oc.RedirectURL)
	if err != nil || loc.Scheme != "http" || loc.Host != want.Host || loc.Path != "/callback" {
		return nil, fmt.Errorf("authorize with a password at %s: redirected somewhere other than this login's callback", p.cfg.Issuer)
	}
	q := loc.Query()
	if q.Get("state") != state {
		return nil, fmt.Errorf("authorize with a password at %s: the answer belongs to another login (state mismatch)", p.cfg.Issuer)
	}
	code := q.Get("code")
	if code == "" {
		e, d := termsafe.Visible(q.Get("error")), termsafe.Visible(q.Get("error_description"))
		if e == "access_denied" {
			return nil, fmt.Errorf("%w by %s: %s", ErrPasswordRefused, up.Name, d)
		}
		return nil, fmt.Errorf("%w: login failed with code %q: %s", loginview.ErrLoginDenied, e, d)
	}
	tok, err := oc.Exchange(p.ctx(ctx), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, fmt.Errorf("exchange the authorization code: %w", termsafe.Error(httpclient.Unwrap(err)))
	}
	return p.tokens(ctx, tok, nonce)
}
