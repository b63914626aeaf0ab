package main

import (
	"crypto/rand"
	"html/template"
	"net/http"
	"sync"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/openid"
	"github.com/ory/fosite/token/jwt"
	"golang.org/x/oauth2"
)

// authorize is the authorization endpoint. Either of the Pinniped-Username and
// Pinniped-Password headers makes a request browserless (cli_password): the password is
// checked at once and the answer is a 302 to the redirect_uri, with a code or an error.
// Otherwise (browser_authcode) the browser is sent on to Dex and the request completes at
// /callback.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		http.Error(w, r.Method+" (try GET or POST)", http.StatusMethodNotAllowed)
		return
	}
	browserless := len(r.Header.Values("Pinniped-Username")) > 0 || len(r.Header.Values("Pinniped-Password")) > 0
	if browserless {
		// fosite redirects with 303; upstream keeps answering old CLIs with 302.
		w = found{w}
	}
	if err := r.ParseForm(); err != nil {
		s.authorizeError(w, r, fosite.NewAuthorizeRequest(), fosite.ErrInvalidRequest.WithHint("Unable to parse form params, make sure to send a properly formatted query params or form request body."))
		return
	}
	if browserless {
		// A CLI reads the redirect's Location and never a page: the
		// password flow answers in the query whatever response_mode asks.
		r.Form.Del("response_mode")
	}

	// The identity provider is chosen before anything else is checked, as upstream does.
	name := r.Form.Get("pinniped_idp_name")
	if name == "" && !browserless {
		// Several providers and no legacy default: a browser picks one.
		http.Redirect(w, r, s.issuer+"/choose_identity_provider?"+r.Form.Encode(), http.StatusSeeOther)
		return
	}
	p := s.findIDP(name)
	if p == nil {
		hint := `"pinniped_idp_name" param error: did not find IDP with name '` + name + `'`
		if name == "" {
			hint = `"pinniped_idp_name" param error: identity provider not found: this federation domain does not have a default identity provider`
		}
		s.authorizeError(w, r, fosite.NewAuthorizeRequest(), fosite.ErrInvalidRequest.WithHint(hint))
		return
	}

	// Client, redirect_uri, scopes, response type and mode, state: all fosite's checks.
	// An unknown client or redirect_uri is answered in JSON (400/401), the rest at the
	// redirect_uri.
	ar, err := s.oauth.NewAuthorizeRequest(ctx, r)
	if err != nil {
		s.authorizeError(w, r, ar, err)
		return
	}
	grantScopes(ar)
	if browserless {
		s.authorizeWithPassword(w, r, ar, p)
	} else {
		s.authorizeWithBrowser(w, r, ar, p)
	}
}

func (s *Server) findIDP(name string) *idp {
	for _, p := range s.idps {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (s *Server) authorizeError(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, err error) {
	noteFositeError(r, err)
	s.oauth.WriteAuthorizeError(r.Context(), w, ar, err)
}

func (s *Server) authorizeWithPassword(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, p *idp) {
	username, password := r.Header.Get("Pinniped-Username"), r.Header.Get("Pinniped-Password")
	if username == "" || password == "" {
		s.authorizeError(w, r, ar, fosite.ErrAccessDenied.WithHint("Missing or blank username or password."))
		return
	}
	if !p.offers("cli_password") {
		s.authorizeError(w, r, ar, fosite.ErrAccessDenied.WithHint("Resource owner password credentials grant is not allowed for this upstream provider according to its configuration."))
		return
	}
	id, err := s.passwordLogin(r, p, username, password)
	if err != nil {
		s.authorizeError(w, r, ar, err)
		return
	}
	s.issueCode(w, r, ar, p, id)
}

// issueCode completes an authorize request for a logged-in user: fosite checks PKCE and the
// OpenID Connect parameters, saves the code and answers (a redirect, or the form_post page).
func (s *Server) issueCode(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, p *idp, id identity) {
	resp, err := s.oauth.NewAuthorizeResponse(r.Context(), ar, newSession(id, ar))
	if err != nil {
		s.authorizeError(w, r, ar, err)
		return
	}
	// fosite keeps the authorize request's ID for the code's tokens and every refresh of
	// them, so it names the login when a refresh comes.
	s.logins.put(ar.GetID(), &upstreamLogin{idp: p, identity: id})
	s.oauth.WriteAuthorizeResponse(r.Context(), w, ar, resp)
}

// pendingLogin is a browser authorize request waiting for the user to come back from Dex.
// Upstream carries the request in an encoded state parameter and a CSRF cookie; here the
// state is a random, single-use key to the request kept in memory.
type pendingLogin struct {
	ar              fosite.AuthorizeRequester
	idp             *idp
	nonce, verifier string // of the upstream request
	expires         time.Time
}

type pendingLogins struct {
	mu sync.Mutex
	m  map[string]*pendingLogin
}

// pendingLifetime is upstream's lifetime of its upstream state parameter.
const pendingLifetime = 90 * time.Minute

func (p *pendingLogins) add(l *pendingLogin) string {
	state := rand.Text()
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for k, v := range p.m {
		if now.After(v.expires) {
			delete(p.m, k)
		}
	}
	l.expires = now.Add(pendingLifetime)
	p.m[state] = l
	return state
}

func (p *pendingLogins) take(state string) *pendingLogin {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.m[state]
	delete(p.m, state)
	if l == nil || time.Now().After(l.expires) {
		return nil
	}
	return l
}

func (s *Server) authorizeWithBrowser(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, p *idp) {
	if !p.offers("browser_authcode") {
		s.authorizeError(w, r, ar, fosite.ErrAccessDenied.WithHint("This identity provider does not offer the browser_authcode flow."))
		return
	}
	// A dry run of issuing the code, as upstream does: a request that could never get one
	// (no PKCE, say) is refused now, not after the user has logged in at Dex.
	now := time.Now()
	placeholder := &openid.DefaultSession{Claims: &jwt.IDTokenClaims{Subject: "none", AuthTime: now, RequestedAt: now}, Headers: &jwt.Headers{}}
	if _, err := s.dryRun.NewAuthorizeResponse(r.Context(), ar, placeholder); err != nil {
		s.authorizeError(w, r, ar, err)
		return
	}
	// The user would have to log in at Dex, which prompt=none forbids.
	if ar.GetRequestForm().Get("prompt") == "none" && ar.GetRequestedScopes().Has(scopeOpenID) {
		s.authorizeError(w, r, ar, fosite.ErrLoginRequired)
		return
	}
	l := &pendingLogin{ar: ar, idp: p, nonce: rand.Text(), verifier: oauth2.GenerateVerifier()}
	to, err := s.upstream.authCodeURL(s.pending.add(l), l.nonce, l.verifier)
	if err != nil {
		note(r, err.Error())
		s.authorizeError(w, r, ar, fosite.ErrServerError.WithHint("The upstream identity provider cannot be reached."))
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// callback is where Dex sends the browser back. The upstream code is redeemed, Dex's ID
// token checked, and the original authorize request completed: the form_post page or a 303
// to the CLI's redirect_uri. Failures here are plain HTTP errors, as upstream's.
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	l := s.pending.take(r.FormValue("state"))
	if l == nil {
		note(r, "unknown or expired state")
		http.Error(w, "Bad Request: error reading state", http.StatusBadRequest)
		return
	}
	code := r.FormValue("code")
	if code == "" {
		note(r, "no code from the upstream")
		http.Error(w, "Bad Request: code param not found", http.StatusBadRequest)
		return
	}
	claims, err := s.upstream.exchange(r.Context(), code, l.nonce, l.verifier)
	if err != nil {
		note(r, "upstream code exchange: "+describeUpstreamError(err))
		http.Error(w, "Bad Gateway: error exchanging and validating upstream tokens", http.StatusBadGateway)
		return
	}
	id, err := l.idp.identity(claims)
	if err != nil {
		note(r, err.Error())
		http.Error(w, "Unprocessable Entity: "+err.Error(), http.StatusUnprocessableEntity)
		return
	}
	s.issueCode(w, r, l.ar, l.idp, id)
}

// chooseIdentityProvider is the page a browser lands on when its authorize request names
// no identity provider: a link per provider offering browser logins, back to the authorize
// endpoint with the same parameters and the provider's name.
func (s *Server) chooseIdentityProvider(w http.ResponseWriter, r *http.Request) {
	type choice struct{ Name, URL string }
	var choices []choice
	for _, p := range s.idps {
		if !p.offers("browser_authcode") {
			continue
		}
		q := r.URL.Query()
		q.Set("pinniped_idp_name", p.Name)
		q.Set("pinniped_idp_type", p.Type)
		choices = append(choices, choice{p.Name, s.issuer + "/oauth2/authorize?" + q.Encode()})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = choosePage.Execute(w, choices)
}

var choosePage = template.Must(template.New("choose").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8"><title>Choose an identity provider</title></head>
<body><h1>Choose an identity provider</h1><ul>
{{- range . }}
<li><a href="{{ .URL }}">{{ .Name }}</a></li>
{{- end }}
</ul></body></html>
`))

// found turns fosite's 303 redirects into 302s for browserless requests.
type found struct{ http.ResponseWriter }

func (f found) WriteHeader(code int) {
	if code == http.StatusSeeOther {
		code = http.StatusFound
	}
	f.ResponseWriter.WriteHeader(code)
}
