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
	"github.com/pinniped-kit/pinniped/cli/login/kubeexec"
)

// Options are the inputs of `pinniped logout`.
type Options struct {
	Kubeconfig, Context string
	CredentialCache     string
	All                 bool
	// LoginWait bounds the wait for a login of the context still running.
	LoginWait time.Duration

	f *cmdutil.Factory
}

// NewCmdLogout returns `pinniped logout`; runF (nil: Options.Run) does the work.
func NewCmdLogout(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f, LoginWait: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "Forget cached credentials for a kubeconfig context, or all of them",
		Long: `logout removes the cached cluster credential and OIDC session (ID and refresh
tokens) that "pinniped login" keeps for the current kubeconfig context (or
--context), so the next kubectl call logs in again. --all forgets everything.
Both look in the OS keyring and in its file fallback.
Credentials already handed to kubectl stay valid until they expire (minutes).`,
		Example: `  pinniped logout
  pinniped logout --context=prod
  pinniped logout --all`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, o.Validate, runF, o.Run),
	}
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig whose context to log out of (default $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&o.Context, "context", "", "context to log out of (default: current)")
	cmd.Flags().BoolVar(&o.All, "all", false, "forget every cached credential and session")
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
	if o.All {
		n, err := forgetAll(ctx, o.f.Caches, errOut)
		if err != nil {
			return err
		}
		fmt.Fprintf(errOut, "Removed %d cached credentials and sessions.\n", n)
		return nil
	}
	return o.logoutContext(ctx)
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

// forgetAll clears every store, each with its own index. A keyring that
// does not answer is reported, not fatal: the files are still cleared.
func forgetAll(ctx context.Context, places cmdutil.Caches, errOut io.Writer) (int, error) {
	all, err := cachesFor(places, "keyring")
	if err != nil {
		return 0, err
	}
	total := 0
	for _, c := range all {
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
			return total, err
		}
		total += n
	}
	return total, nil
}

func (o *Options) logoutContext(ctx context.Context) error {
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
	for _, c := range all {
		had, err := forget(ctx, c, key, sk, o.LoginWait)
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
	return nil
}

// forget removes one credential and one session from c; it reports whether
// either was there.
func forget(ctx context.Context, c caches, key, sessionKey string, loginWait time.Duration) (bool, error) {
	// A login or refresh running now for this context would save its
	// result after the delete, and the user would stay logged in: wait for
	// it (the locks it holds), briefly.
	for _, name := range []string{key, sessionKey} {
		unlock, err := holdLoginLock(ctx, c.lockDir, name, loginWait)
		if err != nil {
			return false, err
		}
		defer unlock()
	}
	_, hadCred, err := c.creds.Get(ctx, key)
	if err != nil {
		return false, err
	}
	if err := c.creds.Delete(ctx, key); err != nil {
		return hadCred, err
	}
	hadSession, err := c.sess.Delete(ctx, sessionKey)
	return hadCred || hadSession, err
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
