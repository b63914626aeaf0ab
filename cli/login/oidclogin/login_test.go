package oidclogin_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/apis/tokentimes"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin/oidctest"
	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
)

// fakeUI records what a person would see, and plays the browser: opening a
// URL follows the provider's redirects to the loopback callback.
type fakeUI struct {
	t        *testing.T
	ca       []byte
	mu       sync.Mutex
	shown    []string
	paste    chan string
	noOpen   bool
	beforeGo func(authURL string) // runs before the browser follows the URL
	requests chan loginview.Request
	// loginURLs records what ShowLoginURL was given.
	loginURLs []string
}

func (u *fakeUI) Step(msg string) { u.mu.Lock(); u.shown = append(u.shown, msg); u.mu.Unlock() }
func (u *fakeUI) Warn(problem, next string) {
	u.mu.Lock()
	u.shown = append(u.shown, problem+": "+next)
	u.mu.Unlock()
}
func (u *fakeUI) ShowLoginURL(url string) {
	u.Step("the login link")
	u.mu.Lock()
	u.loginURLs = append(u.loginURLs, url)
	u.mu.Unlock()
}
func (u *fakeUI) ShowDeviceCode(uri, code, _ string) {
	u.Step("code " + code + " at " + uri)
}

func (u *fakeUI) Requests() <-chan loginview.Request { return u.requests }

func (u *fakeUI) OpenBrowser(authURL string) error {
	if u.noOpen {
		return errors.New("no browser here")
	}
	go func() {
		if u.beforeGo != nil {
			u.beforeGo(authURL)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(u.ca)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		resp, err := c.Get(authURL) //nolint:noctx // test browser
		if err != nil {
			u.t.Errorf("browser: %v", err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	return nil
}

func (u *fakeUI) PromptCode(ctx context.Context, _ string) (string, error) {
	if u.paste == nil {
		<-ctx.Done()
		return "", ctx.Err()
	}
	select {
	case s := <-u.paste:
		return s, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func discover(t *testing.T, p *oidctest.Provider) *oidclogin.Provider {
	t.Helper()
	prov, err := oidclogin.Discover(context.Background(), &config.OIDC{
		Issuer: p.URL, ClientID: p.ClientID, Scopes: []string{"openid", "offline_access"}, CABundle: p.CABundle,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return prov
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestBrowserLogin(t *testing.T) {
	p := oidctest.New(t)
	ui := &fakeUI{t: t, ca: p.CABundle}
	tok, err := discover(t, p).BrowserLogin(ctxT(t), ui, oidclogin.BrowserOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tok.IDToken == "" || tok.RefreshToken == "" || tok.Username != "alice" || len(tok.Groups) != 1 {
		t.Fatalf("tokens %+v", tok)
	}
	if p.AuthCodeGrants.Load() != 1 {
		t.Fatal("no code grant")
	}
}

// TestWrongStateDoesNotAbort: a forged callback is refused with 403, and the
// real one still completes the login.
func TestWrongStateDoesNotAbort(t *testing.T) {
	p := oidctest.New(t)
	ui := &fakeUI{t: t, ca: p.CABundle}
	ui.beforeGo = func(authURL string) {
		u, _ := url.Parse(authURL)
		redirect := u.Query().Get("redirect_uri")
		for _, q := range []string{"?code=evil&state=wrong", "?error=access_denied&state=wrong"} {
			resp, err := http.Get(redirect + q) //nolint:noctx // test
			if err != nil {
				t.Error(err)
				return
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("forged callback %s got %d, want 403", q, resp.StatusCode)
			}
		}
	}
	if _, err := discover(t, p).BrowserLogin(ctxT(t), ui, oidclogin.BrowserOptions{}); err != nil {
		t.Fatalf("login aborted by a forged callback: %v", err)
	}
}

// TestPastedRedirectURL: with no listener (remote shell), the person pastes
// the URL the browser failed to reach.
func TestPastedRedirectURL(t *testing.T) {
	p := oidctest.New(t)
	ui := &fakeUI{t: t, ca: p.CABundle, paste: make(chan string, 2)}
	prov := discover(t, p)
	ui.noOpen = true
	done := make(chan error, 1)
	var captured string
	var mu sync.Mutex
	ui2 := &capturingUI{fakeUI: ui, onURL: func(s string) { mu.Lock(); captured = s; mu.Unlock() }}
	go func() {
		_, err := prov.BrowserLogin(ctxT(t), ui2, oidclogin.BrowserOptions{SkipListen: true, AllowPaste: true})
		done <- err
	}()
	var authURL string
	for authURL == "" {
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		authURL = captured
		mu.Unlock()
	}
	// What the person does: open the login URL elsewhere, and copy the
	// address bar of the redirect that could not reach this machine.
	redirect := followWithoutCallback(t, p, authURL)
	ui.paste <- "garbage with spaces"
	ui.paste <- redirect
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestBusyListenPort: a --listen-port that is taken ends a login that
// cannot paste, with the flag to change; one that can paste goes on with
// the paste-only redirect, and the pasted URL's state is this login's.
func TestBusyListenPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	port := busy.Addr().(*net.TCPAddr).Port
	p := oidctest.New(t)
	prov := discover(t, p)

	_, err = prov.BrowserLogin(ctxT(t), &fakeUI{t: t, ca: p.CABundle}, oidclogin.BrowserOptions{ListenPort: port})
	if err == nil || !strings.Contains(err.Error(), "--listen-port") {
		t.Fatalf("a busy port without paste: %v", err)
	}

	ui := &fakeUI{t: t, ca: p.CABundle, paste: make(chan string, 1)}
	ui.noOpen = true
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		_, err := prov.BrowserLogin(ctxT(t), &capturingUI{fakeUI: ui, onURL: func(s string) { urls <- s }}, oidclogin.BrowserOptions{ListenPort: port, AllowPaste: true})
		done <- err
	}()
	ui.paste <- followWithoutCallback(t, p, <-urls)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type capturingUI struct {
	*fakeUI
	onURL func(string)
}

func (c *capturingUI) ShowLoginURL(u string) { c.onURL(u) }

func followWithoutCallback(t *testing.T, p *oidctest.Provider, authURL string) string {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CABundle)
	c := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := c.Get(authURL) //nolint:noctx // test
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "http://127.0.0.1:0/callback") {
		t.Fatalf("paste-only logins should redirect to port 0, got %q", loc)
	}
	return loc
}

func TestDeviceLogin(t *testing.T) {
	p := oidctest.New(t)
	ui := &fakeUI{t: t, ca: p.CABundle}
	go func() { time.Sleep(300 * time.Millisecond); p.ApproveDevice() }()
	tok, err := discover(t, p).DeviceLogin(ctxT(t), ui)
	if err != nil {
		t.Fatal(err)
	}
	if tok.IDToken == "" || p.DeviceGrants.Load() != 1 {
		t.Fatalf("%+v", tok)
	}
	if !strings.Contains(strings.Join(ui.shown, "\n"), "ABCD-EFGH") {
		t.Fatal("the user code was not shown")
	}
}

func TestPasswordAndRefreshAndExchange(t *testing.T) {
	p := oidctest.New(t)
	prov := discover(t, p)
	ctx := ctxT(t)
	if _, err := prov.PasswordGrant(ctx, "alice", "wrong"); err == nil {
		t.Fatal("wrong password accepted")
	}
	tok, err := prov.PasswordGrant(ctx, "alice", "password")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := prov.Refresh(ctx, tok.RefreshToken)
	if err != nil || fresh.IDToken == "" || fresh.RefreshToken == "" {
		t.Fatalf("refresh: %+v %v", fresh, err)
	}
	p.FailRefresh.Store(true)
	if _, err := prov.Refresh(ctx, tok.RefreshToken); err == nil {
		t.Fatal("revoked refresh accepted")
	}
	jwtTok, exp, err := prov.ExchangeForAudience(ctx, tok.AccessToken, "cluster-b")
	if err != nil || jwtTok == "" || exp.IsZero() {
		t.Fatalf("exchange: %v", err)
	}
}

// TestTokenChecks: an ID token whose at_hash names another access token is
// refused, and a Supervisor's exchange must answer token_type N_A.
func TestTokenChecks(t *testing.T) {
	p := oidctest.New(t)
	p.WrongAtHash.Store(true)
	if _, err := discover(t, p).PasswordGrant(ctxT(t), "alice", "password"); err == nil || !strings.Contains(err.Error(), "at_hash") {
		t.Fatalf("a mismatched at_hash: %v", err)
	}

	p = oidctest.New(t)
	p.IDPs = []oidctest.IDP{{Name: "ldap", Type: "ldap", Flows: []string{config.UpstreamFlowPassword}}}
	p.ExchangeTokenType = "Bearer"
	prov := discover(t, p)
	if _, _, err := prov.ExchangeForAudience(ctxT(t), "some-access-token", "cluster-b"); err == nil || !strings.Contains(err.Error(), "not N_A") {
		t.Fatalf("a Supervisor's exchange without N_A: %v", err)
	}
}

func TestRefusesHTTPIssuer(t *testing.T) {
	_, err := oidclogin.Discover(context.Background(), &config.OIDC{Issuer: "http://dex.example.com", ClientID: "x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("want an https error, got %v", err)
	}
}

// TestBrowserRequests: "open the browser again" opens the same login link;
// "device flow" ends the browser flow with ErrSwitchToDevice, or is refused
// with a message when the provider has no device endpoint.
func TestBrowserRequests(t *testing.T) {
	t.Run("open again", func(t *testing.T) {
		p := oidctest.New(t)
		ui := &fakeUI{t: t, ca: p.CABundle, requests: make(chan loginview.Request, 1)}
		ui.requests <- loginview.RequestOpenBrowser
		// SkipBrowser: only the request opens the browser.
		if _, err := discover(t, p).BrowserLogin(ctxT(t), ui, oidclogin.BrowserOptions{SkipBrowser: true}); err != nil {
			t.Fatal(err)
		}
		if p.AuthCodeGrants.Load() != 1 {
			t.Fatal("no code grant after opening the browser again")
		}
	})
	t.Run("switch to device", func(t *testing.T) {
		p := oidctest.New(t)
		ui := &fakeUI{t: t, ca: p.CABundle, noOpen: true, requests: make(chan loginview.Request, 1)}
		ui.requests <- loginview.RequestDeviceFlow
		_, err := discover(t, p).BrowserLogin(ctxT(t), ui, oidclogin.BrowserOptions{})
		if !errors.Is(err, oidclogin.ErrSwitchToDevice) {
			t.Fatalf("want ErrSwitchToDevice, got %v", err)
		}
	})
	t.Run("an error page at the provider", func(t *testing.T) {
		// The browser never comes back (as when the provider shows an error
		// page): after HintAfter the usual causes are shown, and the login
		// keeps waiting.
		p := oidctest.New(t)
		ui := &fakeUI{t: t, ca: p.CABundle, noOpen: true}
		ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
		defer cancel()
		_, err := discover(t, p).BrowserLogin(ctx, ui, oidclogin.BrowserOptions{HintAfter: 100 * time.Millisecond})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the browser flow should keep waiting, got %v", err)
		}
		ui.mu.Lock()
		defer ui.mu.Unlock()
		shown := strings.Join(ui.shown, "\n")
		for _, want := range []string{"http://127.0.0.1:", "/callback is not registered", "--client-id", "Ctrl-C is safe"} {
			if !strings.Contains(shown, want) {
				t.Errorf("no %q in:\n%s", want, shown)
			}
		}
	})
	t.Run("no device endpoint", func(t *testing.T) {
		p := oidctest.New(t)
		ui := &fakeUI{t: t, ca: p.CABundle, noOpen: true, requests: make(chan loginview.Request, 2)}
		prov := discover(t, p)
		prov.DeviceAuthURL = ""
		ui.requests <- loginview.RequestDeviceFlow
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := prov.BrowserLogin(ctx, ui, oidclogin.BrowserOptions{})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the browser flow should keep waiting, got %v", err)
		}
		ui.mu.Lock()
		defer ui.mu.Unlock()
		if !strings.Contains(strings.Join(ui.shown, "\n"), "does not support the device flow") {
			t.Fatalf("no explanation shown: %q", ui.shown)
		}
	})
}

// recordingUI records the pages the device flow opens.
type recordingUI struct {
	*fakeUI
	opened chan string
}

func (r *recordingUI) OpenBrowser(u string) error { r.opened <- u; return nil }

// TestDeviceFlowOpensVerificationPage: during the device flow, "open the
// browser" opens the verification page with the code filled in.
func TestDeviceFlowOpensVerificationPage(t *testing.T) {
	p := oidctest.New(t)
	ui := &recordingUI{fakeUI: &fakeUI{t: t, ca: p.CABundle, requests: make(chan loginview.Request, 1)}, opened: make(chan string, 1)}
	ui.requests <- loginview.RequestOpenBrowser
	go func() {
		<-ui.opened
		p.ApproveDevice()
	}()
	if _, err := discover(t, p).DeviceLogin(ctxT(t), ui); err != nil {
		t.Fatal(err)
	}
}

// TestQuietLoginURL (PINNIPED_SKIP_PRINT_LOGIN_URL): the link is shown only
// when no browser could be opened.
func TestQuietLoginURL(t *testing.T) {
	p := oidctest.New(t)
	ui := &fakeUI{t: t, ca: p.CABundle}
	if _, err := discover(t, p).BrowserLogin(ctxT(t), ui, oidclogin.BrowserOptions{QuietWhenOpened: true}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ui.shown, "the login link") {
		t.Fatalf("the link was shown though the browser opened: %v", ui.shown)
	}
	ui = &fakeUI{t: t, ca: p.CABundle, noOpen: true}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, _ = discover(t, p).BrowserLogin(ctx, ui, oidclogin.BrowserOptions{QuietWhenOpened: true})
	if !slices.Contains(ui.shown, "the login link") {
		t.Fatalf("no browser, and no link either: %v", ui.shown)
	}
}

// TestIssuerClockSkew: with the issuer's clock 2 minutes ahead of or behind
// this machine's, a login and a refresh get their ID tokens, and the
// Supervisor's 2-minute cluster-scoped token is taken (2 minutes behind, it
// has expired by this machine's clock on arrival). Beyond tokentimes.CLISkew it is
// refused.
func TestIssuerClockSkew(t *testing.T) {
	local := time.Now()
	const life = 2 * time.Minute
	tooFarBehind := -life - tokentimes.CLISkew - time.Minute
	for _, skew := range []time.Duration{2 * time.Minute, -2 * time.Minute, tooFarBehind} {
		t.Run(skew.String(), func(t *testing.T) {
			p := oidctest.New(t)
			p.IDTokenTTL = life
			p.Now = func() time.Time { return local.Add(skew) }
			prov, err := oidclogin.Discover(context.Background(), &config.OIDC{
				Issuer: p.URL, ClientID: p.ClientID, Scopes: []string{"openid", "offline_access"}, CABundle: p.CABundle,
			}, func() time.Time { return local })
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			tok, err := prov.PasswordGrant(ctx, "alice", "password")
			if skew == tooFarBehind {
				if err == nil || !strings.Contains(err.Error(), "expired") {
					t.Fatalf("a token expired beyond tokentimes.CLISkew: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("login: %v", err)
			}
			if !tok.IDTokenExpiry.Equal(local.Add(skew).Add(life).Truncate(time.Second)) {
				t.Fatalf("the ID token's expiry is %v: it must be the issuer's own", tok.IDTokenExpiry)
			}
			if _, err := prov.Refresh(ctx, tok.RefreshToken); err != nil {
				t.Fatalf("refresh: %v", err)
			}
			if _, _, err := prov.ExchangeForAudience(ctx, tok.AccessToken, "cluster-b"); err != nil {
				t.Fatalf("exchange: %v", err)
			}
		})
	}
}

// A provider that wants a client secret from an installed app and an extra
// authorize parameter (as Google and Entra ID can): the browser login, the
// device flow and a refresh all work with --client-secret and
// --authorize-param, and not without them.
func TestClientSecretAndAuthorizeParams(t *testing.T) {
	p := oidctest.New(t)
	p.ClientSecret = "GOCSPX-not-really-secret"
	p.RequireAuthParams = map[string]string{"prompt": "select_account"}
	prov := func(c *config.OIDC) *oidclogin.Provider {
		c.Issuer, c.ClientID, c.Scopes, c.CABundle = p.URL, p.ClientID, []string{"openid", "offline_access"}, p.CABundle
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		prov, err := oidclogin.Discover(context.Background(), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		return prov
	}
	full := &config.OIDC{ClientSecret: p.ClientSecret, AuthorizeParams: []string{"prompt=select_account"}}

	tok, err := prov(full).BrowserLogin(ctxT(t), &fakeUI{t: t, ca: p.CABundle}, oidclogin.BrowserOptions{})
	if err != nil || tok.IDToken == "" {
		t.Fatalf("browser login: %v", err)
	}
	if _, err := prov(full).Refresh(ctxT(t), tok.RefreshToken); err != nil {
		t.Fatalf("refresh with the secret: %v", err)
	}
	p.ApproveDevice()
	if _, err := prov(full).DeviceLogin(ctxT(t), &fakeUI{t: t, ca: p.CABundle, noOpen: true}); err != nil {
		t.Fatalf("device login: %v", err)
	}

	// Without the secret the code exchange fails, and says why.
	_, err = prov(&config.OIDC{AuthorizeParams: full.AuthorizeParams}).BrowserLogin(ctxT(t), &fakeUI{t: t, ca: p.CABundle}, oidclogin.BrowserOptions{})
	if err == nil || !strings.Contains(err.Error(), "client_secret") {
		t.Fatalf("no secret: %v", err)
	}
	// Without the parameter the provider shows an error page: no code comes back.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := prov(&config.OIDC{ClientSecret: p.ClientSecret}).BrowserLogin(ctx, &fakeUI{t: t, ca: p.CABundle}, oidclogin.BrowserOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no parameter: %v", err)
	}
}

// An extra parameter may not replace one the login's security rests on.
func TestReservedAuthorizeParamsRefused(t *testing.T) {
	for _, p := range [][]string{{"state=x"}, {"STATE=x"}, {"code_challenge_method=plain"}, {"Redirect_URI=https://evil.example"}, {"nonce=1"},
		{"request_uri=urn:x"}, {"request=eyJ"}, {"noequals"}, {`claims={"a":1}`}, {"a=1", "A=2"}} {
		c := &config.OIDC{Issuer: "https://issuer.example", AuthorizeParams: p}
		if err := c.Validate(); err == nil {
			t.Errorf("%s accepted", p)
		}
	}
}
