package main

import (
	"context"
	"html/template"
	"net/http"
	"time"

	"github.com/go-jose/go-jose/v3"
	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/handler/openid"
	"github.com/ory/fosite/storage"
	"github.com/ory/fosite/token/jwt"
)

const (
	cliClientID = "pinniped-cli"

	scopeOpenID          = "openid"
	scopeOfflineAccess   = "offline_access"
	scopeRequestAudience = "pinniped:request-audience"
	scopeUsername        = "username"
	scopeGroups          = "groups"

	grantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
)

// newOAuth2Provider composes fosite as upstream's Supervisor does: authorization code with
// mandatory S256 PKCE, refresh tokens (only with offline_access), OpenID Connect ID tokens
// signed with key (ES256), and our RFC 8693 token exchange. Exact scope matching, and
// redirects only to https or to http on loopback.
func newOAuth2Provider(cfg Config, key *jose.JSONWebKey, hmacSecret []byte, store any) fosite.OAuth2Provider {
	fc := &fosite.Config{
		IDTokenIssuer:         cfg.Issuer,
		TokenURL:              cfg.Issuer + "/oauth2/token",
		AuthorizeCodeLifespan: 10 * time.Minute,
		AccessTokenLifespan:   cfg.AccessTokenLifetime,
		IDTokenLifespan:       cfg.IDTokenLifetime,
		RefreshTokenLifespan:  cfg.RefreshTokenLifetime,
		ScopeStrategy:         fosite.ExactScopeStrategy,
		EnforcePKCE:           true, // and the plain method stays disabled: S256 only
		RefreshTokenScopes:    []string{scopeOfflineAccess},
		MinParameterEntropy:   fosite.MinParameterEntropy, // state and nonce: at least 8 characters
		RedirectSecureChecker: fosite.IsRedirectURISecureStrict,
		FormPostHTMLTemplate:  formPostPage,
		GlobalSecret:          hmacSecret,
	}
	signingKey := func(context.Context) (any, error) { return key, nil }
	return compose.Compose(fc, store,
		&compose.CommonStrategy{
			CoreStrategy:               compose.NewOAuth2HMACStrategy(fc),
			OpenIDConnectTokenStrategy: &openid.DefaultStrategy{Signer: skewedSigner{&jwt.DefaultSigner{GetPrivateKey: signingKey}, cfg.ClockOffset}, Config: fc},
			Signer:                     &jwt.DefaultSigner{GetPrivateKey: signingKey},
		},
		compose.OAuth2AuthorizeExplicitFactory,
		compose.OAuth2RefreshTokenGrantFactory,
		compose.OpenIDConnectExplicitFactory,
		compose.OpenIDConnectRefreshFactory,
		compose.OAuth2PKCEFactory,
		tokenExchangeFactory,
	)
}

// client is upstream's static pinniped-cli client: public (no secret; the token endpoint
// takes Basic "pinniped-cli:" or client_id in the body), any loopback port for
// http://127.0.0.1/callback (fosite matches loopback redirects whatever their port, RFC 8252,
// but only this host and path), and the form_post response mode, which fosite refuses to
// clients that do not list it.
type client struct {
	fosite.DefaultOpenIDConnectClient
}

func (*client) GetResponseModes() []fosite.ResponseModeType {
	return []fosite.ResponseModeType{fosite.ResponseModeDefault, fosite.ResponseModeQuery, fosite.ResponseModeFormPost}
}

func newStore() *storage.MemoryStore {
	s := storage.NewMemoryStore()
	s.Clients = map[string]fosite.Client{cliClientID: &client{fosite.DefaultOpenIDConnectClient{
		DefaultClient: &fosite.DefaultClient{
			ID:            cliClientID,
			Public:        true,
			RedirectURIs:  []string{"http://127.0.0.1/callback"},
			GrantTypes:    fosite.Arguments{"authorization_code", "refresh_token", grantTypeTokenExchange},
			ResponseTypes: fosite.Arguments{"code"},
			Scopes:        fosite.Arguments{scopeOpenID, scopeOfflineAccess, "profile", "email", scopeRequestAudience, scopeUsername, scopeGroups},
		},
		TokenEndpointAuthMethod: "none",
	}}}
	return s
}

// store is fosite's in-memory storage made to behave like upstream's (Kubernetes Secrets) in
// the two ways the CLI can see.
type store struct{ *storage.MemoryStore }

// Upstream saves a serialized copy of each request. The memory store keeps a pointer to a
// session that fosite goes on editing after saving it (the ID token's nonce, aud, exp and
// at_hash are written into the session's claims), which would leak the login's nonce into
// refreshed ID tokens. So save copies.
func (s store) CreateAuthorizeCodeSession(ctx context.Context, sig string, r fosite.Requester) error {
	return s.MemoryStore.CreateAuthorizeCodeSession(ctx, sig, snapshot(r))
}

func (s store) CreatePKCERequestSession(ctx context.Context, sig string, r fosite.Requester) error {
	return s.MemoryStore.CreatePKCERequestSession(ctx, sig, snapshot(r))
}

func (s store) CreateOpenIDConnectSession(ctx context.Context, code string, r fosite.Requester) error {
	return s.MemoryStore.CreateOpenIDConnectSession(ctx, code, snapshot(r))
}

func (s store) CreateAccessTokenSession(ctx context.Context, sig string, r fosite.Requester) error {
	return s.MemoryStore.CreateAccessTokenSession(ctx, sig, snapshot(r))
}

func (s store) CreateRefreshTokenSession(ctx context.Context, sig, accessSig string, r fosite.Requester) error {
	return s.MemoryStore.CreateRefreshTokenSession(ctx, sig, accessSig, snapshot(r))
}

// RotateRefreshToken deletes the used refresh token, as upstream does, so that its reuse is
// refused as unknown (400 invalid_grant "...malformed or not valid."). The memory store
// would only mark it inactive, and fosite would then take a reuse for theft and revoke the
// tokens of the whole login, which upstream does not. The access token issued with it goes.
func (s store) RotateRefreshToken(ctx context.Context, requestID, sig string) error {
	if err := s.DeleteRefreshTokenSession(ctx, sig); err != nil {
		return err
	}
	return s.RevokeAccessToken(ctx, requestID)
}

func snapshot(r fosite.Requester) fosite.Requester {
	keep := make([]string, 0, len(r.GetRequestForm()))
	for k := range r.GetRequestForm() {
		keep = append(keep, k)
	}
	c := r.Sanitize(keep) // a copy of the request that keeps every form value
	if sess := r.GetSession(); sess != nil {
		c.SetSession(sess.Clone())
	}
	return c
}

// discardStore backs the dry run of a browser authorize request: fosite validates the
// request as if issuing a code (PKCE, OpenID Connect checks), and what it would save is
// dropped. The real code is issued when the user comes back from the upstream.
type discardStore struct{ *storage.MemoryStore }

func (discardStore) CreateAuthorizeCodeSession(context.Context, string, fosite.Requester) error {
	return nil
}
func (discardStore) CreatePKCERequestSession(context.Context, string, fosite.Requester) error {
	return nil
}
func (discardStore) CreateOpenIDConnectSession(context.Context, string, fosite.Requester) error {
	return nil
}

// newSession is the downstream session of a login: the ID token's subject, azp, and the
// username and groups claims if those scopes were granted.
func newSession(id identity, ar fosite.Requester) *openid.DefaultSession {
	now := time.Now().UTC()
	extra := map[string]any{"azp": ar.GetClient().GetID()}
	if ar.GetGrantedScopes().Has(scopeUsername) {
		extra["username"] = id.username
	}
	if ar.GetGrantedScopes().Has(scopeGroups) {
		groups := id.groups
		if groups == nil {
			groups = []string{}
		}
		extra["groups"] = groups
	}
	return &openid.DefaultSession{
		Claims:   &jwt.IDTokenClaims{Subject: id.subject, RequestedAt: now, AuthTime: now, Extra: extra},
		Headers:  &jwt.Headers{},
		Subject:  id.subject,
		Username: id.username,
	}
}

// grantScopes approves the scopes upstream approves without asking, when requested, and
// always username and groups for the CLI (upstream's compatibility with CLIs too old to ask
// for them). profile and email may be asked for but are never granted.
func grantScopes(ar fosite.AuthorizeRequester) {
	for _, s := range []string{scopeOpenID, scopeOfflineAccess, scopeRequestAudience, scopeUsername, scopeGroups} {
		if ar.GetRequestedScopes().Has(s) {
			ar.GrantScope(s)
		}
	}
	if ar.GetClient().GetID() == cliClientID {
		ar.GrantScope(scopeUsername)
		ar.GrantScope(scopeGroups)
	}
}

// token is the token endpoint: the authorization code, refresh and token exchange grants,
// all fosite's. A refresh first checks the user again at the upstream (refreshUpstream).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ar, err := s.oauth.NewAccessRequest(ctx, r, &openid.DefaultSession{})
	if err != nil {
		noteFositeError(r, err)
		s.oauth.WriteAccessError(ctx, w, ar, err)
		return
	}
	if ar.GetGrantTypes().ExactOne("refresh_token") {
		if rerr := s.refreshUpstream(ctx, ar); rerr != nil {
			note(r, "upstream refresh failed: "+rerr.DebugField)
			s.oauth.WriteAccessError(ctx, w, ar, rerr)
			return
		}
	}
	resp, err := s.oauth.NewAccessResponse(ctx, ar)
	if err != nil {
		noteFositeError(r, err)
		s.oauth.WriteAccessError(ctx, w, ar, err)
		return
	}
	s.oauth.WriteAccessResponse(ctx, w, ar, resp)
}

// formPostPage answers response_mode=form_post as upstream's page does: a script POSTs the
// parameters (code, scope, state, or an error) to the CLI's redirect_uri and says "Login
// succeeded"; if that fails, or has not finished after 2 seconds, it shows "Finish your
// login" with the code to paste into the CLI. The data is read from the form, never
// templated into the script. fosite fills in RedirURL and Parameters.
var formPostPage = template.Must(template.New("form_post").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<title>Logging in...</title>
<script>
window.onload = () => {
  const show = (id) => {
    for (const e of document.querySelectorAll('.state')) e.hidden = true;
    const e = document.getElementById(id);
    e.hidden = false;
    document.title = e.dataset.title;
  };
  const form = document.forms[0].elements;
  const timeout = setTimeout(() => show('manual'), 2000);
  fetch(form['redirect_uri'].value, {
    method: 'POST',
    mode: 'no-cors',
    headers: {'Content-Type': 'application/x-www-form-urlencoded;charset=UTF-8'},
    body: form['encoded_params'].value,
  }).then(() => { clearTimeout(timeout); show('success'); })
    .catch(() => { clearTimeout(timeout); show('manual'); });
};
</script>
</head>
<body>
<noscript>To finish logging in, paste this authorization code into your command-line session: {{ .Parameters.Get "code" }}</noscript>
<form>
<input type="hidden" name="redirect_uri" value="{{ .RedirURL }}">
<input type="hidden" name="encoded_params" value="{{ .Parameters.Encode }}">
</form>
<div id="success" class="state" data-title="Login succeeded" hidden>
<h1>Login succeeded</h1>
<p>You have logged in. You may close this tab.</p>
</div>
<div id="manual" class="state" data-title="Finish your login" hidden>
<h1>Finish your login</h1>
{{- with .Parameters.Get "code" }}
<p>To finish logging in, paste this authorization code into your command-line session:</p>
<p><code id="manual-auth-code">{{ . }}</code></p>
{{- else }}
<p>The login failed: {{ .Parameters.Get "error" }} {{ .Parameters.Get "error_description" }}</p>
{{- end }}
</div>
</body>
</html>
`))

// skewedSigner signs ID tokens whose times read a clock offset from the
// machine's (Config.ClockOffset).
type skewedSigner struct {
	jwt.Signer
	offset time.Duration
}

func (s skewedSigner) Generate(ctx context.Context, claims jwt.MapClaims, header jwt.Mapper) (string, string, error) {
	if s.offset != 0 {
		shifted := jwt.MapClaims{}
		for k, v := range claims {
			shifted[k] = v
		}
		for _, k := range []string{"iat", "exp", "nbf", "auth_time", "rat"} {
			if sec, ok := shifted[k].(int64); ok {
				shifted[k] = sec + int64(s.offset/time.Second)
			}
		}
		claims = shifted
	}
	return s.Signer.Generate(ctx, claims, header)
}
