// Package status implements `pinniped status`: which cluster credentials
// are cached, where and until when, grouped by the login session they came
// from, and whether pinniped proxy runs. It reads the caches and the
// proxy's state files only: no network, never a secret or an identity.
package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cache/privatedir"
	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/credstore"
	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// Options are the inputs of `pinniped status`: none but the world.
type Options struct {
	cmdutil.NothingToComplete
	cmdutil.NothingToValidate

	f *cmdutil.Factory
}

// Run lists the caches and the proxy.
func (o *Options) Run(ctx context.Context) error { return run(ctx, o.f) }

// NewCmdStatus returns `pinniped status`; runF (nil: Options.Run) does the work.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f}
	return &cobra.Command{
		Use:   "status",
		Short: "Show which cluster credentials are cached, where, and until when",
		Long: `status lists the cluster credentials "pinniped login" has cached, in the OS
keyring and in its file fallback, with when each expires, under the login
session each came from: clusters that trust one issuer share one session,
so one login serves them all, and the session says whether it can renew
them without you. It never shows a secret. It also says whether "pinniped
proxy" runs, where, and the state of each context it serves.`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, runF),
	}
}

// run lists every store a keyring-mode login may have written to (the
// keyring and its file fallback), grouped by the OIDC session each
// credential came from (clusters that trust one issuer share one login),
// then the proxy.
func run(ctx context.Context, f *cmdutil.Factory) error {
	stores, err := f.Caches.Everywhere("keyring")
	if err != nil {
		return err
	}
	lockDir, err := f.Caches.LockDir("keyring")
	if err != nil {
		return err
	}
	now := f.Now()
	type cached struct {
		credcache.Entry
		store cache.Store
	}
	bySession := map[string][]cached{}
	var sessionKeys []string
	for _, st := range stores {
		entries, err := (&credcache.Cache{Store: st, LockDir: lockDir, Now: f.Now}).List(ctx)
		if err != nil && (credstore.IsKeyring(st) || errors.Is(err, privatedir.ErrNotPrivate)) {
			fmt.Fprintf(f.IO.ErrOut, "! %s: %v\n", st.Describe(), err)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", st.Describe(), err)
		}
		for _, e := range entries {
			if _, ok := bySession[e.Session]; !ok && e.Session != "" {
				sessionKeys = append(sessionKeys, e.Session)
			}
			bySession[e.Session] = append(bySession[e.Session], cached{e, st})
		}
	}
	if len(bySession) == 0 {
		fmt.Fprintln(f.IO.Out, "No cached credentials.")
	}
	line := func(indent string, c cached) {
		fmt.Fprintf(f.IO.Out, "%s%-60s expires in %-8s (%s)  stored in %s\n", indent, termsafe.Visible(c.Label),
			c.Expires.Sub(now).Round(time.Second), c.Expires.Local().Format(time.Kitchen), c.store.Describe())
	}
	for _, key := range sessionKeys {
		fmt.Fprintln(f.IO.Out, sessionLine(ctx, stores, lockDir, key, now))
		for _, c := range bySession[key] {
			line("  ", c)
		}
	}
	if rest := bySession[""]; len(rest) > 0 {
		if len(sessionKeys) > 0 {
			fmt.Fprintln(f.IO.Out, "Credentials of no session (static tokens, or cached by an older pinniped):")
		}
		for _, c := range rest {
			line("  ", c)
		}
	}
	dir, err := f.Caches.ConfigDir()
	if err != nil {
		return fmt.Errorf("find pinniped proxy's state directory: %w", err)
	}
	return printProxy(f.IO.Out, state.DefaultDir(dir), now)
}

// sessionLine says what a session is (its issuer and client) and what it
// can still do: the credentials under it are renewed from it without a
// person while its refresh token lasts. Never a token or an identity.
func sessionLine(ctx context.Context, stores []cache.Store, lockDir, key string, now time.Time) string {
	for _, st := range stores {
		t, err := (&sessions.Cache{Store: st, LockDir: lockDir}).Load(ctx, key)
		if errors.Is(err, privatedir.ErrNotPrivate) {
			return fmt.Sprintf("A session in %s that is not read: %s. Its clusters:", st.Describe(), termsafe.Visible(err.Error()))
		}
		if err != nil || t == nil {
			continue
		}
		where := "an issuer (recorded by an older pinniped)"
		if t.Issuer != nil {
			where = termsafe.Visible(t.Issuer.URL) + " (client " + termsafe.Visible(t.Issuer.ClientID) + ")"
		}
		renews := "no refresh token: the next renewal after it expires asks you to log in"
		if t.RefreshToken != "" {
			renews = "renewed without you while the issuer honours its refresh token"
		}
		idToken := "ID token expired"
		if t.IDTokenExpiry.After(now) {
			idToken = "ID token valid until " + t.IDTokenExpiry.Local().Format(time.Kitchen)
		}
		return fmt.Sprintf("Session at %s, in %s: %s; %s. Its clusters:", where, st.Describe(), idToken, renews)
	}
	return "A session no longer cached (pinniped logout, or expired); its clusters until their credentials expire:"
}

// printProxy writes `pinniped status`'s lines about the proxy whose
// state directory is dir: running (pid, address, each context's state and
// credential expiry) or not. It reads files only: no network, no secret,
// no identity.
func printProxy(w io.Writer, dir string, now time.Time) error {
	rep, err := state.Status(dir)
	if err != nil {
		return fmt.Errorf("pinniped proxy: %w", err)
	}
	switch {
	case rep.Stale:
		fmt.Fprintf(w, "pinniped proxy: not running (a proxy stopped without cleaning up; its state in %s is stale). Start it with `pinniped proxy`.\n", dir)
		return nil
	case !rep.Running:
		fmt.Fprintln(w, "pinniped proxy: not running (start it with `pinniped proxy`)")
		return nil
	case rep.State == nil:
		fmt.Fprintln(w, "pinniped proxy: running (starting up)")
		return nil
	}
	s := rep.State
	fmt.Fprintf(w, "pinniped proxy: running (pid %d) at %s since %s, %d contexts:\n", s.PID, s.Address, s.Started.Local().Format(time.DateTime), len(s.Contexts))
	slugs := make([]string, 0, len(s.Contexts))
	for slug := range s.Contexts {
		slugs = append(slugs, slug)
	}
	sort.Slice(slugs, func(i, j int) bool { return s.Contexts[slugs[i]].Context < s.Contexts[slugs[j]].Context })
	for _, slug := range slugs {
		c := s.Contexts[slug]
		line := fmt.Sprintf("  %-30s %s  %s", c.Context, c.Server, c.State)
		switch {
		case c.Expires.IsZero() && c.Renewals > 0:
			line += ", credential without expiry"
		case !c.Expires.IsZero() && !now.Before(c.Expires):
			line += fmt.Sprintf(", credential expired at %s", c.Expires.Local().Format(time.Kitchen))
		case !c.Expires.IsZero():
			line += fmt.Sprintf(", credential expires in %s (%s)", c.Expires.Sub(now).Round(time.Second), c.Expires.Local().Format(time.Kitchen))
		}
		if c.Problem != "" {
			line += ": " + c.Problem
		}
		fmt.Fprintln(w, line)
	}
	return nil
}
