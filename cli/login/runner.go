// Package login decides how `pinniped login` gets a credential, in order:
// a cached cluster credential; a cached ID token; a refresh; an interactive
// (or password) login. Its collaborators (stores, provider, clock, UI,
// exchange) are injected, so every branch is tested without a network.
package login

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/credcache"
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
// and the request is Unattended.
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
	// Now is the clock, required.
	Now func() time.Time
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
	start := r.Now()
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
	r.debug("done in %s; credential valid until %s, cached in %s", r.Now().Sub(start).Round(time.Millisecond), cred.ExpirationTimestamp.Format(time.RFC3339), storedIn)
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

func (r *Runner) write(exec *execcred.Request, c *credcache.Credential) error {
	return execcred.Write(r.Stdout, exec.APIVersion, execcred.StatusOf(*c, r.Now()))
}
