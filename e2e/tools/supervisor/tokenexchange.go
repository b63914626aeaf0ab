package main

import (
	"context"
	"maps"
	"strings"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/openid"
	"github.com/ory/fosite/token/jwt"
)

const (
	tokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	tokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
)

// tokenExchange is the RFC 8693 grant as upstream's Supervisor offers it, as a fosite token
// endpoint handler (fosite has none): the CLI trades its access token for an ID token whose
// only audience is a cluster's, worthless at any other cluster.
type tokenExchange struct {
	accessTokens oauth2.AccessTokenStrategy
	storage      oauth2.AccessTokenStorage
	idTokens     openid.OpenIDConnectTokenStrategy
	config       fosite.Configurator
}

var _ fosite.TokenEndpointHandler = (*tokenExchange)(nil)

func tokenExchangeFactory(config fosite.Configurator, storage any, strategy any) any {
	return &tokenExchange{
		accessTokens: strategy.(oauth2.AccessTokenStrategy),
		storage:      storage.(oauth2.AccessTokenStorage),
		idTokens:     strategy.(openid.OpenIDConnectTokenStrategy),
		config:       config,
	}
}

// CanSkipClientAuth is false: the client (pinniped-cli, public) must say who it is.
func (*tokenExchange) CanSkipClientAuth(context.Context, fosite.AccessRequester) bool { return false }

func (*tokenExchange) CanHandleTokenEndpointRequest(_ context.Context, r fosite.AccessRequester) bool {
	return r.GetGrantTypes().ExactOne(grantTypeTokenExchange)
}

func (h *tokenExchange) HandleTokenEndpointRequest(ctx context.Context, r fosite.AccessRequester) error {
	if !h.CanHandleTokenEndpointRequest(ctx, r) {
		return fosite.ErrUnknownRequest
	}
	return nil // all checks are in PopulateTokenEndpointResponse, which has the responder
}

func (h *tokenExchange) PopulateTokenEndpointResponse(ctx context.Context, r fosite.AccessRequester, resp fosite.AccessResponder) error {
	if !h.CanHandleTokenEndpointRequest(ctx, r) {
		return fosite.ErrUnknownRequest
	}
	form := r.GetRequestForm()
	audience, err := exchangeAudience(form.Get)
	if err != nil {
		return err
	}

	subjectToken := form.Get("subject_token")
	orig, err := h.storage.GetAccessTokenSession(ctx, h.accessTokens.AccessTokenSignature(ctx, subjectToken), r.GetSession())
	if err != nil {
		return fosite.ErrRequestUnauthorized.WithWrap(err).WithHint("Invalid 'subject_token' parameter value.")
	}
	if err := h.accessTokens.ValidateAccessToken(ctx, orig, subjectToken); err != nil {
		return err // expired: 401 invalid_token
	}
	if orig.GetClient().GetID() != r.GetClient().GetID() {
		return fosite.ErrInvalidGrant.WithHint("The OAuth 2.0 Client ID from this request does not match the one from the authorize request.")
	}
	if !r.GetClient().GetGrantTypes().Has(grantTypeTokenExchange) {
		return fosite.ErrUnauthorizedClient.WithHintf("The OAuth 2.0 Client is not allowed to use token exchange grant %q.", grantTypeTokenExchange)
	}
	for _, scope := range []string{scopeRequestAudience, scopeOpenID} {
		if !orig.GetGrantedScopes().Has(scope) {
			return fosite.ErrAccessDenied.WithHintf("Missing the %q scope.", scope)
		}
	}
	sess, ok := orig.GetSession().(*openid.DefaultSession)
	if !ok {
		return fosite.ErrServerError.WithHint("Invalid session storage.")
	}
	if username, _ := sess.IDTokenClaims().Extra["username"].(string); username == "" {
		return fosite.ErrAccessDenied.WithHintf("No username found in session. Ensure that the %q scope was requested and granted at the authorization endpoint.", scopeUsername)
	}

	token, err := h.mint(ctx, sess, audience)
	if err != nil {
		return err
	}
	resp.SetAccessToken(token)
	resp.SetTokenType("N_A")
	resp.SetExtra("issued_token_type", tokenTypeJWT)
	return nil
}

// exchangeAudience checks the parameters upstream checks and returns the audience asked for.
func exchangeAudience(get func(string) string) (string, error) {
	audience := get("audience")
	switch {
	case audience == "":
		return "", fosite.ErrInvalidRequest.WithHint("Missing 'audience' parameter.")
	case get("subject_token") == "":
		return "", fosite.ErrInvalidRequest.WithHint("Missing 'subject_token' parameter.")
	case get("subject_token_type") != tokenTypeAccessToken:
		return "", fosite.ErrInvalidRequest.WithHintf("Unsupported 'subject_token_type' parameter value, must be %q.", tokenTypeAccessToken)
	case get("requested_token_type") != tokenTypeJWT:
		return "", fosite.ErrInvalidRequest.WithHintf("Unsupported 'requested_token_type' parameter value, must be %q.", tokenTypeJWT)
	}
	for _, p := range []string{"resource", "scope", "actor_token", "actor_token_type"} {
		if get(p) != "" {
			return "", fosite.ErrInvalidRequest.WithHintf("Unsupported parameter %q.", p)
		}
	}
	// pinniped-cli and names under .pinniped.dev are the Supervisor's own clients (and names
	// it keeps for later); any other audience names a cluster.
	if strings.Contains(audience, ".pinniped.dev") {
		return "", fosite.ErrInvalidRequest.WithHint("requested audience cannot contain '.pinniped.dev'")
	}
	if audience == cliClientID {
		return "", fosite.ErrInvalidRequest.WithHintf("requested audience cannot equal '%s'", cliClientID)
	}
	return audience, nil
}

// mint signs an ID token for audience with the identity of the login (sub, username,
// groups, azp) and none of the login's own ID token (nonce, at_hash, aud, exp), with the ID
// token lifetime.
func (h *tokenExchange) mint(ctx context.Context, orig *openid.DefaultSession, audience string) (string, error) {
	c := orig.IDTokenClaims()
	sess := &openid.DefaultSession{
		Claims: &jwt.IDTokenClaims{
			Subject:     c.Subject,
			AuthTime:    c.AuthTime,
			RequestedAt: c.RequestedAt,
			Extra:       maps.Clone(c.Extra),
		},
		Headers: &jwt.Headers{},
	}
	req := fosite.NewAccessRequest(sess)
	req.Client = &fosite.DefaultClient{ID: audience} // fosite makes the ID token's aud the client's ID
	return h.idTokens.GenerateIDToken(ctx, h.config.GetIDTokenLifespan(ctx), req)
}
