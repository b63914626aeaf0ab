package login

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/login"
	"github.com/pinniped-kit/pinniped/cli/login/kubeexec"
	"github.com/pinniped-kit/pinniped/cli/login/loginsetup"
	"github.com/pinniped-kit/pinniped/cli/ui"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// AheadOptions are the inputs of `pinniped login` without a kind of
// login: log in ahead, as a person at a terminal, for a kubeconfig
// context, with the login its exec entry runs.
type AheadOptions struct {
	// Kube is --kubeconfig and the context to log in.
	Kube *kubeflags.Flags

	// kc is the context's login, as Complete read it.
	kc *kubeexec.Context
	f  *cmdutil.Factory
}

func (o *AheadOptions) bind(cmd *cobra.Command) {
	o.Kube.AddKubeconfig(cmd.Flags(), "kubeconfig whose context to log in")
	o.Kube.AddContext(cmd.Flags(), "kubeconfig context to log in", "context")
}

// Complete reads the context's login from the kubeconfig, as kubectl would
// run its exec entry.
func (o *AheadOptions) Complete() error {
	raw, err := o.Kube.RawConfig()
	if err != nil {
		return fmt.Errorf("load the kubeconfig: %w", err)
	}
	kc, err := kubeexec.ReadContext(raw, o.Kube.Context(), handoff.IsFront, o.f.LookupEnv, func(name string) (*rest.Config, error) {
		return o.Kube.ClientConfigFor(name).ClientConfig()
	})
	if errors.Is(err, kubeexec.ErrNotPinniped) {
		return fmt.Errorf("%w, so there is nothing to log in ahead (pinniped get kubeconfig makes a kubeconfig whose contexts do)", err)
	}
	if err != nil {
		return err
	}
	o.kc = kc
	return nil
}

// Validate checks the context's login as its exec entry would.
func (o *AheadOptions) Validate() error {
	if err := o.kc.Login.Validate(); err != nil {
		return fmt.Errorf("context %q: its pinniped login would fail: %w", o.kc.Name, err)
	}
	return nil
}

// Run logs the context in and says until when its credential is cached:
// with the same login, caches and keys as kubectl's calls, which then find
// it. It prints nothing on stdout: this is not kubectl's exec plugin.
func (o *AheadOptions) Run(ctx context.Context) error {
	kc := o.kc
	f := o.asPlugin(kc.Exec)
	req := login.Request{Cluster: kc.Cluster, Interactive: true}
	var cred *credcache.Credential
	if c := kc.Login.OIDC; c != nil {
		ctx, cancel := context.WithTimeout(ctx, c.Timeout)
		defer cancel()
		ctx, cancelLogin := context.WithCancelCause(ctx)
		defer cancelLogin(nil)
		view := ui.ForLogin(ui.LoginOptions{
			In: f.IO.In, Out: f.IO.ErrOut, Interactive: true, Getenv: f.Getenv, Open: f.Browser, Now: f.Now,
			Issuer: c.Issuer, Cancel: cancelLogin,
		})
		runner, err := loginsetup.NewOIDC(f, c, view)
		if err != nil {
			return err
		}
		// A person ran this: the cool-off that holds back callers nobody
		// watches (IDEs) never holds it back, even without a terminal.
		attended := req
		attended.Attended = true
		cred, err = runner.CredentialOIDC(ctx, c, attended)
		if err = view.Finish(err); err != nil {
			return err
		}
	} else {
		// A static token never needs a person; with the agent, its
		// credential is cached ahead all the same.
		c := kc.Login.Static
		if c.Concierge == nil {
			fmt.Fprintf(o.f.IO.ErrOut, "Context %s logs in with a static token, which needs nobody: nothing to do ahead.\n", termsafe.Visible(kc.Name))
			return nil
		}
		view := ui.ForLogin(ui.LoginOptions{In: f.IO.In, Out: f.IO.ErrOut, Getenv: f.Getenv, Open: f.Browser})
		runner, err := loginsetup.New(f, c.CredentialCache, view)
		if err != nil {
			return err
		}
		if cred, err = runner.CredentialStatic(ctx, c, req); err != nil {
			return err
		}
		fmt.Fprintf(o.f.IO.ErrOut, "✓ Context %s: a cluster credential is cached until %s (a static token needs nobody to renew it).\n",
			termsafe.Visible(kc.Name), cred.ExpirationTimestamp.Local().Format(time.Kitchen))
		return nil
	}
	name := termsafe.Visible(kc.Name)
	if cred.ExpirationTimestamp.IsZero() {
		fmt.Fprintf(o.f.IO.ErrOut, "✓ Context %s is logged in.\n", name)
		return nil
	}
	fmt.Fprintf(o.f.IO.ErrOut, "✓ Context %s is logged in: kubectl and the tools that use this context find the credential cached until %s, and the session renews it after that.\n",
		name, cred.ExpirationTimestamp.Local().Format(time.Kitchen))
	return nil
}

// asPlugin is the Factory as kubectl's call of the exec entry would see
// the world: the entry's own environment over this process's (an entry
// that sets XDG_CONFIG_HOME, PINNIPED_* or the like), and the caches that
// environment names, so this login and kubectl's share them.
func (o *AheadOptions) asPlugin(entry *clientcmdapi.ExecConfig) *cmdutil.Factory {
	if len(entry.Env) == 0 {
		return o.f
	}
	// The keyring and the home directory are found through the process's
	// own environment (go-keyring's D-Bus, os.UserHomeDir), which an entry
	// cannot change for this process: say so rather than cache where
	// kubectl's call will not look.
	for _, e := range entry.Env {
		followed := false
		switch e.Name {
		case "HOME":
			// Only the file cache's default place depends on it, and not
			// where the entry also sets XDG_CONFIG_HOME (followed below).
			followed = runtime.GOOS == "windows" || slices.ContainsFunc(entry.Env, func(v clientcmdapi.ExecEnvVar) bool { return v.Name == "XDG_CONFIG_HOME" })
		case "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR":
			// The keyring reaches the Secret Service over D-Bus only on
			// Linux and the BSDs.
			followed = runtime.GOOS == "darwin" || runtime.GOOS == "windows"
		default:
			followed = true
		}
		if !followed {
			if e.Value != o.f.Getenv(e.Name) {
				fmt.Fprintf(o.f.IO.ErrOut, "! the context's exec entry sets %s, which this login cannot follow: it caches where this shell's %s says, so kubectl may log in again itself (run pinniped login --context in a shell with the same %s)\n",
					e.Name, e.Name, e.Name)
			}
		}
	}
	return o.f.WithEnv(kubeexec.Env(entry, o.f.LookupEnv))
}
