package oidclogin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
	"github.com/pinniped-kit/pinniped/cli/localuser"
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
	// ErrClientAuthentication: the issuer did not accept the client's
	// authentication (invalid_client, unauthorized_client), as when a
	// client that has a secret revokes without it.
	ErrClientAuthentication = errors.New("the issuer did not accept the client's authentication")
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
	// RFC 7009 says 200, but any success is one: some answer 204.
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	switch e.Error {
	case "unsupported_token_type":
		return ErrUnsupportedTokenType
	case "invalid_client", "unauthorized_client":
		return fmt.Errorf("%w (HTTP %d, %s)", ErrClientAuthentication, resp.StatusCode, e.Error)
	}
	if oauthErrorCode.MatchString(e.Error) {
		return fmt.Errorf("the issuer's revocation endpoint answered HTTP %d (%s)", resp.StatusCode, e.Error)
	}
	return fmt.Errorf("the issuer's revocation endpoint answered HTTP %d", resp.StatusCode)
}

// EndSessionForm is the request that ends the person's session at the
// issuer in their browser (OpenID Connect RP-Initiated Logout 1.0): a POST
// to endpoint (which the specification requires an issuer to accept) of
// form, which holds idToken (if any) as id_token_hint and the login's
// client_id. A POST keeps the ID token out of URLs, which end up in a
// browser's history, a proxy's log and an opener's command line; endpoint
// itself carries no token and may be shown.
func (p *Provider) EndSessionForm(idToken string) (endpoint string, form url.Values, err error) {
	endpoint = p.doc.EndSessionEndpoint
	if endpoint == "" {
		return "", nil, ErrNoEndSessionEndpoint
	}
	if err := httpsurl.Check("the issuer's end_session_endpoint", endpoint); err != nil {
		return "", nil, fmt.Errorf("refused to send the ID token there: %w", err)
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", nil, fmt.Errorf("the issuer's end_session_endpoint: %w", err)
	}
	form = url.Values{"client_id": {p.cfg.ClientID}}
	if idToken != "" {
		form.Set("id_token_hint", idToken)
	}
	return u.String(), form, nil
}

// FormPage is a one-shot page on a loopback listener that has the browser
// POST a form: the browser is opened at its URL, which carries no secret
// but an unguessable path, instead of at a URL carrying the form's values.
//
// The path is unguessable, not secret from other local users: the
// opener's and the browser's command lines hold the URL, and every local
// user can read them in /proc while it waits. Whoever fetched the page
// first would hold the ID token and leave the browser a 404. So on Linux
// the page is served only to a connection of this process's own user
// (package localuser), and refused (403, nothing of it) to any other, or to
// one whose user cannot be found: failing closed costs a person a sign-out
// by hand, failing open their ID token.
type FormPage struct {
	// URL is the page's address, for the browser.
	URL string

	srv     *http.Server
	fetched chan struct{}

	mu      sync.Mutex
	refused Refusals
}

// Refusals are the requests for a FormPage it refused as not from this
// process's user.
type Refusals struct {
	// Others counts the requests from other local users; OtherUIDs are
	// those users, each once, the first few (one may ask as often as it
	// likes).
	Others    int
	OtherUIDs []int
	// Unidentified counts the requests whose user could not be found, Why
	// the first one's reason.
	Unidentified int
	Why          error
}

// maxOtherUIDs bounds the users Refusals keeps.
const maxOtherUIDs = 5

// ServeFormPost starts a FormPage that posts form to action. It serves the
// page once, to GET at its URL from this process's user; anything else,
// and any later request, is answered 404, and the same request from
// another user 403. Close it when done.
func ServeFormPost(ctx context.Context, action string, form url.Values) (*FormPage, error) {
	secretPath, err := randomString()
	if err != nil {
		return nil, err
	}
	nonce, err := randomString()
	if err != nil {
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on 127.0.0.1 for the browser: %w", err)
	}
	host := ln.Addr().String()
	fp := &FormPage{URL: "http://" + host + "/" + secretPath, fetched: make(chan struct{})}
	body := formPostPage(action, form, nonce)
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// The Host check turns away a page of another site whose name
		// was made to resolve to 127.0.0.1 (DNS rebinding).
		if r.Method != http.MethodGet || r.URL.Path != "/"+secretPath || r.Host != host {
			http.NotFound(w, r)
			return
		}
		// Only now, for a request that knows the path: finding its
		// user scans the kernel's socket tables, a cost no blind request
		// should be able to cause.
		if err := fromThisUser(r); err != nil {
			fp.refuse(err)
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "pinniped logout serves this page only to the local user who ran it; this request came from another user, or from one that could not be identified.", http.StatusForbidden)
			return
		}
		served := false
		once.Do(func() {
			served = true
			h := w.Header()
			// Only this page's own script runs, the form goes only to
			// https (an issuer may redirect the POST to another of its
			// hosts, and browsers hold redirects to form-action too), and
			// nothing keeps or passes on the page, which holds the ID token.
			h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+nonce+"'; form-action https:; base-uri 'none'; frame-ancestors 'none'")
			h.Set("Cache-Control", "no-store")
			h.Set("Pragma", "no-cache")
			h.Set("Referrer-Policy", "no-referrer")
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("X-Frame-Options", "DENY")
			writeWhole(w, http.StatusOK, body)
			close(fp.fetched)
		})
		if !served {
			http.NotFound(w, r)
		}
	})
	fp.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ConnContext: localuser.ConnContext}
	go func() { _ = fp.srv.Serve(ln) }()
	return fp, nil
}

// fromThisUser is nil when r came from a connection of this process's
// user, or where the system cannot tell; otherwise an *otherUserError, or
// why its user could not be found.
func fromThisUser(r *http.Request) error {
	uid, err := localuser.Of(r)
	switch {
	case errors.Is(err, localuser.ErrUnsupported):
		// macOS and Windows: no socket table names a TCP peer's user
		// (LOCAL_PEERCRED is for Unix sockets, which browsers do not
		// open), so the unguessable path stays the only guard there, as
		// before. A file:// page (0600, in a private directory) was
		// weighed instead and not taken: nothing would tell that the
		// browser loaded it, so logout could not say whether the session
		// was ended, and the file holding the ID token would have to
		// outlive the command for as long as the browser might still open it.
		return nil
	case err != nil:
		return fmt.Errorf("could not find the local user of the connection: %w", err)
	case uid != os.Getuid():
		return &otherUserError{uid}
	}
	return nil
}

type otherUserError struct{ uid int }

func (e *otherUserError) Error() string {
	return fmt.Sprintf("a connection of another local user (uid %d)", e.uid)
}

func (fp *FormPage) refuse(err error) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	var other *otherUserError
	if !errors.As(err, &other) {
		fp.refused.Unidentified++
		if fp.refused.Why == nil {
			fp.refused.Why = err
		}
		return
	}
	fp.refused.Others++
	if len(fp.refused.OtherUIDs) < maxOtherUIDs && !slices.Contains(fp.refused.OtherUIDs, other.uid) {
		fp.refused.OtherUIDs = append(fp.refused.OtherUIDs, other.uid)
	}
}

// Refused is what of the requests for the page was refused so far.
func (fp *FormPage) Refused() Refusals {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	r := fp.refused
	r.OtherUIDs = slices.Clone(r.OtherUIDs)
	return r
}

// Wait returns nil once the page was fetched (on Linux: by this process's
// user), or ctx's error.
func (fp *FormPage) Wait(ctx context.Context) error {
	select {
	case <-fp.fetched:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Close stops the listener. The page was written whole and flushed before
// it counted as fetched, so closing (rather than shutting down, which
// waits for a browser's spare connection) does not cut it off.
func (fp *FormPage) Close() { _ = fp.srv.Close() }

// formPostPage is the page that posts form to action at once (a button
// where scripts do not run), every value HTML-escaped.
func formPostPage(action string, form url.Values, nonce string) string {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="referrer" content="no-referrer"><title>pinniped</title></head><body>`)
	b.WriteString(`<h1>Signing you out</h1><p>Sending you to your identity provider to end your session there.</p>`)
	b.WriteString(`<form id="f" method="post" action="` + html.EscapeString(action) + `">`)
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range form[k] {
			b.WriteString(`<input type="hidden" name="` + html.EscapeString(k) + `" value="` + html.EscapeString(v) + `">`)
		}
	}
	b.WriteString(`<noscript><button type="submit">Continue</button></noscript></form>`)
	b.WriteString(`<script nonce="` + nonce + `">document.getElementById("f").submit();</script></body></html>`)
	return b.String()
}
