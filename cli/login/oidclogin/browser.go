package oidclogin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/httpclient"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// BrowserOptions tune the browser flow.
type BrowserOptions struct {
	// ListenPort is the loopback port; 0 picks a free one.
	ListenPort int
	// SkipBrowser prints the URL instead of opening a browser.
	SkipBrowser bool
	// SkipListen disables the loopback listener: paste only (e.g. a remote
	// shell whose browser is elsewhere).
	SkipListen bool
	// AllowPaste offers the paste prompt alongside the listener; it needs a
	// person at a terminal.
	AllowPaste bool
	// Upstream names the identity provider behind a Pinniped Supervisor.
	Upstream config.Upstream
	// QuietWhenOpened shows the link only if the browser could not be
	// opened, and then offers no paste prompt (PINNIPED_SKIP_PRINT_LOGIN_URL).
	QuietWhenOpened bool
	// HintAfter is how long to wait for the browser before saying what
	// usually keeps it from coming back; 0 means DefaultHintAfter.
	HintAfter time.Duration
}

// DefaultHintAfter is long enough for a person to type a password and
// answer a second factor, short enough that someone looking at a
// provider's error page is not left waiting for the 15-minute timeout.
const DefaultHintAfter = 90 * time.Second

func randomString() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

type callbackResult struct {
	code string
	err  error
}

// authorizeSecrets are the per-login values that tie an authorization
// code to this login: state (CSRF), nonce (replay) and the PKCE verifier.
func authorizeSecrets() (state, nonce, verifier string, err error) {
	if state, err = randomString(); err != nil {
		return "", "", "", err
	}
	if nonce, err = randomString(); err != nil {
		return "", "", "", err
	}
	return state, nonce, oauth2.GenerateVerifier(), nil
}

// AuthorizeRequest is one browser login's authorization request, and the
// secrets that tie the code it brings back to that login.
type AuthorizeRequest struct {
	URL                    string
	State, Nonce, Verifier string
}

// NewAuthorizeRequest is the authorization request a browser login sends
// to redirect (its loopback callback), with fresh state, nonce and PKCE
// (S256) verifier; up names a Supervisor's identity provider. pinniped
// doctor sends the same request, so that what it checks is what a login
// would send.
func (p *Provider) NewAuthorizeRequest(redirect string, up config.Upstream) (*AuthorizeRequest, error) {
	state, nonce, verifier, err := authorizeSecrets()
	if err != nil {
		return nil, err
	}
	oc := p.oauth
	oc.RedirectURL = redirect
	// x/oauth2 lets an option replace any parameter, so the extra ones
	// must never name one the login sets (authorizeParams drops those).
	opts := append(p.authorizeParams(), oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce), oauth2.AccessTypeOffline)
	opts = append(opts, upstreamParams(up)...)
	if p.FormPost {
		// The code comes back in a POST from the issuer's page, which also
		// shows it for pasting when the loopback callback is out of reach.
		opts = append(opts, oauth2.SetAuthURLParam("response_mode", "form_post"))
	}
	return &AuthorizeRequest{
		URL: oc.AuthCodeURL(state, opts...), State: state, Nonce: nonce, Verifier: verifier,
	}, nil
}

// BrowserLogin runs the authorization code flow with PKCE (S256), state and
// nonce. The code arrives on a 127.0.0.1 listener or is pasted by the
// person, whichever comes first.
func (p *Provider) BrowserLogin(ctx context.Context, ui loginview.Flow, o BrowserOptions) (*sessions.Tokens, error) {
	if o.SkipListen && !o.AllowPaste {
		return nil, errors.New("--skip-listen needs a terminal to paste the code into")
	}
	ln, redirect, err := callbackListener(ctx, ui, o)
	if err != nil {
		return nil, err
	}
	req, err := p.NewAuthorizeRequest(redirect, o.Upstream)
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return nil, err
	}
	results := make(chan callbackResult, 2)
	if ln != nil {
		srv := &http.Server{Handler: callbackHandler(req.State, p.cfg.Issuer, results), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		// Close, not Shutdown, which would wait for a browser's spare
		// connection; the page has gone out before the code is passed on
		// (sendPage).
		defer func() { _ = srv.Close() }()
	}
	oc := p.oauth
	oc.RedirectURL = redirect

	opened := showAndOpen(ui, o, req.URL)
	pasteCtx, stopPaste := context.WithCancel(ctx)
	defer stopPaste()
	if o.AllowPaste && (!o.QuietWhenOpened || !opened) {
		go readPastedCode(pasteCtx, ui, req.State, results)
	}
	code, err := p.waitForCode(ctx, ui, o, redirect, req.URL, results)
	if err != nil {
		return nil, err
	}
	stopPaste()
	ui.Step("exchanging the authorization code")
	tok, err := oc.Exchange(p.ctx(ctx), code, oauth2.VerifierOption(req.Verifier))
	if err != nil {
		return nil, fmt.Errorf("exchange the authorization code: %w", termsafe.Error(httpclient.Unwrap(err)))
	}
	return p.tokens(ctx, tok, req.Nonce)
}

// callbackListener listens on 127.0.0.1 for the redirect with the code, and
// says which redirect URI the login presents. Where the person may paste
// the code instead, a port that cannot be taken is a warning, not an error.
func callbackListener(ctx context.Context, ui loginview.Flow, o BrowserOptions) (net.Listener, string, error) {
	const pasteOnly = "http://127.0.0.1:0/callback" // what paste-only logins present
	if o.SkipListen {
		return nil, pasteOnly, nil
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.ListenPort)))
	if err != nil {
		if !o.AllowPaste {
			return nil, "", fmt.Errorf("listen on 127.0.0.1:%d for the login callback: %w (choose another --listen-port)", o.ListenPort, err)
		}
		ui.Warn(fmt.Sprintf("cannot listen for the callback (%v)", err), "paste the code instead")
		return nil, pasteOnly, nil
	}
	return ln, fmt.Sprintf("http://127.0.0.1:%d/callback", ln.Addr().(*net.TCPAddr).Port), nil
}

// showAndOpen shows the login link (unless told to stay quiet when the
// browser opens) and opens the browser; it reports whether it opened.
func showAndOpen(ui loginview.Flow, o BrowserOptions, authURL string) bool {
	opened := false
	// The link is built from the issuer's authorization_endpoint, which
	// url.Parse does not clean of C1 controls: shown escaped, opened as is.
	shownURL := termsafe.Visible(authURL)
	if !o.QuietWhenOpened {
		ui.ShowLoginURL(shownURL)
	}
	if !o.SkipBrowser && !o.SkipListen {
		if err := ui.OpenBrowser(authURL); err != nil {
			ui.Warn("could not open a browser ("+err.Error()+")", "open the link by hand")
		} else {
			opened = true
		}
	}
	if o.QuietWhenOpened && !opened {
		ui.ShowLoginURL(shownURL)
	}
	return opened
}

// readPastedCode asks for a pasted code (or the whole redirect URL) until
// one reads, and passes it on; it gives up quietly when ctx ends.
func readPastedCode(ctx context.Context, ui loginview.Flow, state string, results chan<- callbackResult) {
	for {
		in, err := ui.PromptCode(ctx, "Or paste the authorization code (or the whole redirect URL) here: ")
		if err != nil {
			return // the listener may still win; ctx decides the timeout
		}
		code, err := codeFromPaste(in, state)
		if errors.Is(err, errBadPaste) {
			ui.Warn(err.Error(), "paste the code again")
			continue
		}
		results <- callbackResult{code: code, err: err}
		return
	}
}

// waitForCode waits for the code from the callback or a paste, answers the
// person's requests meanwhile (open the browser again, switch to the device
// flow), and says what is likely wrong when nothing comes back for a while.
func (p *Provider) waitForCode(ctx context.Context, ui loginview.Flow, o BrowserOptions, redirect, authURL string, results <-chan callbackResult) (string, error) {
	ui.Step("waiting for you to log in")
	hintAfter := o.HintAfter
	if hintAfter <= 0 {
		hintAfter = DefaultHintAfter
	}
	hint := time.NewTimer(hintAfter)
	defer hint.Stop()
	for {
		select {
		case <-hint.C:
			// Nothing comes back when the provider shows an error page
			// instead of redirecting, and it is the provider's page, not
			// this process, that knows why.
			where := "the redirect URI " + redirect
			if strings.HasSuffix(redirect, ":0/callback") {
				where = "the redirect URI http://127.0.0.1/callback"
			}
			ui.Warn(fmt.Sprintf("no answer from the browser after %s. If the provider shows an error page, the usual causes are: "+
				"%s is not registered for client %q at the provider (most providers take http://127.0.0.1/callback for any port; "+
				"others need one exact port, fixed with --listen-port), or that client ID is wrong (--client-id); "+
				"a wrong password is retried on the provider's own page", hintAfter, where, p.oauth.ClientID),
				"fix it at the provider or in the flags, then run the command again; Ctrl-C is safe, nothing is cached until a login finishes")
		case <-ctx.Done():
			return "", fmt.Errorf("login not completed: %w", context.Cause(ctx))
		case r := <-results:
			if r.err != nil {
				return "", r.err
			}
			if r.code != "" {
				return r.code, nil
			}
		case req := <-ui.Requests():
			switch req {
			case loginview.RequestOpenBrowser:
				if err := ui.OpenBrowser(authURL); err != nil {
					ui.Warn("could not open a browser ("+err.Error()+")", "open the link by hand")
				}
			case loginview.RequestDeviceFlow:
				// Checked here, not by the UI: only the provider's discovery
				// document says whether the device flow exists.
				if p.DeviceAuthURL == "" {
					ui.Warn(loginview.ErrNoDeviceFlow.Error(), "finish the login in the browser")
					continue
				}
				return "", ErrSwitchToDevice
			}
		}
	}
}

// deniedError is the identity provider's refusal of a login, its words
// made safe for the terminal.
func deniedError(code, description string) error {
	return fmt.Errorf("%w: %s %s", loginview.ErrLoginDenied, termsafe.Visible(code), termsafe.Visible(description))
}

var errBadPaste = errors.New("that does not look like an authorization code or redirect URL; try again")

// codeFromPaste accepts a bare code or a redirect URL. A URL's state must
// match; a bare code has none to check, but is useless to an attacker
// without this process's PKCE verifier.
func codeFromPaste(in, state string) (string, error) {
	in = strings.TrimSpace(in)
	if in == "" {
		return "", errBadPaste
	}
	if strings.Contains(in, "://") || strings.HasPrefix(in, "/") || strings.Contains(in, "code=") {
		u, err := url.Parse(in)
		if err != nil {
			return "", errBadPaste
		}
		q := u.Query()
		if e := q.Get("error"); e != "" {
			if q.Get("state") != state {
				return "", errBadPaste
			}
			return "", deniedError(e, q.Get("error_description"))
		}
		if q.Get("state") != state {
			return "", fmt.Errorf("%w (its state belongs to a different login)", errBadPaste)
		}
		if c := q.Get("code"); c != "" {
			return c, nil
		}
		return "", errBadPaste
	}
	if strings.ContainsAny(in, " \t") {
		return "", errBadPaste
	}
	return in, nil
}

// callbackHandler accepts the redirect only with the right state. A wrong
// state is refused with 403 but does not end the login: a stray or
// malicious request must not be able to cancel it.
func callbackHandler(state, issuer string, results chan<- callbackResult) http.Handler {
	origin := ""
	if u, err := url.Parse(issuer); err == nil {
		origin = u.Scheme + "://" + u.Host
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/callback", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodOptions:
			// Providers that post the code with JavaScript (form_post pages)
			// need this CORS preflight answered, for the issuer's origin only.
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Allow-Private-Network", "true")
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
			w.WriteHeader(http.StatusNoContent)
			return
		case http.MethodGet, http.MethodPost:
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if r.Form.Get("state") != state {
			http.Error(w, "this login link belongs to a different login attempt", http.StatusForbidden)
			return
		}
		// A body ParseForm left unread (another content type) could make
		// the close that ends the login reset the connection, page and all.
		_, _ = io.Copy(io.Discard, r.Body)
		if e := r.Form.Get("error"); e != "" {
			sendPage(w, http.StatusBadRequest, "Login failed", html.EscapeString(e+": "+r.Form.Get("error_description")))
			select {
			case results <- callbackResult{err: deniedError(e, r.Form.Get("error_description"))}:
			default: // the login has its result already
			}
			return
		}
		code := r.Form.Get("code")
		if code == "" {
			http.Error(w, "no code in the callback", http.StatusBadRequest)
			return
		}
		sendPage(w, http.StatusOK, "Logged in", "You can close this tab and return to your terminal.")
		select {
		case results <- callbackResult{code: code}:
		default: // a second valid callback; the first one won
		}
	})
	return mux
}

// sendPage writes the whole page to the connection before the handler
// passes the result on: the login may end, closing the server, before a
// handler returns, and a page still buffered would be cut off.
func sendPage(w http.ResponseWriter, status int, title, text string) {
	writeWhole(w, status, fmt.Sprintf(page, title, text))
}

// writeWhole writes body as an HTML page, with its length, and flushes it.
func writeWhole(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

const page = `<!DOCTYPE html><html><head><meta charset="utf-8"><title>pinniped</title></head>
<body style="font-family:sans-serif;margin:3em"><h1>%s</h1><p>%s</p></body></html>`
