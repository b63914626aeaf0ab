package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// cliRedirect is the CLI's redirect_uri when nothing listens (cli_password).
const cliRedirect = "http://127.0.0.1:0/callback"

// defaultScopes are the CLI's, sorted as it sends them.
const defaultScopes = "groups offline_access openid pinniped:request-audience username"

// testBed is a Supervisor served over HTTPS on 127.0.0.1 in front of a fake upstream.
type testBed struct {
	t        *testing.T
	up       *fakeUpstream
	issuer   string
	client   *http.Client // trusts the Supervisor, follows no redirect
	upClient *http.Client // trusts the upstream, follows no redirect (the browser at Dex)
	logs     *syncBuffer
	secrets  []string // codes, tokens, states and passwords seen: none may reach the log
}

func newTestBed(t *testing.T, tweak ...func(*Config)) *testBed {
	t.Helper()
	up := newFakeUpstream(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &testBed{t: t, up: up, issuer: "https://" + ln.Addr().String(), logs: &syncBuffer{}}
	up.redirectURI = b.issuer + "/callback"
	cfg := Config{
		Issuer: b.issuer,
		Upstream: UpstreamConfig{
			Issuer: up.srv.URL, HTTPClient: up.srv.Client(),
			ClientID: upstreamClient, ClientSecret: upstreamSecret, PasswordClientID: passwordClient,
		},
		IDTokenLifetime: 2 * time.Minute, AccessTokenLifetime: 2 * time.Minute, RefreshTokenLifetime: 9 * time.Hour,
		Log: b.logs,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.StartTLS()
	t.Cleanup(srv.Close)
	noRedirects := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	b.client = &http.Client{Transport: srv.Client().Transport, CheckRedirect: noRedirects, Timeout: 10 * time.Second}
	b.upClient = &http.Client{Transport: up.srv.Client().Transport, CheckRedirect: noRedirects, Timeout: 10 * time.Second}
	b.secrets = append(b.secrets, alicePassword, upstreamSecret)
	t.Cleanup(b.checkLogs)
	return b
}

// checkLogs: one line per request with method, path and status, and no secret.
func (b *testBed) checkLogs() {
	logs := b.logs.String()
	line := regexp.MustCompile(`^supervisor: \d{4}/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ /\S* \d{3} \S+( \(.*\))?$`)
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		if l != "" && !line.MatchString(l) {
			b.t.Errorf("unexpected log line: %q", l)
		}
	}
	for _, s := range b.secrets {
		if s != "" && strings.Contains(logs, s) {
			b.t.Errorf("the log holds a secret (%.6s...):\n%s", s, logs)
		}
	}
}

type response struct {
	status int
	header http.Header
	body   string
}

func (r response) location(t *testing.T) *url.URL {
	t.Helper()
	u, err := url.Parse(r.header.Get("Location"))
	if err != nil || r.header.Get("Location") == "" {
		t.Fatalf("no Location (HTTP %d): %s", r.status, r.body)
	}
	return u
}

// jsonError is an OAuth error body.
func (r response) jsonError(t *testing.T) (string, string) {
	t.Helper()
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(r.body), &e) != nil {
		t.Fatalf("not a JSON error (HTTP %d, %s): %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	return e.Error, e.Description
}

func do(t *testing.T, c *http.Client, method, u string, header http.Header, form url.Values) response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(context.Background(), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}
}

// login is one authorize request as the CLI makes it.
type login struct {
	params                 url.Values
	state, nonce, verifier string
}

func (b *testBed) newLogin(idpName, redirectURI string) *login {
	l := &login{state: rand.Text(), nonce: rand.Text(), verifier: oauth2.GenerateVerifier()}
	l.params = url.Values{
		"access_type":           {"offline"},
		"client_id":             {"pinniped-cli"},
		"code_challenge":        {oauth2.S256ChallengeFromVerifier(l.verifier)},
		"code_challenge_method": {"S256"},
		"nonce":                 {l.nonce},
		"state":                 {l.state},
		"redirect_uri":          {redirectURI},
		"response_type":         {"code"},
		"scope":                 {defaultScopes},
		"pinniped_idp_name":     {idpName},
		"pinniped_idp_type":     {map[string]string{"Bed Dex": "oidc", "Bed LDAP": "ldap"}[idpName]},
	}
	b.secrets = append(b.secrets, l.state, l.nonce, l.verifier)
	return l
}

// authorize sends the request; with a username, browserless with the password headers.
func (b *testBed) authorize(l *login, username, password string) response {
	b.t.Helper()
	h := http.Header{}
	if username != "" || password != "" {
		h.Set("Pinniped-Username", username)
		h.Set("Pinniped-Password", password)
		b.secrets = append(b.secrets, password)
	}
	return do(b.t, b.client, http.MethodGet, b.issuer+"/oauth2/authorize?"+l.params.Encode(), h, nil)
}

// passwordCode logs in with cli_password and returns the code from the 302.
func (b *testBed) passwordCode(l *login) string {
	b.t.Helper()
	r := b.authorize(l, aliceEmail, alicePassword)
	loc := r.location(b.t)
	if r.status != http.StatusFound || loc.Query().Get("code") == "" {
		b.t.Fatalf("cli_password: HTTP %d to %s", r.status, loc.Redacted())
	}
	b.secrets = append(b.secrets, loc.Query().Get("code"))
	return loc.Query().Get("code")
}

type tokenResponse struct {
	AccessToken      string `json:"access_token"`
	TokenType        string `json:"token_type"`
	ExpiresIn        int    `json:"expires_in"`
	Scope            string `json:"scope"`
	IDToken          string `json:"id_token"`
	RefreshToken     string `json:"refresh_token"`
	IssuedTokenType  string `json:"issued_token_type"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// token posts to the token endpoint as the CLI: client_id in the body, or Basic
// "pinniped-cli:" (empty password).
func (b *testBed) token(form url.Values, basic bool) (int, tokenResponse) {
	b.t.Helper()
	h := http.Header{}
	if basic {
		h.Set("Authorization", "Basic cGlubmlwZWQtY2xpOg==") // pinniped-cli:
	} else {
		form.Set("client_id", "pinniped-cli")
	}
	r := do(b.t, b.client, http.MethodPost, b.issuer+"/oauth2/token", h, form)
	var tr tokenResponse
	if err := json.Unmarshal([]byte(r.body), &tr); err != nil {
		b.t.Fatalf("token endpoint: HTTP %d: %s", r.status, r.body)
	}
	b.secrets = append(b.secrets, tr.AccessToken, tr.RefreshToken, tr.IDToken)
	return r.status, tr
}

func (b *testBed) redeem(l *login, code string, basic bool) (int, tokenResponse) {
	b.t.Helper()
	return b.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {l.verifier}, "redirect_uri": {l.params.Get("redirect_uri")}}, basic)
}

func (b *testBed) passwordLogin(idpName, scopes string) tokenResponse {
	b.t.Helper()
	l := b.newLogin(idpName, cliRedirect)
	l.params.Set("scope", scopes)
	status, tr := b.redeem(l, b.passwordCode(l), false)
	if status != http.StatusOK {
		b.t.Fatalf("code exchange: HTTP %d %s %s", status, tr.Error, tr.ErrorDescription)
	}
	return tr
}

// verify checks a JWT from the Supervisor with go-oidc, as the CLI does, for audience.
func (b *testBed) verify(raw, audience string) (*oidc.IDToken, map[string]any) {
	b.t.Helper()
	ctx := oidc.ClientContext(context.Background(), b.client)
	p, err := oidc.NewProvider(ctx, b.issuer)
	if err != nil {
		b.t.Fatal(err)
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: audience, SupportedSigningAlgs: []string{oidc.ES256}}).Verify(ctx, raw)
	if err != nil {
		b.t.Fatalf("the token does not verify: %v", err)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		b.t.Fatal(err)
	}
	return idt, claims
}

// about: exp and iat are whole seconds taken at slightly different times.
func about(got, want time.Duration) bool { return got >= want-time.Second && got <= want }

func stringsOf(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, e := range list {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDiscovery(t *testing.T) {
	b := newTestBed(t)
	r := do(t, b.client, http.MethodGet, b.issuer+"/.well-known/openid-configuration", nil, nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("discovery: HTTP %d %s", r.status, r.header.Get("Content-Type"))
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		t.Fatal(err)
	}
	I := b.issuer
	want := map[string]any{
		"issuer":                                I,
		"authorization_endpoint":                I + "/oauth2/authorize",
		"token_endpoint":                        I + "/oauth2/token",
		"jwks_uri":                              I + "/jwks.json",
		"response_types_supported":              []any{"code"},
		"response_modes_supported":              []any{"query", "form_post"},
		"id_token_signing_alg_values_supported": []any{"ES256"},
		"code_challenge_methods_supported":      []any{"S256"},
		"scopes_supported":                      []any{"openid", "offline_access", "pinniped:request-audience", "username", "groups"},
		"discovery.supervisor.pinniped.dev/v1alpha1": map[string]any{
			"pinniped_identity_providers_endpoint": I + "/v1alpha1/pinniped_identity_providers",
		},
	}
	for k, v := range want {
		got, _ := json.Marshal(doc[k])
		exp, _ := json.Marshal(v)
		if string(got) != string(exp) {
			t.Errorf("%s: got %s, want %s", k, got, exp)
		}
	}
	if _, ok := doc["userinfo_endpoint"]; ok {
		t.Error("a userinfo_endpoint is advertised")
	}

	r = do(t, b.client, http.MethodGet, I+"/v1alpha1/pinniped_identity_providers", nil, nil)
	const wantIDPs = `{"pinniped_identity_providers":[{"name":"Bed Dex","type":"oidc","flows":["browser_authcode","cli_password"]},` +
		`{"name":"Bed LDAP","type":"ldap","flows":["cli_password"]}],` +
		`"pinniped_supported_identity_provider_types":[{"type":"activedirectory"},{"type":"github"},{"type":"ldap"},{"type":"oidc"}]}`
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" || r.body != wantIDPs {
		t.Errorf("IDP discovery: HTTP %d %s\n got %s\nwant %s", r.status, r.header.Get("Content-Type"), r.body, wantIDPs)
	}

	r = do(t, b.client, http.MethodGet, I+"/jwks.json", nil, nil)
	var jwks struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal([]byte(r.body), &jwks); err != nil || len(jwks.Keys) != 1 {
		t.Fatalf("JWKS: %v %s", err, r.body)
	}
	k := jwks.Keys[0]
	if k["kty"] != "EC" || k["crv"] != "P-256" || k["alg"] != "ES256" || k["use"] != "sig" || k["kid"] == "" || k["d"] != nil {
		t.Errorf("JWKS key: %v", k)
	}

	if r := do(t, b.client, http.MethodPost, I+"/.well-known/openid-configuration", nil, url.Values{}); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST discovery: HTTP %d", r.status)
	}
}

func TestCLIPassword(t *testing.T) {
	b := newTestBed(t)
	subjects := map[string]bool{}
	for _, tc := range []struct {
		idp, username string
		groups        []string
		basic         bool
	}{
		{"Bed Dex", aliceEmail, aliceGroups, false},
		{"Bed LDAP", "ldap:" + aliceEmail, []string{"ldap:developers", "ldap:admins"}, true},
	} {
		t.Run(tc.idp, func(t *testing.T) {
			l := b.newLogin(tc.idp, cliRedirect)
			r := b.authorize(l, aliceEmail, alicePassword)
			loc := r.location(t)
			q := loc.Query()
			if r.status != http.StatusFound || loc.Scheme != "http" || loc.Host != "127.0.0.1:0" || loc.Path != "/callback" {
				t.Fatalf("want a 302 to the CLI's callback, got HTTP %d to %s", r.status, loc.Redacted())
			}
			granted := strings.Fields(q.Get("scope"))
			slices.Sort(granted)
			if q.Get("code") == "" || q.Get("state") != l.state || strings.Join(granted, " ") != defaultScopes {
				t.Fatalf("redirect parameters: code set %v, state ok %v, scope %q", q.Get("code") != "", q.Get("state") == l.state, q.Get("scope"))
			}
			code := q.Get("code")
			b.secrets = append(b.secrets, code)

			status, tr := b.redeem(l, code, tc.basic)
			if status != http.StatusOK || tr.TokenType != "bearer" || tr.AccessToken == "" || tr.RefreshToken == "" || tr.ExpiresIn < 100 || tr.ExpiresIn > 120 {
				t.Fatalf("code exchange: HTTP %d %+v", status, tr)
			}
			idt, claims := b.verify(tr.IDToken, "pinniped-cli")
			if idt.Issuer != b.issuer || !slices.Equal(idt.Audience, []string{"pinniped-cli"}) || idt.Nonce != l.nonce || claims["azp"] != "pinniped-cli" {
				t.Errorf("ID token: iss %q aud %v nonce ok %v azp %v", idt.Issuer, idt.Audience, idt.Nonce == l.nonce, claims["azp"])
			}
			if err := idt.VerifyAccessToken(tr.AccessToken); err != nil {
				t.Errorf("at_hash: %v", err)
			}
			if claims["username"] != tc.username || !slices.Equal(stringsOf(claims["groups"]), tc.groups) {
				t.Errorf("identity: username %v groups %v, want %s %v", claims["username"], claims["groups"], tc.username, tc.groups)
			}
			if got := idt.Expiry.Sub(idt.IssuedAt); !about(got, 2*time.Minute) {
				t.Errorf("ID token lifetime %s", got)
			}
			if !strings.Contains(idt.Subject, "idpName="+url.QueryEscape(tc.idp)) || subjects[idt.Subject] {
				t.Errorf("subject %q should name the provider and differ between providers", idt.Subject)
			}
			subjects[idt.Subject] = true

			// The code is single-use.
			if status, tr := b.redeem(l, code, tc.basic); status != http.StatusBadRequest || tr.Error != "invalid_grant" {
				t.Errorf("a reused code: HTTP %d %s", status, tr.Error)
			}
		})
	}
}

// TestCLIPasswordNeverAnswersWithAPage: a browserless request that asks
// for form_post still gets its 302 (a CLI reads the Location header; a 200
// page would leave it with nothing), with the code in the query.
func TestCLIPasswordNeverAnswersWithAPage(t *testing.T) {
	b := newTestBed(t)
	l := b.newLogin("Bed LDAP", cliRedirect)
	l.params.Set("response_mode", "form_post")
	r := b.authorize(l, aliceEmail, alicePassword)
	loc := r.location(t)
	if r.status != http.StatusFound || loc.Query().Get("code") == "" || loc.Query().Get("state") != l.state {
		t.Fatalf("want a 302 with the code, got HTTP %d to %s", r.status, loc.Redacted())
	}
	b.secrets = append(b.secrets, loc.Query().Get("code"))
}

func TestCodeExchangeRefusals(t *testing.T) {
	b := newTestBed(t)
	for name, spoil := range map[string]func(url.Values){
		"wrong PKCE verifier":    func(f url.Values) { f.Set("code_verifier", oauth2.GenerateVerifier()) },
		"no PKCE verifier":       func(f url.Values) { f.Del("code_verifier") },
		"another redirect_uri":   func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:1234/callback") },
		"an unknown code":        func(f url.Values) { f.Set("code", "ory_ac_"+rand.Text()) },
		"a code of another port": func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:1/callback") },
	} {
		t.Run(name, func(t *testing.T) {
			l := b.newLogin("Bed LDAP", cliRedirect)
			form := url.Values{"grant_type": {"authorization_code"}, "code": {b.passwordCode(l)}, "code_verifier": {l.verifier}, "redirect_uri": {cliRedirect}}
			spoil(form)
			if status, tr := b.token(form, false); status != http.StatusBadRequest || tr.Error != "invalid_grant" {
				t.Errorf("HTTP %d %s (%s)", status, tr.Error, tr.ErrorDescription)
			}
		})
	}
	t.Run("unknown client", func(t *testing.T) {
		l := b.newLogin("Bed LDAP", cliRedirect)
		form := url.Values{"grant_type": {"authorization_code"}, "code": {b.passwordCode(l)}, "code_verifier": {l.verifier}, "redirect_uri": {cliRedirect}, "client_id": {"someone-else"}}
		r := do(t, b.client, http.MethodPost, b.issuer+"/oauth2/token", nil, form)
		if e, _ := r.jsonError(t); r.status != http.StatusUnauthorized || e != "invalid_client" {
			t.Errorf("HTTP %d %s", r.status, e)
		}
	})
}

func TestCLIPasswordRefused(t *testing.T) {
	b := newTestBed(t)
	const denied = "The resource owner or authorization server denied the request."
	for _, tc := range []struct {
		name, idp, username, password string
		wantError, wantDescEnd        string
	}{
		{"wrong password at the LDAP provider", "Bed LDAP", aliceEmail, "wrong-password-9876", "access_denied", "Username/password not accepted by LDAP provider."},
		{"unknown user at the LDAP provider", "Bed LDAP", "mallory@example.com", "wrong-password-9876", "access_denied", "Username/password not accepted by LDAP provider."},
		{"wrong password at the OIDC provider", "Bed Dex", aliceEmail, "wrong-password-9876", "access_denied", "Maybe the credential or request parameters you are using are limited in scope or otherwise restricted."},
		{"no password", "Bed LDAP", aliceEmail, "", "access_denied", "Missing or blank username or password."},
		{"no username", "Bed Dex", "", "some-password-4321", "access_denied", "Missing or blank username or password."},
		{"the LDAP server fails", "Bed LDAP", brokenUser, "some-password-4321", "error", "Unexpected error during upstream LDAP authentication."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := b.newLogin(tc.idp, cliRedirect)
			h := http.Header{"Pinniped-Password": {tc.password}}
			if tc.username != "" {
				h.Set("Pinniped-Username", tc.username)
			}
			b.secrets = append(b.secrets, tc.password)
			r := do(t, b.client, http.MethodGet, b.issuer+"/oauth2/authorize?"+l.params.Encode(), h, nil)
			loc := r.location(t)
			q := loc.Query()
			if r.status != http.StatusFound || loc.Host != "127.0.0.1:0" || loc.Path != "/callback" || q.Get("code") != "" || q.Get("state") != l.state {
				t.Fatalf("want a 302 with an error to the callback, got HTTP %d to %s", r.status, loc.Redacted())
			}
			desc := q.Get("error_description")
			if q.Get("error") != tc.wantError || !strings.HasSuffix(desc, tc.wantDescEnd) || (tc.wantError == "access_denied" && !strings.HasPrefix(desc, denied)) {
				t.Errorf("got %s %q", q.Get("error"), desc)
			}
		})
	}
}

func TestAuthorizeRefusals(t *testing.T) {
	b := newTestBed(t)
	for _, tc := range []struct {
		name      string
		idp       string
		change    func(url.Values)
		password  bool
		status    int    // the HTTP status
		wantError string // the error, in the redirect or (when jsonBody) the JSON body
		jsonBody  bool
		wantDesc  string // a part of the description
	}{
		{"unknown client", "Bed LDAP", func(q url.Values) { q.Set("client_id", "someone-else") }, true, 401, "invalid_client", true, ""},
		{"redirect to localhost", "Bed LDAP", func(q url.Values) { q.Set("redirect_uri", "http://localhost:1234/callback") }, true, 400, "invalid_request", true, "redirect_uri"},
		{"redirect to another path", "Bed LDAP", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:1234/elsewhere") }, true, 400, "invalid_request", true, "redirect_uri"},
		{"redirect to another host", "Bed Dex", func(q url.Values) { q.Set("redirect_uri", "http://10.0.0.1:1234/callback") }, false, 400, "invalid_request", true, "redirect_uri"},
		{"https redirect", "Bed Dex", func(q url.Values) { q.Set("redirect_uri", "https://127.0.0.1:1234/callback") }, false, 400, "invalid_request", true, "redirect_uri"},
		{"unknown IDP", "Bed LDAP", func(q url.Values) { q.Set("pinniped_idp_name", "Nope") }, true, 400, "invalid_request", true, "did not find IDP with name 'Nope'"},
		{"unknown IDP in a browser", "Bed Dex", func(q url.Values) { q.Set("pinniped_idp_name", "Nope") }, false, 400, "invalid_request", true, "did not find IDP with name 'Nope'"},
		{"no IDP without a browser", "Bed LDAP", func(q url.Values) { q.Del("pinniped_idp_name") }, true, 400, "invalid_request", true, "does not have a default identity provider"},
		{"unknown scope", "Bed LDAP", func(q url.Values) { q.Set("scope", "openid admin") }, true, 302, "invalid_scope", false, ""},
		{"unknown scope in a browser", "Bed Dex", func(q url.Values) { q.Set("scope", "openid admin") }, false, 303, "invalid_scope", false, ""},
		{"no PKCE", "Bed LDAP", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, true, 302, "invalid_request", false, "code_challenge"},
		{"no PKCE in a browser", "Bed Dex", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, false, 303, "invalid_request", false, "code_challenge"},
		{"plain PKCE", "Bed LDAP", func(q url.Values) { q.Set("code_challenge_method", "plain") }, true, 302, "invalid_request", false, ""},
		{"plain PKCE in a browser", "Bed Dex", func(q url.Values) { q.Set("code_challenge_method", "plain") }, false, 303, "invalid_request", false, ""},
		{"short state", "Bed LDAP", func(q url.Values) { q.Set("state", "1234567") }, true, 302, "invalid_state", false, ""},
		{"implicit flow", "Bed Dex", func(q url.Values) { q.Set("response_type", "token") }, false, 303, "unsupported_response_type", false, ""},
		{"prompt=none in a browser", "Bed Dex", func(q url.Values) { q.Set("prompt", "none") }, false, 303, "login_required", false, ""},
		{"browser login at the password-only provider", "Bed LDAP", func(url.Values) {}, false, 303, "access_denied", false, "browser_authcode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := b.newLogin(tc.idp, "http://127.0.0.1:4321/callback")
			tc.change(l.params)
			var r response
			if tc.password {
				r = b.authorize(l, aliceEmail, alicePassword)
			} else {
				r = b.authorize(l, "", "")
			}
			if r.status != tc.status {
				t.Fatalf("HTTP %d, want %d: %s %s", r.status, tc.status, r.header.Get("Location"), r.body)
			}
			var gotError, gotDesc string
			if tc.jsonBody {
				gotError, gotDesc = r.jsonError(t)
			} else {
				loc := r.location(t)
				q := loc.Query()
				if q.Get("error") == "" { // fosite answers an implicit request in the fragment
					q, _ = url.ParseQuery(loc.Fragment)
				}
				if loc.Host != "127.0.0.1:4321" || q.Get("code") != "" || q.Get("state") != l.params.Get("state") {
					t.Fatalf("want the error at the CLI's callback, got %s", loc.Redacted())
				}
				gotError, gotDesc = q.Get("error"), q.Get("error_description")
			}
			if gotError != tc.wantError || !strings.Contains(gotDesc, tc.wantDesc) {
				t.Errorf("got %s %q, want %s ...%s...", gotError, gotDesc, tc.wantError, tc.wantDesc)
			}
		})
	}

	t.Run("no IDP in a browser: the chooser", func(t *testing.T) {
		l := b.newLogin("", "http://127.0.0.1:4321/callback")
		l.params.Del("pinniped_idp_name")
		l.params.Del("pinniped_idp_type")
		r := b.authorize(l, "", "")
		loc := r.location(t)
		if r.status != http.StatusSeeOther || loc.Path != "/choose_identity_provider" || loc.Query().Get("state") != l.state {
			t.Fatalf("HTTP %d to %s", r.status, loc.Redacted())
		}
		page := do(t, b.client, http.MethodGet, loc.String(), nil, nil)
		if page.status != http.StatusOK || !strings.Contains(html.UnescapeString(page.body), "pinniped_idp_name=Bed+Dex&pinniped_idp_type=oidc") || strings.Contains(page.body, "Bed LDAP") {
			t.Errorf("chooser: HTTP %d\n%s", page.status, page.body)
		}
	})

	t.Run("an authorize PUT", func(t *testing.T) {
		l := b.newLogin("Bed Dex", cliRedirect)
		if r := do(t, b.client, http.MethodPut, b.issuer+"/oauth2/authorize?"+l.params.Encode(), nil, nil); r.status != http.StatusMethodNotAllowed {
			t.Errorf("HTTP %d", r.status)
		}
	})
}

func TestBrowserAuthcode(t *testing.T) {
	b := newTestBed(t)
	const redirect = "http://127.0.0.1:4321/callback"

	// browserLogin runs the browser's part: the authorize request, Dex (which logs alice in
	// at once), and the Supervisor's callback.
	browserLogin := func(t *testing.T, l *login) (callbackURL string, r response) {
		t.Helper()
		r = b.authorize(l, "", "")
		toDex := r.location(t)
		if r.status != http.StatusSeeOther || !strings.HasPrefix(toDex.String(), b.up.srv.URL+"/auth?") {
			t.Fatalf("want a 303 to the upstream, got HTTP %d to %s", r.status, toDex.Redacted())
		}
		r = do(t, b.upClient, http.MethodGet, toDex.String(), nil, nil)
		q := b.up.lastAuthorizeRequest()
		if q.Get("client_id") != upstreamClient || q.Get("redirect_uri") != b.issuer+"/callback" ||
			q.Get("scope") != "openid email profile groups offline_access" || q.Get("code_challenge_method") != "S256" ||
			q.Get("nonce") == "" || q.Get("state") == "" || q.Get("state") == l.state {
			t.Fatalf("the upstream authorize request: %v", q)
		}
		back := r.location(t)
		b.secrets = append(b.secrets, back.Query().Get("code"), back.Query().Get("state"))
		return back.String(), do(t, b.client, http.MethodGet, back.String(), nil, nil)
	}

	t.Run("form_post", func(t *testing.T) {
		l := b.newLogin("Bed Dex", redirect)
		l.params.Set("response_mode", "form_post")
		callback, r := browserLogin(t, l)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Fatalf("callback: HTTP %d %s\n%s", r.status, r.header.Get("Content-Type"), r.body)
		}
		m := regexp.MustCompile(`name="encoded_params" value="([^"]*)"`).FindStringSubmatch(r.body)
		if m == nil {
			t.Fatalf("no parameters to post in the page:\n%s", r.body)
		}
		posted, err := url.ParseQuery(html.UnescapeString(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		code := posted.Get("code")
		b.secrets = append(b.secrets, code)
		granted := strings.Fields(posted.Get("scope"))
		slices.Sort(granted)
		if code == "" || posted.Get("state") != l.state || strings.Join(granted, " ") != defaultScopes {
			t.Fatalf("posted parameters: %v", posted)
		}
		for _, want := range []string{
			`name="redirect_uri" value="` + redirect + `"`, // where the script posts them
			"fetch(", "setTimeout(", "2000", // posted at once, the code shown after 2 s
			"Login succeeded", "Finish your login",
			`<code id="manual-auth-code">` + code + `</code>`, // the code to paste
		} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the form_post page lacks %q:\n%s", want, r.body)
			}
		}
		status, tr := b.redeem(l, code, false)
		if status != http.StatusOK {
			t.Fatalf("code exchange: HTTP %d %s %s", status, tr.Error, tr.ErrorDescription)
		}
		idt, claims := b.verify(tr.IDToken, "pinniped-cli")
		if claims["username"] != aliceEmail || !slices.Equal(stringsOf(claims["groups"]), aliceGroups) || idt.Nonce != l.nonce {
			t.Errorf("ID token claims: %v", claims)
		}

		// The upstream state is single-use.
		if r := do(t, b.client, http.MethodGet, callback, nil, nil); r.status != http.StatusBadRequest {
			t.Errorf("a replayed callback: HTTP %d", r.status)
		}
	})

	t.Run("query", func(t *testing.T) {
		l := b.newLogin("Bed Dex", redirect)
		_, r := browserLogin(t, l)
		loc := r.location(t)
		q := loc.Query()
		if r.status != http.StatusSeeOther || loc.Host != "127.0.0.1:4321" || loc.Path != "/callback" || q.Get("code") == "" || q.Get("state") != l.state || q.Get("scope") == "" {
			t.Fatalf("want a 303 with code, scope and state, got HTTP %d to %s", r.status, loc.Redacted())
		}
		b.secrets = append(b.secrets, q.Get("code"))
		status, tr := b.redeem(l, q.Get("code"), true)
		if status != http.StatusOK || tr.IDToken == "" {
			t.Fatalf("code exchange: HTTP %d %s", status, tr.Error)
		}
		// A refresh asks Dex again with the confidential client's refresh token.
		if status, tr := b.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tr.RefreshToken}}, true); status != http.StatusOK {
			t.Fatalf("refresh of a browser login: HTTP %d %s %s", status, tr.Error, tr.ErrorDescription)
		}
	})

	t.Run("callback without code or state", func(t *testing.T) {
		if r := do(t, b.client, http.MethodGet, b.issuer+"/callback?error=access_denied", nil, nil); r.status != http.StatusBadRequest {
			t.Errorf("HTTP %d", r.status)
		}
	})
}

func TestRefresh(t *testing.T) {
	b := newTestBed(t)
	first := b.passwordLogin("Bed LDAP", defaultScopes)
	refresh := func(token string, basic bool) (int, tokenResponse) {
		return b.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}}, basic)
	}

	status, second := refresh(first.RefreshToken, false)
	if status != http.StatusOK || second.RefreshToken == "" || second.RefreshToken == first.RefreshToken || second.AccessToken == first.AccessToken || second.TokenType != "bearer" {
		t.Fatalf("refresh: HTTP %d %s %s", status, second.Error, second.ErrorDescription)
	}
	idt, claims := b.verify(second.IDToken, "pinniped-cli")
	if idt.Nonce != "" || claims["username"] != "ldap:"+aliceEmail || !slices.Equal(idt.Audience, []string{"pinniped-cli"}) {
		t.Errorf("refreshed ID token: nonce %q, claims %v", idt.Nonce, claims)
	}
	if err := idt.VerifyAccessToken(second.AccessToken); err != nil {
		t.Errorf("refreshed at_hash: %v", err)
	}

	// The used refresh token is gone, and the access token that came with it.
	status, tr := refresh(first.RefreshToken, false)
	if status != http.StatusBadRequest || tr.Error != "invalid_grant" || !strings.Contains(tr.ErrorDescription, "malformed or not valid") {
		t.Errorf("a reused refresh token: HTTP %d %s %q", status, tr.Error, tr.ErrorDescription)
	}
	if status, tr := b.exchange(first.AccessToken, "cluster-a"); status != http.StatusUnauthorized {
		t.Errorf("the rotated-out access token: HTTP %d %s", status, tr.Error)
	}
	// The new one goes on rotating.
	if status, third := refresh(second.RefreshToken, true); status != http.StatusOK || third.RefreshToken == second.RefreshToken {
		t.Errorf("second refresh: HTTP %d %s", status, third.Error)
	}

	// No offline_access, no refresh token.
	if tr := b.passwordLogin("Bed LDAP", "openid pinniped:request-audience username groups"); tr.RefreshToken != "" {
		t.Error("a refresh token without offline_access")
	}
}

// TestRefreshChecksTheUpstream: each refresh redeems the login's refresh token at the
// upstream, as upstream's Supervisor does. Revoked there, or the user's subject or username
// changed, the answer is 401 "Error during upstream refresh.", on which the CLI logs in
// again; new groups reach the refreshed ID token.
func TestRefreshChecksTheUpstream(t *testing.T) {
	b := newTestBed(t)
	refresh := func(token string) (int, tokenResponse) {
		t.Helper()
		return b.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}}, false)
	}
	refused := func(t *testing.T, status int, tr tokenResponse) {
		t.Helper()
		if status != http.StatusUnauthorized || tr.Error != "error" || tr.ErrorDescription != "Error during upstream refresh. Upstream refresh failed." || tr.IDToken != "" || tr.RefreshToken != "" {
			t.Errorf("want 401 error %q, got HTTP %d %s %q", "Error during upstream refresh. Upstream refresh failed.", status, tr.Error, tr.ErrorDescription)
		}
	}

	for _, idpName := range []string{"Bed Dex", "Bed LDAP"} {
		t.Run(idpName+": revoked at the upstream", func(t *testing.T) {
			first := b.passwordLogin(idpName, defaultScopes)
			status, second := refresh(first.RefreshToken)
			if status != http.StatusOK {
				t.Fatalf("refresh: HTTP %d %s %s", status, second.Error, second.ErrorDescription)
			}
			b.up.revokeRefreshTokens()
			status, tr := refresh(second.RefreshToken)
			refused(t, status, tr)
			if !strings.Contains(b.logs.String(), "upstream refresh failed: the upstream answered HTTP 400") {
				t.Errorf("the log does not say why:\n%s", b.logs.String())
			}
		})
	}

	t.Run("new groups at the upstream reach the refreshed ID token", func(t *testing.T) {
		t.Cleanup(func() { b.up.setUser(aliceEmail, aliceGroups) })
		first := b.passwordLogin("Bed LDAP", defaultScopes)
		b.up.setUser(aliceEmail, []string{"viewers"})
		status, second := refresh(first.RefreshToken)
		if status != http.StatusOK {
			t.Fatalf("refresh: HTTP %d %s %s", status, second.Error, second.ErrorDescription)
		}
		if _, claims := b.verify(second.IDToken, "pinniped-cli"); fmt.Sprint(claims["groups"]) != "[ldap:viewers]" || claims["username"] != "ldap:"+aliceEmail {
			t.Errorf("refreshed claims: %v", claims)
		}
	})

	t.Run("each provider checks passwords with its own Dex client, so one's login never ends the other's session", func(t *testing.T) {
		b.up.mu.Lock()
		b.up.passwordClients = nil
		b.up.mu.Unlock()
		ldap := b.passwordLogin("Bed LDAP", defaultScopes)
		dex := b.passwordLogin("Bed Dex", defaultScopes)
		b.up.mu.Lock()
		clients := slices.Clone(b.up.passwordClients)
		b.up.mu.Unlock()
		if !slices.Equal(clients, []string{passwordClient, upstreamClient}) {
			t.Errorf("password grants with clients %v, want the LDAP provider's public one, then the OIDC provider's own", clients)
		}
		for name, tr := range map[string]tokenResponse{"Bed LDAP": ldap, "Bed Dex": dex} {
			if status, r := refresh(tr.RefreshToken); status != http.StatusOK {
				t.Errorf("%s's session after the other's login: HTTP %d %s %s", name, status, r.Error, r.ErrorDescription)
			}
		}
		// A second login through the same provider does end the first one's session
		// at Dex (one refresh token per user and client), as it would upstream with Dex.
		first := b.passwordLogin("Bed Dex", defaultScopes)
		b.passwordLogin("Bed Dex", defaultScopes)
		status, tr := refresh(first.RefreshToken)
		refused(t, status, tr)
	})

	t.Run("another username at the upstream", func(t *testing.T) {
		t.Cleanup(func() { b.up.setUser(aliceEmail, aliceGroups) })
		first := b.passwordLogin("Bed Dex", defaultScopes)
		b.up.setUser("mallory@example.com", aliceGroups)
		status, tr := refresh(first.RefreshToken)
		refused(t, status, tr)
	})
}

func (b *testBed) exchange(accessToken, audience string, extra ...string) (int, tokenResponse) {
	b.t.Helper()
	form := url.Values{
		"grant_type":           {grantTypeTokenExchange},
		"subject_token":        {accessToken},
		"subject_token_type":   {"urn:ietf:params:oauth:token-type:access_token"},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:jwt"},
		"audience":             {audience},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		form.Set(extra[i], extra[i+1])
	}
	return b.token(form, false)
}

func TestTokenExchange(t *testing.T) {
	b := newTestBed(t)
	login := b.passwordLogin("Bed Dex", defaultScopes)

	status, tr := b.exchange(login.AccessToken, "cluster-a")
	if status != http.StatusOK || tr.TokenType != "N_A" || tr.IssuedTokenType != "urn:ietf:params:oauth:token-type:jwt" {
		t.Fatalf("exchange: HTTP %d %+v", status, tr)
	}
	idt, claims := b.verify(tr.AccessToken, "cluster-a")
	if !slices.Equal(idt.Audience, []string{"cluster-a"}) || claims["azp"] != "pinniped-cli" || idt.Nonce != "" || claims["at_hash"] != nil {
		t.Errorf("exchanged token: aud %v azp %v nonce %q at_hash %v", idt.Audience, claims["azp"], idt.Nonce, claims["at_hash"])
	}
	if claims["username"] != aliceEmail || !slices.Equal(stringsOf(claims["groups"]), aliceGroups) {
		t.Errorf("exchanged identity: %v %v", claims["username"], claims["groups"])
	}
	_, loginClaims := b.verify(login.IDToken, "pinniped-cli")
	if claims["sub"] != loginClaims["sub"] || !about(idt.Expiry.Sub(idt.IssuedAt), 2*time.Minute) {
		t.Errorf("exchanged token: sub %v (login %v), lifetime %s", claims["sub"], loginClaims["sub"], idt.Expiry.Sub(idt.IssuedAt))
	}

	for _, tc := range []struct {
		name, token, audience string
		extra                 []string
		status                int
		wantError             string
	}{
		{"an audience under .pinniped.dev", login.AccessToken, "client.oauth.pinniped.dev-x", nil, 400, "invalid_request"},
		{"the CLI's own audience", login.AccessToken, "pinniped-cli", nil, 400, "invalid_request"},
		{"no audience", login.AccessToken, "", nil, 400, "invalid_request"},
		{"no subject token", "", "cluster-a", nil, 400, "invalid_request"},
		{"a scope", login.AccessToken, "cluster-a", []string{"scope", "openid"}, 400, "invalid_request"},
		{"a resource", login.AccessToken, "cluster-a", []string{"resource", "https://example.com"}, 400, "invalid_request"},
		{"an actor token", login.AccessToken, "cluster-a", []string{"actor_token", "x"}, 400, "invalid_request"},
		{"an ID token as subject", login.AccessToken, "cluster-a", []string{"subject_token_type", "urn:ietf:params:oauth:token-type:id_token"}, 400, "invalid_request"},
		{"an access token asked for", login.AccessToken, "cluster-a", []string{"requested_token_type", "urn:ietf:params:oauth:token-type:access_token"}, 400, "invalid_request"},
		{"an unknown subject token", "ory_at_" + rand.Text() + "." + rand.Text(), "cluster-a", nil, 401, "request_unauthorized"},
		{"a refresh token as subject", login.RefreshToken, "cluster-a", nil, 401, "request_unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, tr := b.exchange(tc.token, tc.audience, tc.extra...); status != tc.status || tr.Error != tc.wantError {
				t.Errorf("HTTP %d %s %q, want %d %s", status, tr.Error, tr.ErrorDescription, tc.status, tc.wantError)
			}
		})
	}

	for _, scopes := range []string{"groups offline_access openid username", "offline_access pinniped:request-audience username"} {
		t.Run("a login without "+map[bool]string{true: "pinniped:request-audience", false: "openid"}[!strings.Contains(scopes, "pinniped:")], func(t *testing.T) {
			l := b.newLogin("Bed Dex", cliRedirect)
			l.params.Set("scope", scopes)
			status, login := b.redeem(l, b.passwordCode(l), false)
			if status != http.StatusOK {
				t.Fatalf("code exchange: HTTP %d %s", status, login.Error)
			}
			if status, tr := b.exchange(login.AccessToken, "cluster-a"); status != http.StatusForbidden || tr.Error != "access_denied" {
				t.Errorf("HTTP %d %s %q", status, tr.Error, tr.ErrorDescription)
			}
		})
	}

	t.Run("an expired access token", func(t *testing.T) {
		short := newTestBed(t, func(c *Config) { c.AccessTokenLifetime = time.Second })
		login := short.passwordLogin("Bed LDAP", defaultScopes)
		time.Sleep(2100 * time.Millisecond)
		if status, tr := short.exchange(login.AccessToken, "cluster-a"); status != http.StatusUnauthorized || tr.Error != "invalid_token" {
			t.Errorf("HTTP %d %s %q", status, tr.Error, tr.ErrorDescription)
		}
	})
}

// TestClockOffset: with ClockOffset, the ID token's times read a clock that
// far ahead, and its lifetime is unchanged.
func TestClockOffset(t *testing.T) {
	b := newTestBed(t, func(c *Config) { c.ClockOffset = 2 * time.Minute })
	l := b.newLogin("Bed LDAP", cliRedirect)
	code := b.authorize(l, aliceEmail, alicePassword).location(t).Query().Get("code")
	b.secrets = append(b.secrets, code)
	status, tr := b.redeem(l, code, false)
	if status != http.StatusOK {
		t.Fatalf("code exchange: HTTP %d", status)
	}
	idt, _ := b.verify(tr.IDToken, "pinniped-cli")
	if got := time.Until(idt.IssuedAt); !about(got, 2*time.Minute) {
		t.Errorf("iat is %s from now, want 2m", got)
	}
	if got := idt.Expiry.Sub(idt.IssuedAt); !about(got, 2*time.Minute) {
		t.Errorf("ID token lifetime %s", got)
	}
	if _, err := clockOffset("90s"); err != nil {
		t.Error(err)
	}
	if _, err := clockOffset("1.5s"); err == nil {
		t.Error("a fractional offset was accepted")
	}
}

func TestAccessTokenLifetimeEnv(t *testing.T) {
	if d, err := accessTokenLifetime("", 2*time.Minute); err != nil || d != 2*time.Minute {
		t.Errorf("unset: %s %v, want the flag's 2m", d, err)
	}
	if d, err := accessTokenLifetime("40s", 2*time.Minute); err != nil || d != 40*time.Second {
		t.Errorf("40s: %s %v", d, err)
	}
	for _, bad := range []string{"0s", "-1m", "500ms", "soon"} {
		if _, err := accessTokenLifetime(bad, 2*time.Minute); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
