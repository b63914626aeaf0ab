//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestUpstreamKubeconfigLogsInAtDex: a kubeconfig in exactly the shape
// upstream Pinniped's get kubeconfig (v0.39) writes for a plain OIDC
// issuer (exec v1beta1, no interactiveMode, upstream's argument order, the
// Supervisor's scopes that Dex does not know, --request-audience equal to
// the client ID) logs alice in through the real Dex and our agent, with our
// CLI at the path it names.
func TestUpstreamKubeconfigLogsInAtDex(t *testing.T) {
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]
	ours := userKubeconfig(t, pinniped)
	cfg, err := clientcmd.LoadFromFile(ours)
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	value := func(flag string) string {
		for _, a := range user.Exec.Args {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v
			}
		}
		t.Fatalf("our kubeconfig has no %s: %q", flag, user.Exec.Args)
		return ""
	}
	ca, err := os.ReadFile(Bed.Config().TestbedCAFile())
	if err != nil {
		t.Fatal(err)
	}
	user.Exec.APIVersion = "client.authentication.k8s.io/v1beta1"
	user.Exec.InteractiveMode = ""
	user.Exec.Env = nil
	user.Exec.InstallHint = "The pinniped CLI does not appear to be installed.  See https://get.pinniped.dev/cli for more details"
	user.Exec.Args = []string{"login", "oidc", "--enable-concierge", "--concierge-api-group-suffix=pinniped.dev",
		"--concierge-authenticator-name=dex", "--concierge-authenticator-type=jwt",
		"--concierge-endpoint=" + value("--concierge-endpoint"), "--concierge-ca-bundle-data=" + value("--concierge-ca-bundle-data"),
		"--issuer=" + Bed.Config().DexIssuer(), "--client-id=" + testbed.DexClientID,
		"--scopes=offline_access,openid,pinniped:request-audience,username,groups",
		"--ca-bundle-data=" + base64.StdEncoding.EncodeToString(ca), "--request-audience=" + testbed.DexClientID}
	upstream := filepath.Join(t.TempDir(), "upstream.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, upstream); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(upstream); strings.Contains(string(raw), "interactiveMode") {
		t.Fatalf("not upstream's shape:\n%s", raw)
	}

	run := startBrowserKubectl(t, []string{"KUBECONFIG=" + upstream}, nil, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	bctx, cancel := Browser(t, context.Background())
	defer cancel()
	dexLogin(t, bctx, run.URL, chromedp.WaitVisible(`//h1[contains(., "Logged in")]`))
	if out := run.wait(t, 60*time.Second, func() string { return pageState(bctx) }); out != alice.Email {
		t.Fatalf("kubectl answered %q, want %q\n%s", out, alice.Email, run.stderr.String())
	}
}
