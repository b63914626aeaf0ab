// Package redirect is the one rule for which redirects the CLI's and the
// agent's HTTP clients follow. Those clients carry passwords, refresh
// tokens, client secrets and PKCE verifiers in request bodies, and Go
// re-sends a body on a 307 or 308 to wherever Location points. No issuer,
// endpoint or discovery URL may be plain http (see package httpsurl), so
// neither may a redirect: a redirect to http would put what the https URL
// protected on the network in clear text. It lives apart from httpsurl so
// that the CLI's lean front, which links httpsurl, does not link net/http.
package redirect

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
)

// MaxRedirects is how many redirects one request follows, as net/http's
// default policy.
const MaxRedirects = 10

// ErrCrossOrigin is wrapped by Check's error for a request that began as neither GET nor HEAD,
// redirected to another origin.
var ErrCrossOrigin = errors.New("a request that is not a GET or HEAD is redirected only within the server it was sent to")

// Check is an http.Client's CheckRedirect: it follows a redirect only to
// an https URL, and a request first sent as anything but a GET or HEAD
// only within the origin (scheme, host and port) it was first sent to. The
// first method decides, not the redirected one: a 307 or 308 re-sends a
// POST's body, and a 301, 302 or 303 turns it into a GET that still
// carries the original headers (net/http copies every header but
// Authorization and Cookie to any host, and keeps those two for the same
// host on another port or for a subdomain). A request that began as a GET
// or HEAD may change origin: it carries nothing the new origin may not see.
func Check(req *http.Request, via []*http.Request) error {
	if len(via) == 0 {
		return nil
	}
	if len(via) >= MaxRedirects {
		return fmt.Errorf("stopped after %d redirects (a redirect loop at %s?)", MaxRedirects, show(via[0].URL))
	}
	from := via[len(via)-1].URL
	if req.URL.Scheme != "https" {
		return fmt.Errorf("%s redirected to %s, which %w; only https redirects are followed: fix the configured URL (the issuer's or the endpoint's) to the https address it is served at, or ask the server's administrator to fix the redirect",
			show(from), show(req.URL), httpsurl.ErrNotHTTPS)
	}
	if first := via[0].Method; first != http.MethodGet && first != http.MethodHead && !sameOrigin(via[0].URL, req.URL) {
		return fmt.Errorf("%s redirected a %s to %s, another server; its body (a password, a token or a client secret) is not resent there: configure the URL it should be sent to directly, or ask the server's administrator to fix the redirect: %w",
			show(from), via[0].Method, show(req.URL), ErrCrossOrigin)
	}
	return nil
}

// show is u without user info, query or fragment, which may hold secrets.
func show(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}
