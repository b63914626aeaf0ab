package logout

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// issuerWait bounds what one issuer may take to answer discovery and the
// revocations: logout has already removed the local copies, and a person
// waits for it.
const issuerWait = 30 * time.Second

// ender ends sessions at their issuers: it revokes their tokens (RFC 7009)
// and, with --end-session, opens the browser at the issuer's
// end_session_endpoint. It reads each issuer's discovery document once.
type ender struct {
	f          *cmdutil.Factory
	errOut     io.Writer
	endSession bool

	providers map[string]discovered
	// revoked are the tokens already sent (a session is often in both the
	// keyring and its file fallback), by hash.
	revoked map[[32]byte]bool
	// ended are the issuer and client pairs whose end-session page was opened.
	ended map[string]bool
	// unreachable are the issuers whose discovery failed, said once each.
	unreachable map[string]bool
	failed      int
	// revokeFailed: a token to revoke was not, rather than only the
	// browser session left.
	revokeFailed bool
}

type discovered struct {
	p   *oidclogin.Provider
	err error
}

func newEnder(f *cmdutil.Factory, endSession bool) *ender {
	return &ender{f: f, errOut: f.IO.ErrOut, endSession: endSession,
		providers: map[string]discovered{}, revoked: map[[32]byte]bool{}, ended: map[string]bool{}, unreachable: map[string]bool{}}
}

func (e *ender) discover(ctx context.Context, login *config.OIDC) (*oidclogin.Provider, error) {
	key := fmt.Sprintf("%s\x00%s\x00%x\x00%x", login.Issuer, login.ClientID, sha256.Sum256(login.CABundle), sha256.Sum256([]byte(login.ClientSecret)))
	if d, ok := e.providers[key]; ok {
		return d.p, d.err
	}
	// Discover uses the CLI's one HTTP client, trusting the issuer's CA as
	// the login did.
	p, err := oidclogin.Discover(ctx, login, e.f.Now)
	e.providers[key] = discovered{p, err}
	return p, err
}

// end revokes the tokens of t (which may be nil: then only --end-session
// has anything to do), a session of login, whose local copies are already
// removed. Failures are reported on stderr and counted in e.failed.
// withoutItsSecret: login has a client secret that is not at hand, so an
// issuer refusing the client ID alone is a warning.
func (e *ender) end(ctx context.Context, login *config.OIDC, t *sessions.Tokens, withoutItsSecret bool) {
	if t == nil {
		t = &sessions.Tokens{}
	}
	var toRevoke []revocation
	for _, r := range []revocation{{t.RefreshToken, oidclogin.HintRefreshToken}, {t.AccessToken, oidclogin.HintAccessToken}} {
		if r.token != "" && !e.revoked[sha256.Sum256([]byte(r.token))] {
			toRevoke = append(toRevoke, r)
		}
	}
	endKey := login.Issuer + "\x00" + login.ClientID
	wantEnd := e.endSession && !e.ended[endKey]
	if len(toRevoke) == 0 && !wantEnd {
		return
	}
	issuerCtx, cancel := context.WithTimeout(ctx, issuerWait)
	defer cancel()
	p, err := e.discover(issuerCtx, login)
	if err != nil {
		// Once per issuer: --all may have many sessions there.
		if e.unreachable[login.Issuer] {
			return
		}
		e.unreachable[login.Issuer] = true
		e.failed++
		if len(toRevoke) == 0 {
			fmt.Fprintf(e.errOut, "! %s: could not read the issuer's discovery document (%v): your browser stays signed in there; sign out on the issuer's own page\n", login.Issuer, termsafe.Error(err))
			return
		}
		e.revokeFailed = true
		fmt.Fprintf(e.errOut, "! %s: could not read the issuer's discovery document to end the session there (%v): what was to be revoked stays valid there until it expires; the local copies were removed\n", login.Issuer, termsafe.Error(err))
		return
	}
	e.revoke(issuerCtx, login, p, t, toRevoke, withoutItsSecret)
	if wantEnd {
		e.ended[endKey] = true
		// Not bound by issuerWait: the person's browser, not the issuer,
		// takes its time.
		e.openEndSession(ctx, login, p, t.IDToken)
	}
}

type revocation struct{ token, hint string }

func (e *ender) revoke(ctx context.Context, login *config.OIDC, p *oidclogin.Provider, t *sessions.Tokens, toRevoke []revocation, withoutItsSecret bool) {
	for _, r := range toRevoke {
		// Once, whatever the answer: the other copies are the same token.
		e.revoked[sha256.Sum256([]byte(r.token))] = true
		err := p.Revoke(ctx, r.token, r.hint)
		switch {
		case err == nil:
			if r.hint == oidclogin.HintRefreshToken {
				fmt.Fprintf(e.errOut, "Revoked the session's refresh token at %s.\n", login.Issuer)
			} else {
				fmt.Fprintf(e.errOut, "Revoked the session's access token at %s.\n", login.Issuer)
			}
		case errors.Is(err, oidclogin.ErrNoRevocationEndpoint):
			// Nothing else can be revoked there either.
			what := "refresh token"
			if t.RefreshToken == "" {
				what = "access token"
			}
			fmt.Fprintf(e.errOut, "! %s: the issuer has no revocation endpoint: the %s stays valid there until it expires; the local copies were removed\n", login.Issuer, what)
			return
		case errors.Is(err, oidclogin.ErrClientAuthentication) && withoutItsSecret:
			// Its other tokens would be refused alike.
			fmt.Fprintf(e.errOut, "! %s: the session was logged in with --client-secret, which sessions do not keep, and the issuer does not revoke without it: "+
				"its refresh token stays valid there until it expires (next time, run pinniped logout --context=NAME for it before --all); the local copies were removed\n", login.Issuer)
			return
		case errors.Is(err, oidclogin.ErrUnsupportedTokenType) && r.hint == oidclogin.HintAccessToken:
			// Many issuers revoke the access tokens of a grant with its
			// refresh token, or issue JWTs that cannot be recalled.
			fmt.Fprintf(e.errOut, "! %s: the issuer does not revoke access tokens on their own: the session's access token stays valid there until it expires%s\n", login.Issuer, until(t.AccessTokenExpiry))
		default:
			e.failed++
			e.revokeFailed = true
			what := "refresh token"
			if r.hint == oidclogin.HintAccessToken {
				what = "access token"
			}
			fmt.Fprintf(e.errOut, "! %s: revoking the session's %s failed (%v): it stays valid there until it expires; the local copies were removed\n", login.Issuer, what, termsafe.Error(err))
		}
	}
}

func until(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " (" + t.Local().Format(time.RFC3339) + ")"
}

// endSessionWait bounds the wait for the browser to fetch the end-session
// page.
var endSessionWait = 2 * time.Minute

// openEndSession has the browser POST the ID token to the issuer's
// end_session_endpoint, through a one-shot page on a loopback listener:
// neither the browser's command line nor its history sees the token, and
// the page is served only to this user (oidclogin.FormPage), since its URL
// is in command lines other local users can read. The session counts as
// ended only once the page was fetched; a wait that ends without it is a
// failure, as a failed end-session request is. Where no browser opens, the
// person is told to sign out at the issuer; the token is never printed.
func (e *ender) openEndSession(ctx context.Context, login *config.OIDC, p *oidclogin.Provider, idToken string) {
	endpoint, form, err := p.EndSessionForm(idToken)
	switch {
	case errors.Is(err, oidclogin.ErrNoEndSessionEndpoint):
		fmt.Fprintf(e.errOut, "! %s: the issuer has no end_session_endpoint: your browser stays signed in there; sign out on the issuer's own page\n", login.Issuer)
		return
	case err != nil:
		e.failed++
		fmt.Fprintf(e.errOut, "! %s: %v; your browser stays signed in there\n", login.Issuer, termsafe.Error(err))
		return
	}
	// The endpoint is the issuer's discovery document's: url.Parse refuses
	// ASCII controls in it, not C1 or bidi characters in its query.
	signOut := fmt.Sprintf("To end your session at %s in your browser, sign out there (its logout page is %s).", login.Issuer, termsafe.Visible(endpoint))
	page, err := oidclogin.ServeFormPost(ctx, endpoint, form)
	if err != nil {
		fmt.Fprintf(e.errOut, "! could not serve the page that ends your session at the issuer (%v). %s\n", termsafe.Error(err), signOut)
		return
	}
	defer page.Close()
	if err := e.f.Browser(page.URL); err != nil {
		fmt.Fprintf(e.errOut, "No browser could be opened (%v). %s\n", termsafe.Error(err), signOut)
		return
	}
	fmt.Fprintf(e.errOut, "Opened your browser to end your session at %s; waiting up to %s for it to load the page...\n", login.Issuer, endSessionWait)
	wctx, cancel := context.WithTimeout(ctx, endSessionWait)
	defer cancel()
	waitErr := page.Wait(wctx)
	e.sayRefused(login, page)
	if waitErr != nil {
		e.failed++
		why := fmt.Sprintf("your browser did not load the page that ends it within %s", endSessionWait)
		if !errors.Is(waitErr, context.DeadlineExceeded) {
			why = fmt.Sprintf("the wait for your browser to load the page that ends it stopped (%v)", termsafe.Error(waitErr))
		}
		fmt.Fprintf(e.errOut, "! %s: your session there was NOT ended: %s. %s\n", login.Issuer, why, signOut)
		return
	}
	fmt.Fprintf(e.errOut, "Your browser was sent to end your session at %s.\n", login.Issuer)
}

// sayRefused tells the person of requests for the end-session page that
// were refused. None got the page; but another local user asking for a URL
// that only command lines on this machine held is someone reading them for
// such pages, unless it was the person's own browser behind a relay that
// runs as another user (WSL2, a container's port forwarder); and a request
// whose user could not be found may have been the person's own browser,
// which was then shown a refusal.
func (e *ender) sayRefused(login *config.OIDC, page *oidclogin.FormPage) {
	r := page.Refused()
	if r.Others > 0 {
		uids := make([]string, 0, len(r.OtherUIDs))
		for _, uid := range r.OtherUIDs {
			uids = append(uids, strconv.Itoa(uid))
		}
		fmt.Fprintf(e.errOut, "! %s: the page that ends your session refused %d request(s) from other local users (uid %s): none of them got the page or your ID token. "+
			"If your browser reaches this machine's 127.0.0.1 through something that runs as another user (a WSL2 or container port relay, a sandbox), that was it; "+
			"otherwise someone here may be reading command lines for such pages: tell this machine's administrator\n",
			login.Issuer, r.Others, strings.Join(uids, ", "))
	}
	if r.Unidentified > 0 {
		fmt.Fprintf(e.errOut, "! %s: the page that ends your session refused %d request(s) whose local user could not be found (%v): "+
			"if one was your browser's, it was shown a refusal instead\n", login.Issuer, r.Unidentified, termsafe.Error(r.Why))
	}
}

// err is what the command returns: non-zero when a revocation or the
// end-session request failed, after every local copy was removed.
func (e *ender) err() error {
	if e.failed == 0 {
		return nil
	}
	if !e.revokeFailed {
		return fmt.Errorf("%d request(s) to end the session at the issuer failed (see above): the local copies were removed, "+
			"but your browser may still be signed in there; sign out on the issuer's own page", e.failed)
	}
	return fmt.Errorf("%d request(s) to end the session at the issuer failed (see above): the local copies were removed, "+
		"but what was not revoked stays valid at the issuer until it expires; sign out at the issuer, or ask its administrator to end the session", e.failed)
}
