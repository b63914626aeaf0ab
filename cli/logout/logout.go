// Package logout implements `pinniped logout` and `pinniped status`: forget
// cached credentials and sessions, and show what is cached where, never
// the secrets. Both talk to the caches directly, in every store a login may
// have written to.
package logout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cache/keyringstore"
	"github.com/pinniped-kit/pinniped/cache/lock"
	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/handoff"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/kubeexec"
)

// Options are the inputs of `pinniped logout`.
type Options struct {
	Kubeconfig, Context string
	CredentialCache     string
	All                 bool
	// EndSession also opens the browser at the issuer's end_session_endpoint.
	EndSession bool
	// LoginWait bounds the wait for a login of the context still running.
	LoginWait time.Duration

	f *cmdutil.Factory
}

// NewCmdLogout returns `pinniped logout`; runF (nil: Options.Run) does the work.
func NewCmdLogout(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f, LoginWait: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "End the session at the identity provider and forget cached credentials",
		Long: `logout removes the cached cluster credential and OIDC session (ID, access and
refresh tokens) that "pinniped login" keeps for the current kubeconfig context
(or --context), so the next kubectl call logs in again, and ends the session
at the issuer: when the issuer's discovery document advertises a
revocation_endpoint (RFC 7009), the session's refresh token (and its access
token) is revoked there, so a copy of it taken earlier stops working too.
--all does this for every cached session. Both look in the OS keyring and in
its file fallback.

The local copies are removed first, whatever the issuer does. An issuer with
no revocation endpoint (a Pinniped Supervisor has none) is reported, and the
refresh token stays valid there until it expires; the exit code is still 0.
A revocation that fails (an error answer, an unreachable issuer, or a
revocation endpoint that is not https, to which no token is sent) is
reported and the exit code is 1. With --all, a session logged in with
--client-secret is not revoked: sessions do not keep the secret (log out of
its context first). Sessions cached by an older pinniped did not record
their issuer: --all removes them without revoking them.

--end-session also opens your browser at the issuer's end_session_endpoint
(OpenID Connect RP-initiated logout), with the session's ID token as
id_token_hint and the client ID, so that the issuer's browser session ends
too and the next login asks for your password again. Where no browser can be
opened, the link is printed on stderr for you to open; it carries your ID
token, so it is printed only then.

Cluster credentials already handed to kubectl stay valid until they expire
(minutes).`,
		Example: `  pinniped logout
  pinniped logout --context=prod --end-session
  pinniped logout --all`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, o.Validate, runF, o.Run),
	}
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig whose context to log out of (default $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&o.Context, "context", "", "context to log out of (default: current)")
	cmd.Flags().BoolVar(&o.All, "all", false, "end and forget every cached session and credential")
	cmd.Flags().BoolVar(&o.EndSession, "end-session", false, "also open the browser at the issuer's end_session_endpoint to end its browser session")
	cmd.Flags().StringVar(&o.CredentialCache, "credential-cache", "", "override the cache the context's login uses")
	return cmd
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if o.All && (o.Context != "" || o.Kubeconfig != "") {
		return errors.New("--all forgets every context's login; leave out --context and --kubeconfig")
	}
	return nil
}

// Run forgets.
func (o *Options) Run(ctx context.Context) error {
	errOut := o.f.IO.ErrOut
	ender := newEnder(o.f, o.EndSession)
	if o.All {
		n, removed, err := forgetAll(ctx, o.f.Caches, errOut)
		if err != nil {
			return err
		}
		fmt.Fprintf(errOut, "Removed %d cached credentials and sessions.\n", n)
		endAll(ctx, ender, removed)
		return ender.err()
	}
	if err := o.logoutContext(ctx, ender); err != nil {
		return err
	}
	return ender.err()
}

// endAll ends each removed session at its issuer, with what the session
// recorded of its login: --all has no kubeconfig to read it from.
func endAll(ctx context.Context, ender *ender, removed []*sessions.Tokens) {
	older, withSecret := 0, 0
	for _, t := range removed {
		switch {
		case t.Issuer == nil:
			if t.RefreshToken != "" || t.AccessToken != "" {
				older++
			}
		case t.Issuer.HasClientSecret:
			withSecret++
		default:
			ender.end(ctx, &config.OIDC{Issuer: t.Issuer.URL, ClientID: t.Issuer.ClientID, CABundle: t.Issuer.CABundle}, t)
		}
	}
	if older > 0 {
		fmt.Fprintf(ender.errOut, "! %d session(s) were cached by an older pinniped, which did not record their issuer: they were removed here but not revoked, "+
			"and their refresh tokens stay valid at the issuer until they expire\n", older)
	}
	if withSecret > 0 {
		fmt.Fprintf(ender.errOut, "! %d session(s) were logged in with --client-secret, which sessions do not keep: they were removed here but not revoked, "+
			"and their refresh tokens stay valid at the issuer until they expire (next time, run pinniped logout --context=NAME for them before --all)\n", withSecret)
	}
}

// isKeyring: the OS keyring may not answer; that is reported, and the
// files are still dealt with.
func isKeyring(st cache.Store) bool {
	_, ok := st.(*keyringstore.Store)
	return ok
}

// caches are the credential and session caches of one store.
type caches struct {
	store cache.Store
	creds *credcache.Cache
	sess  *sessions.Cache
	// lockDir holds the locks a login takes on its credential and session.
	lockDir string
}

func cachesFor(places cmdutil.Caches, mode string) ([]caches, error) {
	if mode == "" {
		mode = "keyring" // where sessions go when cluster credentials are not cached
	}
	stores, err := places.Everywhere(mode)
	if err != nil {
		return nil, err
	}
	lockDir, err := places.LockDir(mode)
	if err != nil {
		return nil, err
	}
	out := make([]caches, len(stores))
	for i, st := range stores {
		out[i] = caches{st, &credcache.Cache{Store: st, LockDir: lockDir}, &sessions.Cache{Store: st, LockDir: lockDir}, lockDir}
	}
	return out, nil
}

// forgetAll clears every store, each with its own index, and returns the
// sessions it removed, for revoking. A keyring that does not answer is
// reported, not fatal: the files are still cleared.
func forgetAll(ctx context.Context, places cmdutil.Caches, errOut io.Writer) (int, []*sessions.Tokens, error) {
	all, err := cachesFor(places, "keyring")
	if err != nil {
		return 0, nil, err
	}
	total := 0
	var removed []*sessions.Tokens
	for _, c := range all {
		var held []*sessions.Tokens
		for _, k := range c.sess.Keys(ctx) {
			if t := c.sess.Get(ctx, k); t != nil {
				held = append(held, t)
			}
		}
		n, err := c.creds.Clear(ctx)
		if err == nil {
			var m int
			m, err = c.sess.Clear(ctx)
			n += m
		}
		if err != nil {
			if isKeyring(c.store) {
				fmt.Fprintf(errOut, "! %s: %v; what it holds was not removed (run pinniped logout --all again once it answers)\n", c.store.Describe(), err)
				continue
			}
			return total, removed, err
		}
		total += n
		removed = append(removed, held...)
	}
	return total, removed, nil
}

func (o *Options) logoutContext(ctx context.Context, ender *ender) error {
	errOut, contextName := o.f.IO.ErrOut, o.Context
	raw, err := o.f.KubeConfig(o.Kubeconfig, "").RawConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	if contextName == "" {
		contextName = raw.CurrentContext
	}
	kctx := raw.Contexts[contextName]
	if kctx == nil {
		return fmt.Errorf("kubeconfig has no context %q", contextName)
	}
	user := raw.AuthInfos[kctx.AuthInfo]
	if user == nil || user.Exec == nil || !handoff.IsFront(user.Exec.Command) || len(user.Exec.Args) < 2 || user.Exec.Args[0] != "login" {
		return fmt.Errorf("context %q does not log in with pinniped; nothing to forget", contextName)
	}
	if user.Exec.Args[1] != "oidc" {
		return errors.New("static-token logins keep no session; their cached cluster credential expires within minutes (use --all to remove it now)")
	}
	// The kubeconfig's own environment for the plugin comes first: the
	// keys of a password login depend on PINNIPED_USERNAME.
	parsed, err := kubeexec.Parse(user.Exec, o.f.LookupEnv)
	if err != nil {
		return fmt.Errorf("context %q: cannot read its pinniped login arguments: %w", contextName, err)
	}
	login := parsed.OIDC
	// What kubectl hands the plugin: the CA read from a file too.
	cluster, err := kubeexec.ExecCluster(user.Exec, o.f.KubeConfig(o.Kubeconfig, contextName).ClientConfig)
	if err != nil {
		return fmt.Errorf("context %q: %w", contextName, err)
	}
	mode := login.CredentialCache
	if o.CredentialCache != "" {
		mode = o.CredentialCache
	}
	all, err := cachesFor(o.f.Caches, mode)
	if err != nil {
		return err
	}
	key, sk := login.CredentialKey(cluster), login.SessionKey()
	removed := false
	var held []*sessions.Tokens
	for _, c := range all {
		had, session, err := forget(ctx, c, key, sk, o.LoginWait)
		if session != nil {
			held = append(held, session)
		}
		if err != nil {
			if isKeyring(c.store) {
				fmt.Fprintf(errOut, "! %s: %v; what it holds for %s was not removed (run pinniped logout again once it answers)\n", c.store.Describe(), err, contextName)
				continue
			}
			return err
		}
		removed = removed || had
	}
	switch {
	case removed:
		fmt.Fprintf(errOut, "Logged out of %s: the next kubectl call will log in again.\n", contextName)
	case login.MayUsePassword() && login.Username == "":
		// The keys name the user of a password login; without it this may
		// have looked for the wrong entries.
		fmt.Fprintf(errOut, "Nothing cached for context %s under the user of this shell (PINNIPED_USERNAME is not set). Set it as when logging in, or use pinniped logout --all.\n", contextName)
	default:
		fmt.Fprintf(errOut, "Nothing cached for context %s; you are logged out.\n", contextName)
	}
	// After the removal: nothing the issuer does (fail, hang, be
	// interrupted) can leave the local copies behind.
	for _, t := range held {
		ender.end(ctx, login, t)
	}
	if len(held) == 0 && o.EndSession {
		// No ID token to hint with; the issuer then asks which session to end.
		ender.end(ctx, login, nil)
	}
	return nil
}

// forget removes one credential and one session from c; it reports whether
// either was there, and returns the session it removed.
func forget(ctx context.Context, c caches, key, sessionKey string, loginWait time.Duration) (bool, *sessions.Tokens, error) {
	// A login or refresh running now for this context would save its
	// result after the delete, and the user would stay logged in: wait for
	// it (the locks it holds), briefly.
	for _, name := range []string{key, sessionKey} {
		unlock, err := holdLoginLock(ctx, c.lockDir, name, loginWait)
		if err != nil {
			return false, nil, err
		}
		defer unlock()
	}
	_, hadCred, err := c.creds.Get(ctx, key)
	if err != nil {
		return false, nil, err
	}
	if err := c.creds.Delete(ctx, key); err != nil {
		return hadCred, nil, err
	}
	session := c.sess.Get(ctx, sessionKey)
	hadSession, err := c.sess.Delete(ctx, sessionKey)
	if err != nil {
		// Still there: revoking it would leave a cached session that no
		// longer works, and the person told to run logout again.
		session = nil
	}
	return hadCred || hadSession, session, err
}

func holdLoginLock(ctx context.Context, dir, name string, wait time.Duration) (func(), error) {
	if dir == "" {
		return func() {}, nil
	}
	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	l, err := lock.Acquire(lctx, dir, name)
	switch {
	case errors.Is(err, lock.ErrBusy):
		return nil, fmt.Errorf("a login for this context is still running (finish or cancel it, then run pinniped logout again): %w", err)
	case errors.Is(err, lock.ErrNoPlace):
		return func() {}, nil // no login can hold one there either
	case err != nil:
		return nil, err
	}
	return func() { _ = l.Unlock() }, nil
}

// NewCmdStatus returns `pinniped status`; runF (nil: the listing) does the work.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context) error) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show which cluster credentials are cached, where, and until when",
		Long: `status lists the cluster credentials "pinniped login" has cached, in the OS
keyring and in its file fallback, with when each expires. It never shows a
secret.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context())
			}
			return status(cmd.Context(), f)
		},
	}
}

func status(ctx context.Context, f *cmdutil.Factory) error {
	all, err := cachesFor(f.Caches, "keyring")
	if err != nil {
		return err
	}
	now := f.Now()
	any := false
	for _, c := range all {
		entries, err := c.creds.List(ctx)
		if err != nil && isKeyring(c.store) {
			fmt.Fprintf(f.IO.ErrOut, "! %s: %v\n", c.store.Describe(), err)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c.store.Describe(), err)
		}
		for _, e := range entries {
			any = true
			fmt.Fprintf(f.IO.Out, "%-60s expires in %-8s (%s)  stored in %s\n", e.Label,
				e.Expires.Sub(now).Round(time.Second), e.Expires.Local().Format(time.Kitchen), c.store.Describe())
		}
	}
	if !any {
		fmt.Fprintln(f.IO.Out, "No cached credentials.")
	}
	return nil
}
