// Package login decides how `pinniped login` gets a credential, in order:
// a cached cluster credential; a cached ID token; a refresh; an interactive
// (or password) login. Its collaborators (stores, provider, clock, UI,
// exchange) are injected, so every branch is tested without a network.
package login

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/tokentimes"
	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cache/lock"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// MinIDTokenLifetime: a cached ID token with less left than this is
// refreshed first, so the cluster credential made from it is not cut short.
const MinIDTokenLifetime = 10 * time.Minute

// MinAccessTokenLifetime: a cached access token with less left than this is
// not traded for the cluster's audience (upstream's rule).
const MinAccessTokenLifetime = 10 * time.Second

// Provider is what the runner needs from an OIDC provider.
type Provider interface {
	BrowserLogin(ctx context.Context, ui loginview.Flow, o oidclogin.BrowserOptions) (*sessions.Tokens, error)
	DeviceLogin(ctx context.Context, ui loginview.Flow) (*sessions.Tokens, error)
	PasswordGrant(ctx context.Context, username, password string) (*sessions.Tokens, error)
	// A Pinniped Supervisor's own: its identity providers and their
	// flows, and its cli_password flow.
	IsSupervisor() bool
	ResolveUpstream(ctx context.Context, up config.Upstream) (string, error)
	CLIPasswordLogin(ctx context.Context, up config.Upstream, listenPort int, username, password string) (*sessions.Tokens, error)
	Refresh(ctx context.Context, refreshToken string) (*sessions.Tokens, error)
	ExchangeForAudience(ctx context.Context, accessToken, audience string) (string, time.Time, error)
}

// ErrRefused is wrapped by Exchange's error when the agent refused the
// token (rather than could not be asked).
var ErrRefused = errors.New("the agent refused the token")

// ErrNeedsPerson: only a login with a person can give a credential now,
// and the runner is Unattended.
var ErrNeedsPerson = errors.New("a login is needed, and it needs a person")

// Runner holds the collaborators. It is set up once and never changed
// afterwards: what differs from one call to the next is in the Request.
type Runner struct {
	// Store caches credentials and sessions; nil disables caching.
	Store cache.Store
	// NoCredentialCache keeps cluster credentials out of Store; sessions
	// are still kept (upstream's --credential-cache="").
	NoCredentialCache bool
	LockDir           string
	Now               func() time.Time
	// UI shows the login to the person; cli/ui.ForLogin picks its form.
	UI     loginview.View
	Stdout io.Writer
	// Discover is called only when a login or refresh is needed, so the
	// cached path makes no network calls.
	Discover func(ctx context.Context) (Provider, error)
	// Exchange trades a token at the agent. When the agent looked at the
	// token and said no, its error wraps ErrRefused.
	Exchange func(ctx context.Context, c *config.Concierge, token string) (*loginv1alpha1.ClusterCredential, error)
	// LockTimeout bounds waiting for another process's login.
	LockTimeout time.Duration
	// CanPrompt is set when a person can type into the UI (kubectl says
	// the session is interactive and stdin is a terminal): the paste
	// prompt and the password prompt need it; a browser login does not.
	CanPrompt bool
	// QuietLoginURL prints the login link only when no browser opened
	// (PINNIPED_SKIP_PRINT_LOGIN_URL=true).
	QuietLoginURL bool
	// Debug, when set, is told what the runner decides and why, for
	// PINNIPED_DEBUG; never a secret.
	Debug func(format string, args ...any)
	// CoolOff is how long a login that needs a person, started for a
	// caller nobody watches (not CanPrompt), keeps others like it from
	// starting another for the same session (0: DefaultCoolOff; negative:
	// never). A person at a terminal is never held back by it.
	CoolOff time.Duration
	// LoginHint is the command a person runs to log in ahead for this
	// login (`pinniped login --context NAME`), named in the error of a
	// caller that cannot.
	LoginHint string

	lockWarning sync.Once
}

func (r *Runner) debug(format string, args ...any) {
	if r.Debug != nil {
		r.Debug(format, args...)
	}
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Request is what a credential is asked for.
type Request struct {
	// Cluster is the cluster kubectl hands the plugin
	// (execcred.Request.KeyCluster, kubeexec.ExecCluster): the cache keys
	// name it, so kubectl and an in-process caller share credentials.
	Cluster config.Cluster
	// Interactive: a person may be typing in a login this one waits for,
	// so it waits longer for the lock.
	Interactive bool
	// Attended: a person asked for this login themselves (pinniped login
	// --context), even without a terminal to type into; never held back
	// by the cool-off.
	Attended bool
	// Unattended: nobody is there at all (pinniped proxy renewing in the
	// background). A login that needs a person (a browser, a device code,
	// a password to type) is not started; the runner returns
	// ErrNeedsPerson instead, so the caller can say so at once and run it
	// when a person can attend. A cached token, a refresh and a password
	// from the environment still work.
	Unattended bool
	// MinValid is how much validity a cached cluster credential must have
	// left to be used (0: credcache.DefaultSkew, kubectl's). pinniped
	// proxy asks for more, so it renews before kubectl would and has time
	// to retry; the cache keys are the same, so both still share one
	// credential.
	MinValid time.Duration
}

// requestOf is what kubectl's exec request asks for.
func requestOf(exec *execcred.Request) Request {
	return Request{Cluster: exec.KeyCluster(), Interactive: exec.Interactive}
}

// LoginOIDC prints a credential for kubectl, logging in only if it must.
func (r *Runner) LoginOIDC(ctx context.Context, c *config.OIDC, exec *execcred.Request) error {
	cred, err := r.CredentialOIDC(ctx, c, requestOf(exec))
	if err != nil {
		return err
	}
	return r.write(exec, cred)
}

// CredentialOIDC is the credential LoginOIDC prints, for callers in this
// process (pinniped proxy): cached and valid for more than the skew, or
// from a login it caches.
func (r *Runner) CredentialOIDC(ctx context.Context, c *config.OIDC, req Request) (*credcache.Credential, error) {
	start := r.now()
	key := c.CredentialKey(req.Cluster)
	creds := r.credCache(req)
	hit, unlock, err := r.cachedOrLock(ctx, creds, key, c.SessionKey(), req)
	if err != nil || hit != nil {
		return hit, err
	}
	defer unlock()

	tokens, refreshed, err := r.idToken(ctx, c, req)
	if err != nil {
		return nil, err
	}
	token, expiry, err := r.presented(ctx, c, tokens)
	if err != nil {
		return nil, err
	}
	cred := &credcache.Credential{Token: token, ExpirationTimestamp: expiry}
	if c.Concierge != nil {
		if cred, err = r.exchangeOIDC(ctx, c.Concierge, token); err != nil {
			return nil, err
		}
	}
	label := c.Issuer
	if req.Cluster.Server != "" {
		label = req.Cluster.Server + " via " + c.Issuer
	}
	storedIn := r.store(ctx, creds, key, label, c.SessionKey(), cred, "the next kubectl call will log in again; check the cache's disk and permissions")
	r.debug("done in %s; credential valid until %s, cached in %s", r.now().Sub(start).Round(time.Millisecond), cred.ExpirationTimestamp.Format(time.RFC3339), storedIn)
	who, groups := tokens.Username, tokens.Groups
	if c.Concierge != nil {
		if name, gs, ok := clusterIdentity(cred); ok {
			// What the cluster will see, which the authenticator's mappings
			// decide: not always the token's own username and groups.
			who, groups = name, gs
		}
	}
	// All come from the ID token's claims or the cluster's credential:
	// text from elsewhere, escaped once here for every view.
	who, groups = termsafe.Visible(who), termsafe.VisibleAll(groups)
	r.UI.Success(loginview.Summary{Username: who, Groups: groups, Expires: cred.ExpirationTimestamp, StoredIn: storedIn, Refreshed: refreshed})
	return cred, nil
}

// cachedOrLock is a cached credential for key valid for more than the
// skew; or, when there is none, nil and the key's login lock, held (one
// login per key across processes: the rest wait here, then find the
// credential the first one cached). req.Interactive: this login may wait
// for a person, so another waiting on it should hear so. sessionKey, when the
// login has a session, is the one whose login waiting for a person a
// caller nobody watches does not wait out (see idToken).
func (r *Runner) cachedOrLock(ctx context.Context, creds *credcache.Cache, key, sessionKey string, req Request) (*credcache.Credential, func(), error) {
	hit, ok, err := r.cached(ctx, creds, key)
	if err != nil {
		return nil, nil, err
	}
	if ok {
		r.debug("cluster credential: cached in %s, valid until %s", r.Store.Describe(), hit.ExpirationTimestamp.Format(time.RFC3339))
		return hit, nil, nil
	}
	r.debug("cluster credential: none cached that is valid for %s more", seconds(skew(req)))
	unlock, err := r.lockOrCoolOff(ctx, key, sessionKey, req)
	if err != nil {
		return nil, nil, err
	}
	hit, ok, err = r.cached(ctx, creds, key)
	if err != nil || ok {
		unlock()
		return hit, nil, err
	}
	return nil, unlock, nil
}

// presented is the token the cluster (or the agent) is shown, and its
// expiry: the ID token; the access token with --present-token=access; the
// token exchanged for the cluster's audience when it has one of its own.
func (r *Runner) presented(ctx context.Context, c *config.OIDC, tokens *sessions.Tokens) (string, time.Time, error) {
	token, expiry := tokens.IDToken, tokens.IDTokenExpiry
	if c.PresentsAccessToken() {
		if tokens.AccessToken == "" {
			return "", time.Time{}, errors.New("the provider gave no access token to present (--present-token=access): leave the flag out to present the ID token")
		}
		exp, ok := jwtExpiry(tokens.AccessToken)
		if !ok {
			return "", time.Time{}, errors.New("the provider's access token is not a JWT (it is opaque), so no cluster can verify it: leave out --present-token=access, or ask the provider for JWT access tokens (an API audience, a custom authorization server)")
		}
		r.debug("presenting the access token, not the ID token")
		token, expiry = tokens.AccessToken, exp
		if !tokens.AccessTokenExpiry.IsZero() && tokens.AccessTokenExpiry.Before(exp) {
			expiry = tokens.AccessTokenExpiry
		}
	}
	if c.ExchangesToken() {
		r.debug("token exchange (RFC 8693) for the audience %s", c.RequestAudience)
		p, err := r.Discover(ctx)
		if err != nil {
			return "", time.Time{}, err
		}
		return p.ExchangeForAudience(ctx, tokens.AccessToken, c.RequestAudience)
	}
	return token, expiry, nil
}

// exchangeOIDC trades token at the agent for a cluster credential. A
// refusal names the token's claims (never their values): a claim the
// authenticator maps and the token lacks is the usual first-login cause,
// and the agent says only "authentication failed" (as upstream).
func (r *Runner) exchangeOIDC(ctx context.Context, conc *config.Concierge, token string) (*credcache.Credential, error) {
	r.debug("trading the token at %s with %s %s", conc.Endpoint, conc.AuthenticatorType, conc.AuthenticatorName)
	r.UI.Step("exchanging the token for a cluster credential")
	cc, err := r.Exchange(ctx, conc, token)
	if err != nil {
		if names := claimNames(token); names != "" && errors.Is(err, ErrRefused) {
			return nil, fmt.Errorf("%w. The token carries the claims %s: the JWTAuthenticator's username claim, and any claim its rules require, must be among them (the agent's log names the reason)", err, names)
		}
		return nil, err
	}
	return &credcache.Credential{
		Token: cc.Token, ClientCertificateData: cc.ClientCertificateData, ClientKeyData: cc.ClientKeyData,
		ExpirationTimestamp: cc.ExpirationTimestamp.Time,
	}, nil
}

// store caches cred under key and says where, or that it could not (a
// warning with what then happens, not an error: the credential works).
func (r *Runner) store(ctx context.Context, creds *credcache.Cache, key, label, session string, cred *credcache.Credential, ifNot string) string {
	if creds == nil {
		return "nowhere (caching disabled)"
	}
	if err := creds.PutFrom(ctx, key, label, session, *cred); err != nil {
		r.UI.Warn("could not cache the credential ("+err.Error()+")", ifNot)
		return "nowhere (caching disabled)"
	}
	return r.Store.Describe()
}

// claimNames lists, sorted, the claim names (never the values) of a JWT;
// "" for anything else.
func claimNames(token string) string {
	var claims map[string]json.RawMessage
	if !jwtClaims(token, &claims) || len(claims) == 0 {
		return ""
	}
	return strings.Join(slices.Sorted(maps.Keys(claims)), ", ")
}

// jwtClaims decodes, unverified, a JWT's payload into v; false for a token
// that is not a JWT.
func jwtClaims(token string, v any) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	return err == nil && json.Unmarshal(payload, v) == nil
}

// jwtExpiry reads, unverified, a JWT's exp: only to bound how long it is
// cached and reused (the cluster verifies it). ok is false for a token
// that is not a JWT with an exp.
func jwtExpiry(token string) (time.Time, bool) {
	var claims struct {
		Exp json.RawMessage `json:"exp"`
	}
	if !jwtClaims(token, &claims) {
		return time.Time{}, false
	}
	exp, err := tokentimes.NumericDate(claims.Exp)
	return exp, err == nil && !exp.IsZero()
}

// clusterIdentity is the user a credential from the agent names, for
// display only: the certificate's subject, or, for the impersonation proxy's
// token (which comes without a certificate), its username and groups claims.
func clusterIdentity(cred *credcache.Credential) (name string, groups []string, ok bool) {
	if cred.ClientCertificateData != "" {
		return certIdentity(cred.ClientCertificateData)
	}
	return tokenIdentity(cred.Token)
}

// tokenIdentity reads, unverified, the username and groups claims of a
// token from the impersonation proxy: the proxy verifies the token on every
// request, so the CLI only shows them. ok is false for anything else.
func tokenIdentity(token string) (name string, groups []string, ok bool) {
	var claims struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	}
	if !jwtClaims(token, &claims) || claims.Username == "" {
		return "", nil, false
	}
	return claims.Username, claims.Groups, true
}

// certIdentity is the user a client certificate names to Kubernetes: CN
// and O.
func certIdentity(certPEM string) (name string, groups []string, ok bool) {
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil {
		return "", nil, false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || cert.Subject.CommonName == "" {
		return "", nil, false
	}
	return cert.Subject.CommonName, cert.Subject.Organization, true
}

func (r *Runner) credCache(req Request) *credcache.Cache {
	if r.Store == nil || r.NoCredentialCache {
		return nil
	}
	return &credcache.Cache{Store: r.Store, Now: r.Now, LockDir: r.LockDir, Skew: req.MinValid}
}

// skew is the validity a cached credential must have left to be used.
func skew(req Request) time.Duration {
	if req.MinValid > 0 {
		return req.MinValid
	}
	return credcache.DefaultSkew
}

// seconds writes d as debug lines always have ("30 s").
func seconds(d time.Duration) string {
	return strconv.FormatInt(int64(d.Round(time.Second)/time.Second), 10) + " s"
}

// cached is the valid credential cached under key, if any. A cache that
// breaks the rule of a private directory (a link, another user's file, a
// directory others may enter) is an error, not a miss: logging in again
// would write over what is there, and the person would never learn why.
func (r *Runner) cached(ctx context.Context, c *credcache.Cache, key string) (*credcache.Credential, bool, error) {
	if c == nil {
		return nil, false, nil
	}
	cred, ok, err := c.Get(ctx, key)
	if errors.Is(err, privatedir.ErrNotPrivate) {
		return nil, false, fmt.Errorf("refusing the credential cache: %w", err)
	}
	if err != nil {
		// Anything else (a corrupt entry, a keyring that does not answer)
		// costs only a new login.
		r.UI.Warn("the credential cache is unreadable ("+err.Error()+")", "logging in again")
		return nil, false, nil //nolint:nilerr // a miss, said to the person
	}
	return cred, ok, nil
}

func (r *Runner) lock(ctx context.Context, key string, interactive bool) (func(), error) {
	return r.lockName(ctx, key, r.lockTimeout(interactive))
}

// lockTimeout bounds the wait for another process's login: longer when a
// person may be typing a password in it.
func (r *Runner) lockTimeout(interactive bool) time.Duration {
	if r.LockTimeout != 0 {
		return r.LockTimeout
	}
	if interactive {
		return 15 * time.Minute
	}
	return 2 * time.Minute
}

// lockName takes the cross-process lock called name, waiting up to timeout.
func (r *Runner) lockName(ctx context.Context, name string, timeout time.Duration) (func(), error) {
	if r.Store == nil {
		return func() {}, nil
	}
	release, skipped, err := lock.Hold(ctx, r.LockDir, name, timeout)
	switch {
	case skipped != nil:
		// A lock only keeps concurrent kubectl calls to one login, and
		// where no lock file can be made (read-only, full) nobody else
		// holds one: that must not cost the login itself. Any other
		// failure may hide another process's lock, and a second login
		// racing it could spend a single-use refresh token twice.
		r.lockWarning.Do(func() {
			r.UI.Warn("could not take the login lock ("+skipped.Error()+")", "logging in without it; check the cache directory's disk")
		})
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%w (the lock directory %s is not writable by you, perhaps made by another user such as root: fix its owner or permissions)", err, r.LockDir)
	case err != nil:
		return nil, err
	}
	return release, nil
}

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
		if ok && exp.After(r.now().Add(minLeft)) {
			return s
		}
		return nil
	}
	if c.ExchangesToken() {
		if s.AccessToken != "" && s.AccessTokenExpiry.After(r.now().Add(MinAccessTokenLifetime)) {
			return s
		}
		return nil
	}
	if s.IDToken != "" && s.IDTokenExpiry.After(r.now().Add(minLeft)) {
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

func (r *Runner) write(exec *execcred.Request, c *credcache.Credential) error {
	return execcred.Write(r.Stdout, exec.APIVersion, execcred.StatusOf(*c, r.now()))
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
