//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// upstreamKubeconfig writes a copy of the kubeconfig ours in exactly the
// shape upstream Pinniped's get kubeconfig (v0.39) writes
// (docs/supervisor-protocol.md, section 9): exec v1beta1, no
// interactiveMode, upstream's install hint, and the arguments args builds,
// in upstream's order, from the values of ours (value of a flag).
func upstreamKubeconfig(t *testing.T, ours string, args func(value func(flag string) string) []string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(ours)
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	if user == nil || user.Exec == nil {
		t.Fatalf("%s has no exec user", ours)
	}
	value := func(flag string) string {
		for _, a := range user.Exec.Args {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v
			}
		}
		t.Fatalf("our kubeconfig has no %s: %q", flag, user.Exec.Args)
		return ""
	}
	user.Exec.Args = args(value)
	user.Exec.APIVersion = "client.authentication.k8s.io/v1beta1"
	user.Exec.InteractiveMode = ""
	user.Exec.Env = nil
	user.Exec.ProvideClusterInfo = true
	user.Exec.InstallHint = "The pinniped CLI does not appear to be installed.  See https://get.pinniped.dev/cli for more details"
	f := filepath.Join(t.TempDir(), "upstream.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, f); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(f); strings.Contains(string(raw), "interactiveMode") {
		t.Fatalf("not upstream's shape:\n%s", raw)
	}
	return f
}

// upstreamConciergeArgs are the Concierge arguments upstream writes first.
func upstreamConciergeArgs(authenticator string, value func(string) string) []string {
	return []string{"--enable-concierge", "--concierge-api-group-suffix=pinniped.dev",
		"--concierge-authenticator-name=" + authenticator, "--concierge-authenticator-type=jwt",
		"--concierge-endpoint=" + value("--concierge-endpoint"), "--concierge-ca-bundle-data=" + value("--concierge-ca-bundle-data")}
}

// TestUpstreamKubeconfigs: kubeconfigs in the shapes upstream Pinniped
// writes log alice in with our CLI (at the path they name) through the
// real Dex and our agent: a static token, the same with the
// --concierge-namespace that v0.3 to v0.5 wrote, and a plain OIDC issuer
// with the Supervisor's scopes that Dex does not know and a
// --request-audience equal to the client ID. (The Supervisor's shapes are
// in TestSupervisor.)
func TestUpstreamKubeconfigs(t *testing.T) {
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]
	ours := userKubeconfig(t, pinniped)
	ca, err := os.ReadFile(Bed.Config().TestbedCAFile())
	if err != nil {
		t.Fatal(err)
	}

	static := func(old bool) func(value func(string) string) []string {
		return func(value func(string) string) []string {
			concierge := upstreamConciergeArgs("dex", value)
			if old {
				concierge = slices.Insert(concierge, 1, "--concierge-namespace=pinniped-concierge")
			}
			return append(append([]string{"login", "static"}, concierge...), "--token-env=PINNIPED_TEST_TOKEN")
		}
	}
	for name, old := range map[string]bool{"static token": false, "static token, v0.5 with --concierge-namespace": true} {
		t.Run(name, func(t *testing.T) {
			kc := upstreamKubeconfig(t, ours, static(old))
			idToken, _ := PasswordLogin(t, context.Background(), alice).Extra("id_token").(string)
			got, stderr, err := whoami(t, []string{"KUBECONFIG=" + kc, "XDG_CONFIG_HOME=" + t.TempDir(), "PINNIPED_TEST_TOKEN=" + idToken})
			if err != nil || got != alice.Email {
				t.Fatalf("whoami: %q, want %q (%v)\n%s", got, alice.Email, err, stderr)
			}
		})
	}

	t.Run("direct OIDC issuer, browser login at Dex", func(t *testing.T) {
		kc := upstreamKubeconfig(t, ours, func(value func(string) string) []string {
			return append(append([]string{"login", "oidc"}, upstreamConciergeArgs("dex", value)...),
				"--issuer="+Bed.Config().DexIssuer(), "--client-id="+testbed.DexClientID,
				"--scopes=offline_access,openid,pinniped:request-audience,username,groups",
				"--ca-bundle-data="+base64.StdEncoding.EncodeToString(ca), "--request-audience="+testbed.DexClientID)
		})
		run := startBrowserKubectl(t, []string{"KUBECONFIG=" + kc}, nil, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		bctx, cancel := Browser(t, context.Background())
		defer cancel()
		dexLogin(t, bctx, run.URL, chromedp.WaitVisible(`//h1[contains(., "Logged in")]`))
		if out := run.wait(t, 60*time.Second, func() string { return pageState(bctx) }); out != alice.Email {
			t.Fatalf("kubectl answered %q, want %q\n%s", out, alice.Email, run.stderr.String())
		}
	})
}
