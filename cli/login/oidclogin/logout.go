package oidclogin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
)

// Token type hints of RFC 7009.
const (
	HintRefreshToken = "refresh_token"
	HintAccessToken  = "access_token"
)

var (
	// ErrNoRevocationEndpoint: the discovery document advertises none (a
	// Pinniped Supervisor's never does), so nothing can be revoked.
	ErrNoRevocationEndpoint = errors.New("the issuer has no revocation endpoint")
	// ErrNoEndSessionEndpoint: the discovery document advertises none.
	ErrNoEndSessionEndpoint = errors.New("the issuer has no end_session_endpoint")
	// ErrUnsupportedTokenType: the issuer does not revoke tokens of this
	// type (RFC 7009's unsupported_token_type), usually access tokens that
	// are JWTs and live out their minutes.
	ErrUnsupportedTokenType = errors.New("the issuer does not revoke tokens of this type")
)

// oauthErrorCode is what of an issuer's error response may be shown: the
// registered codes are of this form, and anything else (a description, an
// echo of the request) is the issuer's text, which is not printed.
var oauthErrorCode = regexp.MustCompile(`^[a-z_]{1,64}$`)

// Revoke revokes token at the issuer's revocation endpoint (RFC 7009), the
// client authenticating as its login does (client_id, and the client
// secret when the login has one, in the body). hint is HintRefreshToken or
// HintAccessToken. The token is sent only in the body of a POST to an
// https endpoint; no redirect is followed, since that would resend it.
func (p *Provider) Revoke(ctx context.Context, token, hint string) error {
	endpoint := p.doc.RevocationEndpoint
	if endpoint == "" {
		return ErrNoRevocationEndpoint
	}
	if err := httpsurl.Check("the issuer's revocation_endpoint", endpoint); err != nil {
		return fmt.Errorf("refused to send the token: %w", err)
	}
	form := url.Values{"token": {token}, "token_type_hint": {hint}, "client_id": {p.cfg.ClientID}}
	if p.cfg.ClientSecret != "" {
		form.Set("client_secret", p.cfg.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("the issuer's revocation_endpoint: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	client := *p.http
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("the issuer's revocation endpoint is unreachable: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if e.Error == "unsupported_token_type" {
		return ErrUnsupportedTokenType
	}
	if oauthErrorCode.MatchString(e.Error) {
		return fmt.Errorf("the issuer's revocation endpoint answered HTTP %d (%s)", resp.StatusCode, e.Error)
	}
	return fmt.Errorf("the issuer's revocation endpoint answered HTTP %d", resp.StatusCode)
}

// EndSessionURL is the address that ends the person's session at the
// issuer in their browser (OpenID Connect RP-Initiated Logout 1.0), with
// idToken (if any) as id_token_hint and the login's client_id. The URL
// carries the ID token: it is for the browser, not for a log.
func (p *Provider) EndSessionURL(idToken string) (string, error) {
	endpoint := p.doc.EndSessionEndpoint
	if endpoint == "" {
		return "", ErrNoEndSessionEndpoint
	}
	if err := httpsurl.Check("the issuer's end_session_endpoint", endpoint); err != nil {
		return "", fmt.Errorf("refused to open it: %w", err)
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("the issuer's end_session_endpoint: %w", err)
	}
	q := u.Query()
	if idToken != "" {
		q.Set("id_token_hint", idToken)
	}
	q.Set("client_id", p.cfg.ClientID)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
