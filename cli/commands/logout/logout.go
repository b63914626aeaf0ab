// Package logout implements `pinniped logout`: forget cached credentials
// and sessions, in every store a login may have written to, and end the
// sessions at their issuer. It talks to the caches directly.
package logout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cache/lock"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/credstore"
	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/kubeexec"
)

// Options are the inputs of `pinniped logout`.
type Options struct {
	cmdutil.NothingToComplete
	// Kube is --kubeconfig and the context to log out of.
	Kube            *kubeflags.Flags
	CredentialCache string
	All             bool
	// EndSession also opens the browser at the issuer's end_session_endpoint.
	EndSession bool
	// LoginWait bounds the wait for a login of the context still running.
	LoginWait time.Duration

	f *cmdutil.Factory
}

// NewCmdLogout returns `pinniped logout`; runF (nil: Options.Run) does the work.
func NewCmdLogout(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f, Kube: f.KubeFlags(), LoginWait: 10 * time.Second}
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
--client-secret is revoked with the client ID alone, since sessions do not
keep the secret; an issuer that wants the secret refuses, which is reported
as a warning (log out of its context first to revoke it). Sessions cached
by an older pinniped did not record their issuer: --all removes them
without revoking them. A file cache that cannot be read because its
directory is not private to you (others may enter it, or a link was put in
its place) is emptied by name without being read, never following a link,
so the sessions in it are not revoked; the problem is reported with its fix
and the exit code is 1.

--end-session also ends the issuer's browser session (OpenID Connect
RP-initiated logout), so that the next login asks for your password again:
it opens your browser at a one-shot page on 127.0.0.1 that posts the
session's ID token (as id_token_hint) and the client ID to the issuer's
end_session_endpoint, and waits up to 2 minutes for the browser to load it.
The ID token is never in a URL or on a command line, and on Linux the page
is served only to your own user. If the browser does not load it in time,
logout says the session was not ended, and where to sign out, and the exit
code is 1. Where no browser can be opened, it says where to sign out at the
issuer instead.

What logout cannot recall: cluster credentials already handed to kubectl
stay valid until they expire (a Concierge's within minutes; without a
Concierge the ID token is the credential, valid as long as the issuer made
it, often an hour), and so does the session's ID token.`,
		Example: `  pinniped logout
  pinniped logout --context=prod --end-session
  pinniped logout --all`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, runF),
	}
	o.Kube.AddKubeconfig(cmd.Flags(), "kubeconfig whose context to log out of")
	o.Kube.AddContext(cmd.Flags(), "context to log out of", "context")
	cmd.Flags().BoolVar(&o.All, "all", false, "end and forget every cached session and credential")
	cmd.Flags().BoolVar(&o.EndSession, "end-session", false, "also end the issuer's browser session (RP-initiated logout, in your browser)")
	cmd.Flags().StringVar(&o.CredentialCache, "credential-cache", "", "override the cache the context's login uses")
	return cmd
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if o.All && (o.Kube.Context() != "" || o.Kube.Path() != "") {
		return errors.New("--all forgets every context's login; leave out --context and --kubeconfig")
	}
	return nil
}

// Run forgets.
func (o *Options) Run(ctx context.Context) error {
	errOut := o.f.IO.ErrOut
	ender := newEnder(o.f, o.EndSession)
	if o.All {
		n, removed, err := forgetAll(ctx, o.f.Caches, errOut, o.LoginWait)
		if err == nil {
			fmt.Fprintf(errOut, "Removed %d cached credentials and sessions.\n", n)
		}
		// Before any failure is returned: what was removed is nowhere a
		// second logout would find it.
		endAll(ctx, ender, removed)
		if err != nil {
			return err
		}
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
	older := 0
	for _, t := range removed {
		if t.Issuer == nil {
			if t.RefreshToken != "" || t.AccessToken != "" {
				older++
			}
			continue
		}
		// A session logged in with --client-secret does not keep it: it is
		// revoked with the client ID alone, which many issuers accept
		// (RFC 7009 lets them), and a refusal is only a warning.
		ender.end(ctx, &config.OIDC{Issuer: t.Issuer.URL, ClientID: t.Issuer.ClientID, CABundle: t.Issuer.CABundle}, t, t.Issuer.HasClientSecret)
	}
	if older > 0 {
		fmt.Fprintf(ender.errOut, "! %d session(s) were cached by an older pinniped, which did not record their issuer: they were removed here but not revoked, "+
			"and their refresh tokens stay valid at the issuer until they expire\n", older)
	}
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
		out[i] = caches{st, &credcache.Cache{Now: time.Now, Store: st, LockDir: lockDir}, &sessions.Cache{Store: st, LockDir: lockDir}, lockDir}
	}
	return out, nil
}

// forgetAll clears every store, each with its own index, and returns the
// sessions it removed, for revoking, also when it fails partway. A keyring
// that does not answer is reported, not fatal: the files are still cleared.
func forgetAll(ctx context.Context, places cmdutil.Caches, errOut io.Writer, loginWait time.Duration) (int, []*sessions.Tokens, error) {
	all, err := cachesFor(places, "keyring")
	if err != nil {
		return 0, nil, err
	}
	total := 0
	var removed []*sessions.Tokens
	var unsafe error
	for _, c := range all {
		n, held, err := clearStore(ctx, c, loginWait)
		total += n
		removed = append(removed, held...)
		if err != nil {
			if credstore.IsKeyring(c.store) {
				fmt.Fprintf(errOut, "! %s: %v; not all it holds was removed (run pinniped logout --all again once it answers)\n", c.store.Describe(), err)
				continue
			}
			if errors.Is(err, privatedir.ErrNotPrivate) {
				// The other stores are still cleared.
				unsafe = cmp.Or(unsafe, err)
				continue
			}
			return total, removed, err
		}
	}
	return total, removed, unsafe
}

// clearStore removes each session of c under its login lock, then every
// credential and whatever the index still lists. Without the lock, a
// refresh running meanwhile could rotate the refresh token between the read
// and the removal: the spent token would be revoked (an issuer answers 200
// for a token it does not know) and the new one removed unrevoked.
//
// A store that breaks the private-directory rule cannot be read, but may
// hold credentials and sessions all the same: it is emptied without
// reading (unsafeStore says how).
func clearStore(ctx context.Context, c caches, loginWait time.Duration) (int, []*sessions.Tokens, error) {
	n, held, err := clearListed(ctx, c, loginWait)
	if !errors.Is(err, privatedir.ErrNotPrivate) {
		return n, held, err
	}
	all, ok := c.store.(interface {
		RemoveAll(context.Context) (int, error)
	})
	if !ok {
		return n, held, err
	}
	m, rerr := all.RemoveAll(ctx)
	return n + m, held, unsafeStore{store: c.store.Describe(), problem: err, removeErr: rerr, what: "everything cached there"}
}

func clearListed(ctx context.Context, c caches, loginWait time.Duration) (int, []*sessions.Tokens, error) {
	n := 0
	var held []*sessions.Tokens
	keys, err := c.sess.Keys(ctx)
	if err != nil {
		return 0, nil, err
	}
	for _, k := range keys {
		had, t, err := forgetSession(ctx, c, k, loginWait)
		if t != nil {
			held = append(held, t)
		}
		if had {
			n++
		}
		if err != nil {
			return n, held, err
		}
	}
	m, err := c.creds.Clear(ctx)
	n += m
	if err != nil {
		return n, held, err
	}
	// Left in the index: entries whose value was already gone.
	_, err = c.sess.Clear(ctx)
	return n, held, err
}

// forgetSession removes the session under key, holding the lock a login or
// refresh of it holds; it returns the session it read, for revoking, also
// when the removal failed partway.
func forgetSession(ctx context.Context, c caches, key string, loginWait time.Duration) (bool, *sessions.Tokens, error) {
	unlock, err := holdLoginLock(ctx, c.lockDir, key, loginWait)
	if err != nil {
		return false, nil, err
	}
	defer unlock()
	// A session the store refuses to read (a link, say) stops here, as
	// for one context: clearStore then empties the store by name and says
	// that what it held was not revoked.
	t, err := c.sess.Load(ctx, key)
	if err != nil {
		return false, nil, err
	}
	had, err := c.sess.Delete(ctx, key)
	return had, t, err
}

func (o *Options) logoutContext(ctx context.Context, ender *ender) error {
	errOut, contextName := o.f.IO.ErrOut, o.Kube.Context()
	raw, err := o.Kube.RawConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	// The kubeconfig's own environment for the plugin comes first: the
	// keys of a password login depend on PINNIPED_USERNAME. The cluster is
	// what kubectl hands the plugin: the CA read from a file too.
	if contextName == "" {
		contextName = raw.CurrentContext
	}
	// A static token's login is told so before its arguments are read:
	// its token variable need not be set in this shell.
	if kctx := raw.Contexts[contextName]; kctx != nil {
		if u := raw.AuthInfos[kctx.AuthInfo]; u != nil && u.Exec != nil && len(u.Exec.Args) >= 2 && u.Exec.Args[0] == "login" && u.Exec.Args[1] == "static" {
			return errors.New("static-token logins keep no session; their cached cluster credential expires within minutes (use --all to remove it now)")
		}
	}
	kc, err := kubeexec.ReadContext(raw, contextName, handoff.IsFront, o.f.LookupEnv, func(name string) (*rest.Config, error) {
		return o.Kube.ClientConfigFor(name).ClientConfig()
	})
	if errors.Is(err, kubeexec.ErrNotPinniped) {
		return fmt.Errorf("context %q does not log in with pinniped; nothing to forget", contextName)
	}
	if err != nil {
		return err
	}
	login, cluster := kc.Login.OIDC, kc.Cluster
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
	var failure error
	for _, c := range all {
		had, session, err := forget(ctx, c, key, sk, o.LoginWait)
		if session != nil {
			held = append(held, session)
		}
		if err != nil {
			if credstore.IsKeyring(c.store) {
				fmt.Fprintf(errOut, "! %s: %v; what it holds for %s was not removed (run pinniped logout again once it answers)\n", c.store.Describe(), err, contextName)
				continue
			}
			if errors.Is(err, privatedir.ErrNotPrivate) {
				// Emptied without reading: the other stores still are.
				failure = cmp.Or(failure, err)
				removed = removed || had
				continue
			}
			// What was read from the keyring is gone from it already: a
			// second logout would not find it to revoke it.
			failure = err
			break
		}
		removed = removed || had
	}
	switch {
	case failure != nil:
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
		ender.end(ctx, login, t, false)
	}
	if len(held) == 0 && o.EndSession {
		// No ID token to hint with; the issuer then asks which session to end.
		ender.end(ctx, login, nil, false)
	}
	return failure
}

// forget removes one credential and one session from c; it reports whether
// either was there, and returns the session it removed.
//
// A store that breaks the private-directory rule (a planted link, a
// directory others may enter) cannot be read, but may hold both all the
// same: they are removed by name, without reading them (a link is removed,
// never followed), and the error is an unsafeStore that says so and how to
// fix the store.
func forget(ctx context.Context, c caches, key, sessionKey string, loginWait time.Duration) (bool, *sessions.Tokens, error) {
	had, session, err := forgetListed(ctx, c, key, sessionKey, loginWait)
	if !errors.Is(err, privatedir.ErrNotPrivate) {
		return had, session, err
	}
	rerr := errors.Join(c.store.Delete(ctx, key), c.store.Delete(ctx, sessionKey))
	return had, session, unsafeStore{store: c.store.Describe(), problem: err, removeErr: rerr, what: "the credential and session of this context"}
}

func forgetListed(ctx context.Context, c caches, key, sessionKey string, loginWait time.Duration) (bool, *sessions.Tokens, error) {
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
	// Read before any removal: an unreadable session stops here, with the
	// credential still listed, and both are removed by name.
	session, err := c.sess.Load(ctx, sessionKey)
	if err != nil {
		return false, nil, err
	}
	if err := c.creds.Delete(ctx, key); err != nil {
		return hadCred, session, err
	}
	// Returned even when Delete fails: it may have removed the session and
	// failed on the index, and a session not found again is never revoked.
	// One still cached after a revocation fails its next refresh, which
	// asks for a login.
	hadSession, err := c.sess.Delete(ctx, sessionKey)
	return hadCred || hadSession, session, err
}

// unsafeStore is a store that breaks the private-directory rule, emptied
// (of what) without reading it.
type unsafeStore struct {
	store, what        string
	problem, removeErr error
}

func (u unsafeStore) Error() string {
	if u.removeErr != nil {
		return fmt.Sprintf("%s: %v; %s could not be removed from it either (%v): fix it as said, then run pinniped logout again", u.store, u.problem, u.what, u.removeErr)
	}
	return fmt.Sprintf("%s: %v; %s was removed from it by name, without being read, so no session there was revoked at its issuer: fix it as said", u.store, u.problem, u.what)
}

func (u unsafeStore) Unwrap() error { return u.problem }

func holdLoginLock(ctx context.Context, dir, name string, wait time.Duration) (func(), error) {
	release, _, err := lock.Hold(ctx, dir, name, wait) // where nobody can lock, no login holds one either
	if errors.Is(err, lock.ErrBusy) {
		return nil, fmt.Errorf("a login for this context is still running (finish or cancel it, then run pinniped logout again): %w", err)
	}
	return release, err
}
