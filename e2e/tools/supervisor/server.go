package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v3"
	"github.com/ory/fosite"
)

// Config is what New needs; main fills it from the command line.
type Config struct {
	Issuer   string // https://HOST:PORT[/PATH], the FederationDomain's issuer
	Upstream UpstreamConfig

	IDTokenLifetime, AccessTokenLifetime, RefreshTokenLifetime time.Duration

	// ClockOffset plays a Supervisor whose clock is this far ahead of the
	// machine's (negative: behind) in the times of the ID tokens it signs,
	// the only times another party checks; the bed's daemons share one
	// kernel clock, which a test cannot skew.
	ClockOffset time.Duration

	Log io.Writer // one line per request
}

// Server is the Supervisor's FederationDomain: an http.Handler serving every endpoint
// under the issuer's path.
type Server struct {
	issuer    string
	oauth     fosite.OAuth2Provider // issues codes and tokens
	dryRun    fosite.OAuth2Provider // checks a browser request before the user is sent upstream; keeps nothing
	idps      []*idp
	upstream  *upstream
	pending   *pendingLogins
	logins    *upstreamLogins
	discovery []byte
	idpList   []byte
	jwks      []byte
	mux       *http.ServeMux
	log       *log.Logger
}

// New builds the handler with a fresh signing key and empty storage.
func New(cfg Config) (*Server, error) {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(u.Path, "/") {
		return nil, fmt.Errorf("--issuer %q: want https://HOST:PORT[/PATH] without a trailing slash, query or fragment", cfg.Issuer)
	}
	if cfg.Upstream.HTTPClient == nil {
		cfg.Upstream.HTTPClient = http.DefaultClient
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}

	// The ID token signing key lives as long as the process, as the test bed's does.
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	key := &jose.JSONWebKey{Key: priv, Algorithm: string(jose.ES256), Use: "sig"}
	pub := key.Public()
	thumb, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, err
	}
	key.KeyID = base64.RawURLEncoding.EncodeToString(thumb)
	pub.KeyID = key.KeyID
	hmacSecret := make([]byte, 32)
	if _, err := rand.Read(hmacSecret); err != nil {
		return nil, err
	}

	s := &Server{
		issuer:   cfg.Issuer,
		idps:     identityProviders(),
		upstream: &upstream{cfg: cfg.Upstream, redirectURI: cfg.Issuer + "/callback"},
		pending:  &pendingLogins{m: map[string]*pendingLogin{}},
		logins:   &upstreamLogins{m: map[string]*upstreamLogin{}},
		mux:      http.NewServeMux(),
		log:      log.New(cfg.Log, "supervisor: ", log.LstdFlags),
	}
	s.oauth = newOAuth2Provider(cfg, key, hmacSecret, store{newStore()})
	s.dryRun = newOAuth2Provider(cfg, key, hmacSecret, discardStore{newStore()})

	if s.discovery, err = json.Marshal(discoveryDocument(cfg.Issuer)); err != nil {
		return nil, err
	}
	if s.idpList, err = json.Marshal(idpDiscovery(s.idps)); err != nil {
		return nil, err
	}
	if s.jwks, err = json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}}); err != nil {
		return nil, err
	}

	p := u.Path
	s.mux.HandleFunc("GET "+p+"/.well-known/openid-configuration", s.serveJSON(s.discovery))
	s.mux.HandleFunc("GET "+p+"/jwks.json", s.serveJSON(s.jwks))
	s.mux.HandleFunc("GET "+p+"/v1alpha1/pinniped_identity_providers", s.serveJSON(s.idpList))
	s.mux.HandleFunc(p+"/oauth2/authorize", s.authorize)
	s.mux.HandleFunc(p+"/oauth2/token", s.token)
	s.mux.HandleFunc("GET "+p+"/callback", s.callback)
	s.mux.HandleFunc("GET "+p+"/choose_identity_provider", s.chooseIdentityProvider)
	return s, nil
}

// discoveryDocument is upstream's OIDC discovery document, with the Supervisor's extension
// that tells the CLI where the identity providers are listed. No userinfo_endpoint: the CLI
// would call it.
func discoveryDocument(issuer string) map[string]any {
	return map[string]any{
		"issuer":                                issuer,
		"authorization_endpoint":                issuer + "/oauth2/authorize",
		"token_endpoint":                        issuer + "/oauth2/token",
		"jwks_uri":                              issuer + "/jwks.json",
		"response_types_supported":              []string{"code"},
		"response_modes_supported":              []string{"query", "form_post"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
		"scopes_supported":                      []string{scopeOpenID, scopeOfflineAccess, scopeRequestAudience, scopeUsername, scopeGroups},
		"claims_supported":                      []string{"username", "groups", "additionalClaims"},
		"code_challenge_methods_supported":      []string{"S256"},
		"discovery.supervisor.pinniped.dev/v1alpha1": map[string]string{
			"pinniped_identity_providers_endpoint": issuer + "/v1alpha1/pinniped_identity_providers",
		},
	}
}

func idpDiscovery(idps []*idp) map[string]any {
	return map[string]any{
		"pinniped_identity_providers": idps,
		"pinniped_supported_identity_provider_types": []map[string]string{
			{"type": "activedirectory"}, {"type": "github"}, {"type": "ldap"}, {"type": "oidc"},
		},
	}
}

func (s *Server) serveJSON(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
}

// ServeHTTP logs one line per request: method, path and status, and a reason when one was
// noted. Never the query (it carries codes and states), a header or a body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	var why string
	// Headers every page of upstream's carries; no-referrer also keeps the upstream code in
	// /callback's URL from being sent on to the CLI's listener.
	h := w.Header()
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	s.mux.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), noteKey{}, &why)))
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	line := fmt.Sprintf("%s %s %d %s", r.Method, printable(r.URL.Path), rec.status, time.Since(start).Round(time.Millisecond))
	if why != "" {
		line += " (" + why + ")"
	}
	s.log.Print(line)
}

type noteKey struct{}

// note records why a request failed, for the request's log line. Callers pass fixed text or
// error names, never a value from the request.
func note(r *http.Request, why string) {
	if p, ok := r.Context().Value(noteKey{}).(*string); ok && *p == "" {
		*p = why
	}
}

// noteFositeError notes an OAuth error by its name (its description may quote the request).
func noteFositeError(r *http.Request, err error) {
	var rfc *fosite.RFC6749Error
	if errors.As(err, &rfc) {
		note(r, rfc.ErrorField)
		return
	}
	note(r, "server_error")
}

// printable quotes a path with unusual characters, so a request cannot forge log lines.
func printable(s string) string {
	for _, c := range s {
		if c <= ' ' || c > '~' {
			return strconv.Quote(s)
		}
	}
	return s
}

type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}
