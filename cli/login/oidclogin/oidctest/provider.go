// Package oidctest is a small in-process OIDC provider for unit tests of the
// login flows: discovery, keys, an authorization endpoint that "logs in" at
// once, and a token endpoint for the code (with PKCE), refresh, password,
// device and token-exchange grants. End-to-end tests use the real Dex.
package oidctest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Provider is the fake. Counters let tests assert which grants ran.
type Provider struct {
	URL      string
	CABundle []byte
	ClientID string
	Now      func() time.Time
	// IDTokenTTL is the lifetime of issued ID tokens (default 1h).
	IDTokenTTL time.Duration

	AuthCodeGrants, RefreshGrants, PasswordGrants, DeviceGrants, ExchangeGrants atomic.Int64
	// FailRefresh makes refresh grants fail, like a revoked session.
	FailRefresh atomic.Bool
	// SingleUseRefresh makes refresh tokens rotate: each works once, as
	// the Pinniped Supervisor's and providers with reuse detection do.
	SingleUseRefresh atomic.Bool

	key *ecdsa.PrivateKey
	mu  sync.Mutex
	// codes maps an issued code to its PKCE challenge and nonce.
	codes map[string]codeInfo
	// DeviceApproved is closed or set by the test to approve device logins.
	deviceApproved atomic.Bool
	// refreshTokens are the refresh tokens not yet used.
	refreshTokens map[string]bool
	// revoked are the tokens revoked at /revoke: a refresh with one fails.
	revoked map[string]bool
	// Revocations counts what /revoke accepted.
	Revocations atomic.Int64

	// IDPs, when set, make the provider play a Pinniped Supervisor with
	// these identity providers: its discovery names them, and authorize
	// requests with Pinniped-Username/Pinniped-Password headers answer
	// with a redirect holding the code (cli_password). Passwords are the
	// username with "-password" appended.
	IDPs []IDP
	// lastIDP is the identity provider the last authorize request named.
	lastIDP atomic.Pointer[string]
	// WrongAtHash makes ID tokens carry an at_hash of another access
	// token; ExchangeTokenType replaces the exchange's N_A token_type.
	WrongAtHash       atomic.Bool
	ExchangeTokenType string
	// Tamper, when set, sees each cli_password answer before it is sent
	// and may change its redirect, or answer itself (returning true): a
	// hostile or broken Supervisor.
	Tamper func(w http.ResponseWriter, redirect *url.URL) bool
	// Hostile, when set, is put into what the provider says that the CLI
	// shows: the device answer's user_code and verification_uri, and a
	// failed refresh's error_description, and a token exchange that fails
	// with it (a provider that tries to drive the user's terminal).
	Hostile string
	// HostileAuthPath, when set, ends the discovery document's
	// authorization_endpoint: text url.Parse lets through (C1 controls,
	// bidi overrides) that the CLI shows as the login link.
	HostileAuthPath string
	// ClientSecret, when set, is required at the token endpoint, as
	// Google requires one of its Desktop app clients.
	ClientSecret string
	// JWTAccessTokens makes access tokens JWTs (audience "api://default"),
	// as an Okta custom authorization server's are; otherwise opaque.
	JWTAccessTokens bool
	// RequireAuthParams must all be in authorize requests (and device
	// authorization requests), with these values.
	RequireAuthParams map[string]string
}

// IDP is one identity provider of the fake Supervisor.
type IDP struct {
	Name, Type string
	Flows      []string
}

type codeInfo struct{ challenge, nonce, redirect string }

// New starts the provider; it stops when the test ends.
func New(t testing.TB) *Provider {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p := &Provider{ClientID: "pinniped-cli", key: key, codes: map[string]codeInfo{}, refreshTokens: map[string]bool{}, revoked: map[string]bool{}, Now: time.Now}
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		doc := map[string]any{
			"issuer": p.URL, "jwks_uri": p.URL + "/keys",
			"authorization_endpoint":           p.URL + "/auth" + p.HostileAuthPath,
			"token_endpoint":                   p.URL + "/token",
			"device_authorization_endpoint":    p.URL + "/device",
			"revocation_endpoint":              p.URL + "/revoke",
			"code_challenge_methods_supported": []string{"S256"},
		}
		if p.IDPs != nil {
			doc["discovery.supervisor.pinniped.dev/v1alpha1"] = map[string]any{"pinniped_identity_providers_endpoint": p.URL + "/v1alpha1/pinniped_identity_providers"}
			doc["response_modes_supported"] = []string{"query", "form_post"}
		}
		writeJSON(w, 200, doc)
	})
	mux.HandleFunc("/v1alpha1/pinniped_identity_providers", func(w http.ResponseWriter, _ *http.Request) {
		list := []map[string]any{}
		for _, idp := range p.IDPs {
			list = append(list, map[string]any{"name": idp.Name, "type": idp.Type, "flows": idp.Flows})
		}
		writeJSON(w, 200, map[string]any{"pinniped_identity_providers": list,
			"pinniped_supported_identity_provider_types": []map[string]string{{"type": "activedirectory"}, {"type": "github"}, {"type": "ldap"}, {"type": "oidc"}}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	mux.HandleFunc("/auth", p.auth)
	mux.HandleFunc("/token", p.token)
	mux.HandleFunc("/revoke", p.revoke)
	mux.HandleFunc("/device", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		for k, v := range p.RequireAuthParams {
			if r.PostForm.Get(k) != v {
				writeJSON(w, 400, map[string]string{"error": "invalid_request", "error_description": "missing parameter " + k})
				return
			}
		}
		writeJSON(w, 200, map[string]any{"device_code": "dev-code", "user_code": "ABCD-EFGH" + p.Hostile,
			"verification_uri": p.URL + "/activate" + p.Hostile, "expires_in": 60, "interval": 1})
	})
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	p.CABundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return p
}

// ApproveDevice lets pending device logins finish.
func (p *Provider) ApproveDevice() { p.deviceApproved.Store(true) }

// auth logs "alice" in at once and redirects back with a code, after
// checking that the client asked for PKCE S256.
func (p *Provider) auth(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "PKCE S256 required", http.StatusBadRequest)
		return
	}
	if q.Get("client_id") != p.ClientID {
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	}
	for k, v := range p.RequireAuthParams {
		if q.Get(k) != v {
			http.Error(w, "missing parameter "+k, http.StatusBadRequest)
			return
		}
	}
	u, _ := url.Parse(q.Get("redirect_uri"))
	v := u.Query()
	v.Set("state", q.Get("state"))
	if user := r.Header.Get("Pinniped-Username"); p.IDPs != nil && (user != "" || r.Header.Get("Pinniped-Password") != "") {
		// cli_password: a redirect the CLI reads, never follows.
		if r.Header.Get("Pinniped-Password") != user+"-password" {
			v.Set("error", "access_denied")
			v.Set("error_description", "The resource owner or authorization server denied the request. Username/password not accepted by LDAP provider.")
			u.RawQuery = v.Encode()
			http.Redirect(w, r, u.String(), http.StatusFound)
			return
		}
	}
	if p.IDPs != nil {
		name := q.Get("pinniped_idp_name")
		p.lastIDP.Store(&name)
	}
	code := randomString()
	p.mu.Lock()
	p.codes[code] = codeInfo{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), redirect: q.Get("redirect_uri")}
	p.mu.Unlock()
	v.Set("code", code)
	u.RawQuery = v.Encode()
	if p.Tamper != nil && r.Header.Get("Pinniped-Username") != "" && p.Tamper(w, u) {
		return
	}
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, 400, map[string]string{"error": "invalid_request"})
		return
	}
	f := r.PostForm
	if p.ClientSecret != "" && f.Get("client_secret") != p.ClientSecret {
		writeJSON(w, 401, map[string]string{"error": "invalid_client", "error_description": "client_secret is missing."})
		return
	}
	nonce := ""
	switch f.Get("grant_type") {
	case "authorization_code":
		p.mu.Lock()
		info, ok := p.codes[f.Get("code")]
		delete(p.codes, f.Get("code"))
		p.mu.Unlock()
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != info.challenge || f.Get("redirect_uri") != info.redirect {
			writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
			return
		}
		nonce = info.nonce
		p.AuthCodeGrants.Add(1)
	case "refresh_token":
		p.mu.Lock()
		unused := p.refreshTokens[f.Get("refresh_token")]
		delete(p.refreshTokens, f.Get("refresh_token"))
		revoked := p.revoked[f.Get("refresh_token")]
		p.mu.Unlock()
		if p.FailRefresh.Load() || f.Get("refresh_token") == "" || revoked || (p.SingleUseRefresh.Load() && !unused) {
			writeJSON(w, 400, map[string]string{"error": "invalid_grant", "error_description": "refresh token revoked, expired or already used" + p.Hostile})
			return
		}
		p.RefreshGrants.Add(1)
	case "password":
		if f.Get("username") != "alice" || f.Get("password") != "password" {
			writeJSON(w, 401, map[string]string{"error": "invalid_grant", "error_description": "wrong password"})
			return
		}
		p.PasswordGrants.Add(1)
	case "urn:ietf:params:oauth:grant-type:device_code":
		if !p.deviceApproved.Load() {
			writeJSON(w, 400, map[string]string{"error": "authorization_pending"})
			return
		}
		p.DeviceGrants.Add(1)
	case "urn:ietf:params:oauth:grant-type:token-exchange":
		p.ExchangeGrants.Add(1)
		if p.Hostile != "" {
			writeJSON(w, 400, map[string]string{"error": "invalid_request", "error_description": "audience refused" + p.Hostile})
			return
		}
		tokenType := "N_A"
		if p.ExchangeTokenType != "" {
			tokenType = p.ExchangeTokenType
		}
		writeJSON(w, 200, map[string]any{"access_token": p.sign(f.Get("audience"), "", ""), "issued_token_type": "urn:ietf:params:oauth:token-type:jwt", "token_type": tokenType})
		return
	default:
		writeJSON(w, 400, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	refresh := "refresh-" + randomString()
	p.mu.Lock()
	p.refreshTokens[refresh] = true
	p.mu.Unlock()
	access := "access-" + randomString()
	if p.JWTAccessTokens {
		access = p.sign("api://default", "", "")
	}
	hashed := access
	if p.WrongAtHash.Load() {
		hashed = "another-access-token"
	}
	writeJSON(w, 200, map[string]any{
		"access_token": access, "token_type": "bearer", "expires_in": 3600,
		"refresh_token": refresh, "id_token": p.sign(p.ClientID, nonce, hashed),
	})
}

// revoke is an RFC 7009 revocation endpoint: the client authenticates as
// at the token endpoint, and any token, known or not, is answered 200.
func (p *Provider) revoke(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeJSON(w, 405, map[string]string{"error": "invalid_request"})
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("token") == "" {
		writeJSON(w, 400, map[string]string{"error": "invalid_request"})
		return
	}
	f := r.PostForm
	if f.Get("client_id") != p.ClientID || (p.ClientSecret != "" && f.Get("client_secret") != p.ClientSecret) {
		writeJSON(w, 401, map[string]string{"error": "invalid_client"})
		return
	}
	p.mu.Lock()
	p.revoked[f.Get("token")] = true
	delete(p.refreshTokens, f.Get("token"))
	p.mu.Unlock()
	p.Revocations.Add(1)
	w.WriteHeader(http.StatusOK)
}

// sign makes an ID token; with an access token, its at_hash (ES256: the
// left half of its SHA-256).
func (p *Provider) sign(aud, nonce, accessToken string) string {
	ttl := p.IDTokenTTL
	if ttl == 0 {
		ttl = time.Hour
	}
	now := p.Now()
	claims := map[string]any{"iss": p.URL, "sub": "alice-id", "aud": aud, "iat": now.Unix(), "exp": now.Add(ttl).Unix(),
		"username": "alice", "email": "alice@example.com", "groups": []string{"devs"}}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		claims["at_hash"] = base64.RawURLEncoding.EncodeToString(sum[:16])
	}
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: p.key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	b, _ := json.Marshal(claims)
	s, _ := signer.Sign(b)
	out, _ := s.CompactSerialize()
	return out
}

func randomString() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// LastIDP is the identity provider the last authorize request named.
func (p *Provider) LastIDP() string {
	if v := p.lastIDP.Load(); v != nil {
		return *v
	}
	return ""
}
