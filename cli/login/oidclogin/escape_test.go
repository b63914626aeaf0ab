package oidclogin_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin/oidctest"
)

// hostile would clear the screen, return to the line's start and open a
// CSI with the C1 byte, were it printed as it came.
const hostile = "\x1b[2J\rpinniped: all good\u009b31m"

// assertEscaped: none of hostile's controls is left raw, and the text is
// still shown, its controls as escapes (termsafe's, or Go's %q in
// oauth2's own error text).
func assertEscaped(t *testing.T, what, text string) {
	t.Helper()
	if strings.ContainsAny(text, "\x1b\r\u009b") {
		t.Errorf("%s holds raw control characters: %q", what, text)
	}
	for _, want := range []string{`\x1b[2J`, `pinniped: all good\u009b31m`} {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %s: %q", what, want, text)
		}
	}
}

// deniedUI plays a browser that the provider sends back with an error.
type deniedUI struct{ fakeUI }

func (u *deniedUI) OpenBrowser(authURL string) error {
	go func() {
		auth, err := url.Parse(authURL)
		if err != nil {
			u.t.Errorf("auth URL: %v", err)
			return
		}
		q := url.Values{"error": {"access_denied"}, "error_description": {"no" + hostile}, "state": {auth.Query().Get("state")}}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(u.ca)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		resp, err := c.Get(auth.Query().Get("redirect_uri") + "?" + q.Encode()) //nolint:noctx // test browser
		if err != nil {
			u.t.Errorf("browser: %v", err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	return nil
}

// TestProviderTextIsEscaped: what the provider says reaches the terminal
// with its control characters escaped: a callback's error_description, a
// device code and its page, a token endpoint's error body (refresh, RFC 8693
// exchange).
func TestProviderTextIsEscaped(t *testing.T) {
	p := oidctest.New(t)
	p.Hostile = hostile

	_, err := discover(t, p).BrowserLogin(ctxT(t), &deniedUI{fakeUI{t: t, ca: p.CABundle}}, oidclogin.BrowserOptions{})
	if err == nil {
		t.Fatal("a denied login succeeded")
	}
	assertEscaped(t, "the denied login's error", err.Error())

	// The login link: url.Parse lets C1 controls and bidi overrides in an
	// authorization_endpoint through; the browser still gets the link as is.
	p.HostileAuthPath = "\u009b2J\u202e"
	ui := &deniedUI{fakeUI{t: t, ca: p.CABundle}}
	if _, err := discover(t, p).BrowserLogin(ctxT(t), ui, oidclogin.BrowserOptions{}); err == nil {
		t.Fatal("a denied login succeeded")
	}
	ui.mu.Lock()
	shownURLs := strings.Join(ui.loginURLs, "\n")
	ui.mu.Unlock()
	if !strings.Contains(shownURLs, `/auth\u009b2J\u202e?`) || strings.ContainsAny(shownURLs, "\u009b\u202e") {
		t.Errorf("the login link shown: %q", shownURLs)
	}
	p.HostileAuthPath = ""

	devUI := &fakeUI{t: t, ca: p.CABundle}
	go func() { time.Sleep(300 * time.Millisecond); p.ApproveDevice() }()
	if _, err := discover(t, p).DeviceLogin(ctxT(t), devUI); err != nil {
		t.Fatal(err)
	}
	devUI.mu.Lock()
	shown := strings.Join(devUI.shown, "\n")
	devUI.mu.Unlock()
	assertEscaped(t, "the device code shown", shown)

	p.FailRefresh.Store(true)
	_, err = discover(t, p).Refresh(ctxT(t), "some-refresh-token")
	if err == nil {
		t.Fatal("a failed refresh succeeded")
	}
	assertEscaped(t, "the refresh's error", err.Error())

	_, _, err = discover(t, p).ExchangeForAudience(ctxT(t), "some-access-token", "cluster-a")
	if err == nil {
		t.Fatal("a refused token exchange succeeded")
	}
	assertEscaped(t, "the token exchange's error", err.Error())
}
