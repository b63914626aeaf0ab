// Package loginsetup builds the login runner the way every caller must:
// from the Factory's caches, clock, environment and streams. `pinniped
// login` (cli/commands/login) and pinniped proxy (cli/commands/proxy) both
// build theirs here, so they share caches and keys, and neither command
// imports the other.
package loginsetup

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/login"
	"github.com/pinniped-kit/pinniped/cli/login/agentclient"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
	"github.com/pinniped-kit/pinniped/cli/shellquote"
	"github.com/pinniped-kit/pinniped/cli/ui"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
	"github.com/pinniped-kit/pinniped/cli/warnonce"
	"github.com/pinniped-kit/pinniped/kubeconfig"
)

// NewOIDC is the runner `pinniped login oidc` uses for the login c, shown
// in view: New, with the issuer c names to discover.
func NewOIDC(f *cmdutil.Factory, c *config.OIDC, view *ui.Login) (*login.Runner, error) {
	runner, err := New(f, c.CredentialCache, view)
	if err != nil {
		return nil, err
	}
	runner.Discover = func(ctx context.Context) (login.Provider, error) {
		p, err := oidclogin.Discover(ctx, c, nil)
		if err == nil && len(p.DroppedScopes) > 0 {
			runner.Debug("the issuer does not list the scopes %v as supported; asking without them", p.DroppedScopes)
		}
		return p, err
	}
	return runner, nil
}

// New is the runner `pinniped login` uses, for a login whose
// --credential-cache is cacheMode, shown in view: the factory's caches,
// clock, environment (PINNIPED_DEBUG, PINNIPED_SKIP_PRINT_LOGIN_URL) and
// streams (the credential goes to f.IO.Out only through Login*). pinniped
// proxy builds its runners here too, so both share caches and keys.
func New(f *cmdutil.Factory, cacheMode string, view *ui.Login) (*login.Runner, error) {
	// Upstream's --credential-cache="" turns off only the cluster-credential
	// cache: sessions are still kept (in the default store).
	noCredentials := cacheMode == ""
	if noCredentials {
		cacheMode = "keyring"
	}
	warn := f.IO.ErrOut
	if w := Warnings(f, cacheMode); w != nil {
		warn = w.Writer(warn)
	}
	store, err := f.Caches.Open(cacheMode, warn)
	if err != nil {
		return nil, err
	}
	lockDir, err := f.Caches.LockDir(cacheMode)
	if err != nil {
		return nil, err
	}
	e := &login.Runner{
		Store: store, LockDir: lockDir, UI: view, Stdout: f.IO.Out, Now: f.Now,
		Exchange: exchange, CanPrompt: view.CanPrompt, NoCredentialCache: noCredentials,
		QuietLoginURL: f.Getenv("PINNIPED_SKIP_PRINT_LOGIN_URL") == "true",
		Debug:         func(string, ...any) {},
	}
	e.LoginHint = LoginHint(f.Getenv)
	if v := f.Getenv("PINNIPED_LOGIN_COOLOFF"); v != "" {
		switch d, err := time.ParseDuration(v); {
		case err != nil:
			// A typo must not cost the login itself.
			view.Warn(fmt.Sprintf("PINNIPED_LOGIN_COOLOFF=%q is not a duration (%v)", termsafe.Visible(v), err),
				"using "+login.DefaultCoolOff.String()+"; set e.g. 10m, or 0 to turn the cool-off off")
		case d == 0:
			e.CoolOff = -1
		default:
			e.CoolOff = d
		}
	}
	if Debug(f) {
		e.Debug = func(format string, args ...any) {
			fmt.Fprintf(f.IO.ErrOut, "pinniped debug: "+format+"\n", args...)
		}
	}
	return e, nil
}

// Debug is PINNIPED_DEBUG: every step, warning and decision of a login is
// shown.
func Debug(f *cmdutil.Factory) bool { return loginflags.Debug(f.Getenv) }

// Warnings is what lets a login's warnings through once per cause per day,
// kept beside the locks of cacheMode's logins; nil under PINNIPED_DEBUG,
// which shows them all.
func Warnings(f *cmdutil.Factory, cacheMode string) *warnonce.Store {
	if Debug(f) {
		return nil
	}
	if cacheMode == "" {
		cacheMode = "keyring"
	}
	dir, _ := f.Caches.LockDir(cacheMode) // "": once per process, at least
	return &warnonce.Store{Dir: dir, Now: f.Now}
}

// Quiet is the options of the view of a login kubectl runs as its exec
// plugin: nothing shown unless the person is needed (package ui), warnings
// once per cause per day; under PINNIPED_DEBUG, everything.
func Quiet(f *cmdutil.Factory, cacheMode string, o ui.LoginOptions) ui.LoginOptions {
	w := Warnings(f, cacheMode)
	if w == nil {
		return o
	}
	o.Quiet, o.Once = true, w.First
	return o
}

// LoginHint is the command a person runs to log in ahead for this login:
// `pinniped login --context NAME` for the context the exec entry names
// (kubeconfig.ContextEnv), with the kubeconfig the calling tool reads
// ($KUBECONFIG, as kubectl hands it to the plugin). Without a name it
// cannot be told which context is meant, and says so.
func LoginHint(getenv func(string) string) string {
	name := getenv(kubeconfig.ContextEnv)
	if name == "" {
		return "pinniped login --context <the context your tool uses>"
	}
	hint := "pinniped login --context " + shellquote.Quote(termsafe.Visible(name))
	if kc := getenv("KUBECONFIG"); kc != "" && !strings.ContainsRune(kc, filepath.ListSeparator) {
		hint += " --kubeconfig " + shellquote.Quote(termsafe.Visible(kc))
	}
	return hint
}

// exchange is the agent's token exchange, its refusal said in the
// runner's terms (login.ErrRefused) as well as the client's.
func exchange(ctx context.Context, c *config.Concierge, token string) (*loginv1alpha1.ClusterCredential, error) {
	cc, err := agentclient.Exchange(ctx, c, token)
	if errors.Is(err, agentclient.ErrRefused) {
		return nil, refused{err}
	}
	return cc, err
}

// refused is the agent client's refusal, which is also login.ErrRefused.
type refused struct{ error }

func (refused) Is(target error) bool { return target == login.ErrRefused }

func (r refused) Unwrap() error { return r.error }
