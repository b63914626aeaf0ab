package oidclogin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/pinniped-kit/pinniped/cli/httpclient"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// ExchangeForAudience trades an access token for an ID token whose audience
// is the cluster's (RFC 8693), so the token shown to one cluster is worth
// nothing at another. The result is verified with aud=audience.
func (p *Provider) ExchangeForAudience(ctx context.Context, accessToken, audience string) (string, time.Time, error) {
	form := url.Values{
		"grant_type":           {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":        {accessToken},
		"subject_token_type":   {"urn:ietf:params:oauth:token-type:access_token"},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:jwt"},
		"audience":             {audience},
		"client_id":            {p.cfg.ClientID},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := httpclient.Do(p.http, req)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token exchange for audience %q: %w", audience, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct {
		AccessToken     string `json:"access_token"`
		IssuedTokenType string `json:"issued_token_type"`
		TokenType       string `json:"token_type"`
		Error           string `json:"error"`
		ErrorDesc       string `json:"error_description"`
	}
	_ = json.Unmarshal(body, &out)
	if resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		return "", time.Time{}, fmt.Errorf("token exchange for audience %q: HTTP %d %s %s", audience, resp.StatusCode, termsafe.Visible(out.Error), termsafe.Visible(out.ErrorDesc))
	}
	if out.IssuedTokenType != "urn:ietf:params:oauth:token-type:jwt" {
		return "", time.Time{}, fmt.Errorf("token exchange for audience %q returned a %q, not a JWT", audience, out.IssuedTokenType)
	}
	// The Supervisor's issued token is not an OAuth access token, and it
	// says so with N_A (RFC 8693 2.2.1); upstream's CLI insists on it.
	if p.doc.IsSupervisor() && out.TokenType != "N_A" {
		return "", time.Time{}, fmt.Errorf("token exchange for audience %q: the Supervisor answered token_type %q, not N_A", audience, out.TokenType)
	}
	v := p.oidc.Verifier(&oidc.Config{ClientID: audience, SupportedSigningAlgs: signingAlgs, SkipExpiryCheck: true})
	idt, err := p.verify(ctx, v, out.AccessToken)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token exchange for audience %q: the returned token does not verify: %w", audience, err)
	}
	return out.AccessToken, idt.Expiry, nil
}
