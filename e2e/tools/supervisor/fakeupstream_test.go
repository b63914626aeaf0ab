package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v3"
)

// The fake upstream's one user, and its clients (as the bed's Dex has them).
const (
	aliceEmail     = "alice@example.com"
	alicePassword  = "alice-password-1234"
	aliceSubject   = "CiRhbGljZQ"
	brokenUser     = "broken@example.com" // the upstream fails with HTTP 500 for this user
	upstreamClient = "supervisor"
	upstreamSecret = "upstream-client-secret-5678"
	passwordClient = "pinniped-cli"
)

var aliceGroups = []string{"developers", "admins"}

// fakeUpstream is a small OIDC provider standing in for Dex: discovery, JWKS, an authorize
// endpoint whose user is always logged in already, and a token endpoint with the password
// grant (public client) and the authorization code grant (confidential client, PKCE).
type fakeUpstream struct {
	t           *testing.T
	srv         *httptest.Server
	key         *jose.JSONWebKey
	redirectURI string // the Supervisor's callback

	mu            sync.Mutex
	codes         map[string]fakeCode
	refreshTokens map[string]string // token → the client it was issued to
	// passwordClients are the clients of the password grants, in order.
	passwordClients []string
	email           string // alice's, as the upstream now says it
	groups          []string
	lastAuthorize   url.Values
}

type fakeCode struct {
	challenge, nonce string
	offline          bool
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeUpstream{t: t, key: &jose.JSONWebKey{Key: priv, KeyID: "upstream-key", Algorithm: string(jose.ES256), Use: "sig"}, codes: map[string]fakeCode{},
		refreshTokens: map[string]string{}, email: aliceEmail, groups: aliceGroups}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                f.srv.URL,
			"authorization_endpoint":                f.srv.URL + "/auth",
			"token_endpoint":                        f.srv.URL + "/token",
			"jwks_uri":                              f.srv.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"ES256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{f.key.Public()}})
	})
	mux.HandleFunc("GET /auth", f.authorize)
	mux.HandleFunc("POST /token", f.token)
	f.srv = httptest.NewTLSServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeUpstream) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != upstreamClient || q.Get("redirect_uri") != f.redirectURI || q.Get("response_type") != "code" ||
		q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" {
		http.Error(w, "bad authorize request", http.StatusBadRequest)
		return
	}
	code := rand.Text()
	f.mu.Lock()
	f.codes[code] = fakeCode{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), offline: hasScope(q.Get("scope"), "offline_access")}
	f.lastAuthorize = q
	f.mu.Unlock()
	http.Redirect(w, r, f.redirectURI+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusSeeOther)
}

func (f *fakeUpstream) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	form := r.PostForm
	switch form.Get("grant_type") {
	case "password":
		// The public client in the body, or the confidential one with its secret.
		client := passwordClient
		if id, secret, basic := r.BasicAuth(); basic {
			if id != upstreamClient || secret != upstreamSecret {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
				return
			}
			client = upstreamClient
		} else if form.Get("client_id") != passwordClient {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
			return
		}
		f.mu.Lock()
		f.passwordClients = append(f.passwordClients, client)
		f.mu.Unlock()
		switch {
		case form.Get("username") == brokenUser:
			http.Error(w, "storage unavailable", http.StatusInternalServerError)
		case form.Get("username") != aliceEmail || form.Get("password") != alicePassword:
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "access_denied", "error_description": "Invalid username or password"})
		default:
			f.issue(w, client, "", hasScope(form.Get("scope"), "offline_access"))
		}
	case "authorization_code":
		if id, secret, ok := r.BasicAuth(); !ok || id != upstreamClient || secret != upstreamSecret {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
			return
		}
		f.mu.Lock()
		c, ok := f.codes[form.Get("code")]
		delete(f.codes, form.Get("code"))
		f.mu.Unlock()
		sum := sha256.Sum256([]byte(form.Get("code_verifier")))
		if !ok || form.Get("redirect_uri") != f.redirectURI || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		f.issue(w, upstreamClient, c.nonce, c.offline)
	case "refresh_token":
		// Dex's rules: the client that got the token, which is rotated.
		f.mu.Lock()
		owner, ok := f.refreshTokens[form.Get("refresh_token")]
		delete(f.refreshTokens, form.Get("refresh_token"))
		f.mu.Unlock()
		id, secret, basic := r.BasicAuth()
		switch {
		case !ok:
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "Refresh token is invalid or has already been claimed by another client."})
		case owner == upstreamClient && (!basic || id != upstreamClient || secret != upstreamSecret),
			owner == passwordClient && (basic || form.Get("client_id") != passwordClient):
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		default:
			f.issue(w, owner, "", true)
		}
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
	}
}

// issue answers a token request for alice with an ID token for audience, and a refresh
// token if offline.
func (f *fakeUpstream) issue(w http.ResponseWriter, audience, nonce string, offline bool) {
	now := time.Now()
	f.mu.Lock()
	email, groups := f.email, f.groups
	f.mu.Unlock()
	claims := map[string]any{
		"iss": f.srv.URL, "sub": aliceSubject, "aud": audience, "iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
		"email": email, "email_verified": true, "groups": groups, "name": "Alice",
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: f.key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		f.t.Error(err)
		return
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		f.t.Error(err)
		return
	}
	idToken, _ := jws.CompactSerialize()
	resp := map[string]any{"access_token": "upstream-access-" + rand.Text(), "token_type": "bearer", "expires_in": 600, "id_token": idToken}
	if offline {
		rt := "upstream-refresh-" + rand.Text()
		f.mu.Lock()
		// Dex keeps one refresh token per user and client: a new one ends the last.
		for old, client := range f.refreshTokens {
			if client == audience {
				delete(f.refreshTokens, old)
			}
		}
		f.refreshTokens[rt] = audience
		f.mu.Unlock()
		resp["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, resp)
}

// revokeRefreshTokens forgets every refresh token, as an administrator revoking a user's
// sessions at the upstream would.
func (f *fakeUpstream) revokeRefreshTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.refreshTokens)
}

// setUser changes what the upstream says of alice from now on.
func (f *fakeUpstream) setUser(email string, groups []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.email, f.groups = email, groups
}

func hasScope(scopes, want string) bool {
	return slices.Contains(strings.Fields(scopes), want)
}

func (f *fakeUpstream) lastAuthorizeRequest() url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastAuthorize
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
