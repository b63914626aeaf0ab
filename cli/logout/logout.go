// Package logout implements `pinniped logout` and `pinniped status`: forget
// cached credentials, and show what is cached where, never the secrets.
package logout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/cli/execcred"
	"github.com/pinniped-kit/pinniped/cli/logincmd"
)

// NewLogoutCommand returns `pinniped logout`.
func NewLogoutCommand(errOut io.Writer) *cobra.Command {
	var kubeconfigPath, contextName, cacheMode string
	var all bool
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "Forget cached credentials for a kubeconfig context, or all of them",
		Long: `logout removes the cached cluster credential and OIDC session (ID and refresh
tokens) that "pinniped login" keeps for the current kubeconfig context (or
--context), so the next kubectl call logs in again. --all forgets everything.
Credentials already handed to kubectl stay valid until they expire (minutes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if all {
				total := 0
				for _, mode := range []string{"keyring", "file"} {
					engine, err := logincmd.NewEngine(logincmd.Streams{ErrOut: io.Discard}, mode)
					if err != nil {
						return err
					}
					n, err := engine.LogoutAll(ctx)
					if err != nil {
						return err
					}
					total += n
				}
				fmt.Fprintf(errOut, "Removed %d cached credentials and sessions.\n", total)
				return nil
			}
			return logoutContext(ctx, errOut, kubeconfigPath, contextName, cacheMode)
		},
	}
	cmd.Flags().StringVar(&kubeconfigPath, "kubeconfig", "", "kubeconfig whose context to log out of (default $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&contextName, "context", "", "context to log out of (default: current)")
	cmd.Flags().BoolVar(&all, "all", false, "forget every cached credential and session")
	cmd.Flags().StringVar(&cacheMode, "credential-cache", "", "override the cache the context's login uses")
	return cmd
}

func logoutContext(ctx context.Context, errOut io.Writer, path, contextName, cacheOverride string) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	raw, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).RawConfig()
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
	if user == nil || user.Exec == nil || filepath.Base(user.Exec.Command) != "pinniped" || len(user.Exec.Args) < 2 || user.Exec.Args[0] != "login" {
		return fmt.Errorf("context %q does not log in with pinniped; nothing to forget", contextName)
	}
	if user.Exec.Args[1] != "oidc" {
		return errors.New("static-token logins keep no session; their cached cluster credential expires within minutes (use --all to remove it now)")
	}
	exec := &execcred.Request{APIVersion: execcred.V1}
	if c := raw.Clusters[kctx.Cluster]; c != nil && user.Exec.ProvideClusterInfo {
		exec.Cluster = &execcred.Cluster{Server: c.Server, CertificateAuthorityData: c.CertificateAuthorityData}
	}
	req, mode, err := logincmd.ParseOIDCArgs(user.Exec.Args[2:], exec)
	if err != nil {
		return fmt.Errorf("context %q: cannot read its pinniped login arguments: %w", contextName, err)
	}
	if cacheOverride != "" {
		mode = cacheOverride
	}
	// The keyring's file fallback may hold copies written while the keyring
	// was unavailable, with an index of their own: forget them there too.
	modes := []string{mode}
	if mode == "keyring" {
		modes = append(modes, "file")
	}
	removed := false
	for _, m := range modes {
		engine, err := logincmd.NewEngine(logincmd.Streams{ErrOut: io.Discard}, m)
		if err != nil {
			return err
		}
		r, err := engine.Logout(ctx, req, exec)
		if err != nil {
			return err
		}
		removed = removed || r
	}
	if !removed {
		fmt.Fprintf(errOut, "Nothing cached for context %s; you are logged out.\n", contextName)
		return nil
	}
	fmt.Fprintf(errOut, "Logged out of %s: the next kubectl call will log in again.\n", contextName)
	return nil
}

// NewStatusCommand returns `pinniped status`.
func NewStatusCommand(out io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show which cluster credentials are cached, where, and until when",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			any := false
			seen := map[string]bool{}
			for _, mode := range []string{"keyring", "file"} {
				engine, err := logincmd.NewEngine(logincmd.Streams{ErrOut: io.Discard}, mode)
				if err != nil {
					return err
				}
				entries, err := engine.Cached(cmd.Context())
				// Without a keyring, both modes end up in the same files.
				where := engine.Store.Describe()
				if seen[where] {
					continue
				}
				seen[where] = true
				if err != nil {
					return err
				}
				for _, e := range entries {
					any = true
					fmt.Fprintf(out, "%-60s expires in %-8s (%s)  stored in %s\n", e.Label,
						time.Until(e.Expires).Round(time.Second), e.Expires.Local().Format(time.Kitchen), engine.Store.Describe())
				}
			}
			if !any {
				fmt.Fprintln(out, "No cached credentials.")
			}
			return nil
		},
	}
}
