package login

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// idToken returns a usable ID token: cached, refreshed, or from a new login.
func (r *Runner) idToken(ctx context.Context, c *config.OIDC, req Request) (*sessions.Tokens, bool, error) {
	sk := c.SessionKey()
	session, err := r.loadSession(ctx, sk)
	if err != nil {
		return nil, false, err
	}
	if session := r.usable(session, c, req); session != nil {
		r.debug("session: the cached ID token is good until %s", session.IDTokenExpiry.Format(time.RFC3339))
		return session, false, nil
	}
	// Clusters reached through one login share its session, but kubectl
	// calls for them hold different credential locks. Refresh tokens that
	// rotate are single-use (a second use fails, or revokes the family),
	// so one refresh or login per session at a time; whoever waited finds
	// the session the first one saved. A caller nobody watches does not
	// wait out a login that waits for a person: it says so at once.
	unlock, err := r.lockOrCoolOff(ctx, sk, sk, req)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	if session, err = r.loadSession(ctx, sk); err != nil {
		return nil, false, err
	}
	if session := r.usable(session, c, req); session != nil {
		return session, false, nil
	}

	p, err := r.Discover(ctx)
	if err != nil {
		return nil, false, err
	}
	var refreshErr error
	if session != nil && session.RefreshToken != "" {
		r.debug("session: refreshing")
		r.UI.Step("refreshing your session")
		fresh, err := p.Refresh(ctx, session.RefreshToken)
		if err == nil {
			r.saveSession(ctx, sk, c, fresh)
			r.clearWaiting(sk)
			return fresh, true, nil
		}
		// A step, not a warning: the login that follows shows it if it
		// needs the person, and one that needs nobody (a password from
		// the environment) leaves nothing to act on, so a quiet renewal
		// shows nothing (a full-screen client's terminal stays its own).
		refreshErr = err
		r.UI.Step("could not refresh the session (" + termsafe.Visible(err.Error()) + "); logging in again")
	}

	tokens, err := r.login(ctx, p, c, req)
	if err != nil {
		if refreshErr != nil {
			// The step above is dropped when nobody was asked; the failure
			// still says why a login was needed (an ended session, or a
			// refresh token used twice, which may mean it was stolen).
			return nil, false, fmt.Errorf("%w (a login was needed because the session could not be refreshed: %s)", err, termsafe.Visible(refreshErr.Error()))
		}
		return nil, false, err
	}
	// A person who cancelled while the last token request was in flight
	// must not find a session cached anyway.
	if ctx.Err() != nil {
		return nil, false, fmt.Errorf("login not completed: %w", context.Cause(ctx))
	}
	r.saveSession(ctx, sk, c, tokens)
	r.clearWaiting(sk)
	return tokens, false, nil
}

// login runs the login c asks for. A Supervisor decides the flow from its
// list of identity providers (as upstream Pinniped does); with any other
// issuer a password login uses the password grant.
func (r *Runner) login(ctx context.Context, p Provider, c *config.OIDC, req Request) (*sessions.Tokens, error) {
	flow := ""
	if p.IsSupervisor() || c.Upstream.Name != "" {
		var err error
		if flow, err = p.ResolveUpstream(ctx, c.Upstream); err != nil {
			return nil, err
		}
		if c.Flow == config.FlowPassword {
			flow = config.UpstreamFlowPassword
		}
	}
	r.debug("session: none usable; logging in (%s)", flowName(c, flow, r.CanPrompt))
	switch {
	case flow == config.UpstreamFlowPassword:
		if c.Upstream.Name != "" {
			// The name is the one the Supervisor listed (ResolveUpstream).
			r.UI.Step("Log in to " + termsafe.Visible(c.Upstream.Name))
		}
		user, pass, err := r.credentials(ctx, c, req)
		if err != nil {
			return nil, err
		}
		return p.CLIPasswordLogin(ctx, c.Upstream, c.ListenPort, user, pass)
	case flow == "" && c.PasswordLogin():
		user, pass, err := r.credentials(ctx, c, req)
		if err != nil {
			return nil, err
		}
		r.UI.Step("logging in as " + user + " with a password")
		return p.PasswordGrant(ctx, user, pass)
	case c.Flow == config.FlowDevice:
		if req.Unattended {
			return nil, fmt.Errorf("%w: the device flow shows a code to enter", ErrNeedsPerson)
		}
		if err := r.startPersonLogin(c.SessionKey(), req); err != nil {
			return nil, err
		}
		return p.DeviceLogin(ctx, r.UI)
	}
	if req.Unattended {
		return nil, fmt.Errorf("%w: the browser login", ErrNeedsPerson)
	}
	if err := r.startPersonLogin(c.SessionKey(), req); err != nil {
		return nil, err
	}
	if !r.CanPrompt {
		// An IDE, a pipe, a CI job: no prompt, but a browser login
		// needs none. Whoever reads this can finish it.
		r.UI.Warn("no terminal to type into (kubectl runs non-interactively)",
			"open the link to log in; it is good until --timeout ("+c.Timeout.String()+")")
	}
	tokens, err := p.BrowserLogin(ctx, r.UI, browserOptions(c, r.CanPrompt, r.QuietLoginURL))
	if errors.Is(err, oidclogin.ErrSwitchToDevice) {
		r.UI.Step("switching to the device flow")
		tokens, err = p.DeviceLogin(ctx, r.UI)
	}
	return tokens, err
}

// credentials are PINNIPED_USERNAME and PINNIPED_PASSWORD, or, for what
// is missing, the person's answers when one can type.
func (r *Runner) credentials(ctx context.Context, c *config.OIDC, req Request) (string, string, error) {
	user, pass := c.Username, c.Password
	if (user == "" || pass == "") && req.Unattended {
		return "", "", fmt.Errorf("%w: the password login asks for what PINNIPED_USERNAME and PINNIPED_PASSWORD do not give", ErrNeedsPerson)
	}
	if (user == "" || pass == "") && !r.CanPrompt {
		return "", "", errors.New("a password login needs PINNIPED_USERNAME and PINNIPED_PASSWORD in the environment, or a terminal to ask on; set both")
	}
	var err error
	if user == "" {
		if user, err = r.UI.Ask(ctx, "Username: ", false); err != nil {
			return "", "", fmt.Errorf("read the username: %w", err)
		}
		if user = strings.TrimSpace(user); user == "" {
			return "", "", errors.New("no username given")
		}
	}
	if pass == "" {
		if pass, err = r.UI.Ask(ctx, "Password: ", true); err != nil {
			return "", "", fmt.Errorf("read the password: %w", err)
		}
		if pass == "" {
			return "", "", errors.New("no password given")
		}
	}
	return user, pass, nil
}

// loadSession reads a saved session (nil without a cache). A cache that
// breaks the private-directory rule is an error, as for credentials.
func (r *Runner) loadSession(ctx context.Context, key string) (*sessions.Tokens, error) {
	if r.Store == nil {
		return nil, nil
	}
	s, err := r.sessions().Load(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("refusing the session cache: %w", err)
	}
	return s, nil
}

// usable is s when its tokens serve c as they are.
func (r *Runner) usable(s *sessions.Tokens, c *config.OIDC, req Request) *sessions.Tokens {
	if s == nil {
		return nil
	}
	// Where the token is the cluster credential itself, it must outlast
	// what the caller asked a credential to outlast (pinniped proxy's
	// renewal margin), or a renewal would get the very token it renews.
	minLeft := max(MinIDTokenLifetime, req.MinValid)
	// A login that exchanges its token presents only the access token, so
	// as upstream only that one must still be valid: the Supervisor's ID
	// tokens live 2 minutes, and asking for 10 would refresh (and rotate
	// the refresh token) on every credential-cache miss.
	if c.PresentsAccessToken() {
		// The access token is then the credential, and lives as long as
		// an ID token would.
		exp, ok := jwtExpiry(s.AccessToken)
		if ok && !s.AccessTokenExpiry.IsZero() && s.AccessTokenExpiry.Before(exp) {
			exp = s.AccessTokenExpiry
		}
		if ok && exp.After(r.Now().Add(minLeft)) {
			return s
		}
		return nil
	}
	if c.ExchangesToken() {
		if s.AccessToken != "" && s.AccessTokenExpiry.After(r.Now().Add(MinAccessTokenLifetime)) {
			return s
		}
		return nil
	}
	if s.IDToken != "" && s.IDTokenExpiry.After(r.Now().Add(minLeft)) {
		return s
	}
	return nil
}

func (r *Runner) saveSession(ctx context.Context, key string, c *config.OIDC, t *sessions.Tokens) {
	if r.Store == nil {
		return
	}
	t.Issuer = &sessions.Issuer{URL: c.Issuer, ClientID: c.ClientID, CABundle: c.CABundle, HasClientSecret: c.ClientSecret != ""}
	if err := r.sessions().Put(ctx, key, t); err != nil {
		r.UI.Warn("could not save the session ("+err.Error()+")", "the next login will ask you again")
	}
}

func (r *Runner) sessions() *sessions.Cache {
	return &sessions.Cache{Store: r.Store, LockDir: r.LockDir}
}

// browserOptions are the browser flow's settings for c. The paste prompt is
// offered only when no flow was chosen and a person can type.
func browserOptions(c *config.OIDC, canPrompt, quiet bool) oidclogin.BrowserOptions {
	o := oidclogin.BrowserOptions{ListenPort: c.ListenPort, SkipBrowser: c.SkipBrowser, SkipListen: c.SkipListen,
		AllowPaste: c.Flow == config.FlowAuto && canPrompt, QuietWhenOpened: quiet}
	o.Upstream = c.Upstream
	return o
}

// flowName says which login runs, for debug lines.
func flowName(c *config.OIDC, upstreamFlow string, canPrompt bool) string {
	switch {
	case upstreamFlow == config.UpstreamFlowPassword:
		return "the Supervisor's password flow"
	case upstreamFlow == "" && c.PasswordLogin():
		return "password"
	case c.Flow == config.FlowDevice:
		return "device code"
	case canPrompt && c.Flow == config.FlowAuto:
		return "browser, or a pasted code"
	}
	return "browser"
}
