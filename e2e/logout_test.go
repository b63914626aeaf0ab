//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestLogoutEndsTheSessionAtTheIssuer proves `pinniped logout` against real issuers: at the
// bed's second OpenID provider (oidcop, which implements RFC 7009 and RP-initiated logout)
// the old refresh token is refused afterwards, not just gone locally, and --end-session ends
// the browser's session there; at Dex (no revocation endpoint) logout says so and still
// removes the local copies.
func TestLogoutEndsTheSessionAtTheIssuer(t *testing.T) {
	cfg := Bed.Config()
	pinniped := BuildStatic(t, "./cmd/pinniped")
	ctx := context.Background()
	alice := testbed.OIDCOPUsers[0]

	// Without D-Bus the sessions live in files under XDG_CONFIG_HOME, which the test reads.
	config := filepath.Join(t.TempDir(), "config")
	env := []string{"XDG_CONFIG_HOME=" + config, "DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR="}
	args := []string{"login", "oidc", "--issuer=" + cfg.OIDCOPIssuer(), "--client-id=" + testbed.OIDCOPClientID, "--ca-bundle=" + cfg.TestbedCAFile()}
	kubeconfig := execKubeconfig(t, pinniped, args)

	bctx, cancel := Browser(t, ctx)
	defer cancel()

	// The second subtest relies on the browser session the first one starts.
	if !t.Run("logout revokes the refresh token at the issuer", func(t *testing.T) {
		run := startBrowserCommand(t, env, nil, pinniped, args...)
		browserSteps(t, bctx, "log in at oidcop through the CLI's link",
			openPage(run.URL, chromedp.WaitVisible(chromedp.ID("username"))),
			chromedp.SendKeys(chromedp.ID("username"), alice.Username),
			chromedp.SendKeys(chromedp.ID("password"), alice.Password),
			chromedp.Click(chromedp.ID("submit")),
			chromedp.WaitVisible(`//h1[contains(., "Logged in")]`),
		)
		if out := run.wait(t, 60*time.Second, func() string { return pageState(bctx) }); !strings.Contains(out, `"ExecCredential"`) {
			t.Fatalf("login printed no ExecCredential:\n%s\n%s", out, run.stderr.String())
		}
		file, first := cachedRefreshToken(t, config)

		// The session refreshes at the issuer. oidcop rotates refresh tokens (the used one
		// is refused from now on), so the cache gets the new one, as the CLI's own refresh
		// would do: logout must revoke what is cached, and the test checks that token.
		tok, err := issuerRefresh(t, ctx, cfg.OIDCOPIssuer(), testbed.OIDCOPClientID, first)
		if err != nil {
			t.Fatalf("a refresh_token grant with the cached session's refresh token: %v (log: %s)", err, cfg.LogFile("oidcop"))
		}
		if tok.RefreshToken == "" || tok.RefreshToken == first {
			t.Fatal("oidcop did not rotate the refresh token; this test relies on it")
		}
		replaceRefreshToken(t, file, first, tok)

		out := runLogout(t, pinniped, env, "--kubeconfig="+kubeconfig)
		if !strings.Contains(out, "Revoked the session's refresh token at "+cfg.OIDCOPIssuer()) {
			t.Fatalf("logout does not say it revoked the refresh token:\n%s", out)
		}
		if f, _ := findRefreshToken(t, config); f != "" {
			t.Fatalf("the session is still cached in %s after logout", f)
		}
		_, err = issuerRefresh(t, ctx, cfg.OIDCOPIssuer(), testbed.OIDCOPClientID, tok.RefreshToken)
		wantInvalidGrant(t, err, "the logged-out session's refresh token")
	}) {
		return
	}

	t.Run("logout --end-session ends the browser's session at the issuer", func(t *testing.T) {
		// The browser is still signed in at oidcop: this login asks for no password.
		run := startBrowserCommand(t, env, nil, pinniped, args...)
		browserSteps(t, bctx, "log in again with the browser's session at oidcop",
			openPage(run.URL, chromedp.WaitVisible(`//h1[contains(., "Logged in")]`)),
		)
		run.wait(t, 60*time.Second, func() string { return pageState(bctx) })
		_, refreshToken := cachedRefreshToken(t, config)

		// logout waits for the browser to load its one-shot page, so it runs beside the
		// browser steps.
		logout := startBrowserCommand(t, env, nil, pinniped, "logout", "--kubeconfig="+kubeconfig, "--end-session")
		pageURL := logout.URL
		// The browser is given a page on this machine, never the ID token in a URL: argv,
		// history and proxies would keep it.
		u, err := url.Parse(pageURL)
		if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.RawQuery != "" || strings.Contains(pageURL, "id_token") {
			t.Fatalf("the browser was not given a bare loopback page (parse error %v; scheme %q, host %q, a query: %v)", err, u.Scheme, u.Hostname(), u.RawQuery != "")
		}
		// The page posts id_token_hint to oidcop's end_session_endpoint, whose answer is
		// its logged-out page.
		browserSteps(t, bctx, "open logout's page, which ends the session at oidcop",
			openPage(pageURL, chromedp.WaitVisible(chromedp.ID("logged-out"))),
		)
		logout.wait(t, 30*time.Second, func() string { return pageState(bctx) })
		out := logout.stderr.String()
		for _, want := range []string{"Revoked the session's refresh token at " + cfg.OIDCOPIssuer(), "Your browser was sent to end your session at " + cfg.OIDCOPIssuer()} {
			if !strings.Contains(out, want) {
				t.Fatalf("logout --end-session does not say %q:\n%s", want, out)
			}
		}
		p := discover(t, ctx, cfg.OIDCOPIssuer())
		// A new authorization request asks for the password again.
		conf := oauth2.Config{ClientID: testbed.OIDCOPClientID, Endpoint: p.Endpoint(), RedirectURL: "http://127.0.0.1:1/callback", Scopes: []string{oidc.ScopeOpenID}}
		authURL := conf.AuthCodeURL(randomString(t), oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oidc.Nonce(randomString(t)))
		browserSteps(t, bctx, "a new login after the end of the browser's session shows the login form",
			openPage(authURL, chromedp.WaitVisible(chromedp.ID("username"))),
		)
		_, err = issuerRefresh(t, ctx, cfg.OIDCOPIssuer(), testbed.OIDCOPClientID, refreshToken)
		wantInvalidGrant(t, err, "the ended session's refresh token")
	})

	t.Run("an issuer without a revocation endpoint is named, the local copies go", func(t *testing.T) {
		dex := testbed.DexUsers[0]
		config := filepath.Join(t.TempDir(), "config")
		env := []string{"XDG_CONFIG_HOME=" + config, "DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR=",
			"PINNIPED_USERNAME=" + dex.Email, "PINNIPED_PASSWORD=" + dex.Password}
		args := []string{"login", "oidc", "--issuer=" + cfg.DexIssuer(), "--client-id=" + testbed.DexClientID, "--ca-bundle=" + cfg.TestbedCAFile(), "--flow=password"}
		kubeconfig := execKubeconfig(t, pinniped, args)
		if out := Run(t, env, pinniped, args...); !strings.Contains(out, `"ExecCredential"`) {
			t.Fatalf("login at Dex printed no ExecCredential:\n%s", out)
		}
		_, refreshToken := cachedRefreshToken(t, config)

		out := runLogout(t, pinniped, env, "--kubeconfig="+kubeconfig)
		if !strings.Contains(out, cfg.DexIssuer()+": the issuer has no revocation endpoint") || !strings.Contains(out, "local copies were removed") {
			t.Fatalf("logout at Dex does not say plainly that nothing was revoked:\n%s", out)
		}
		if f, _ := findRefreshToken(t, config); f != "" {
			t.Fatalf("the session is still cached in %s after logout", f)
		}
		// What the warning says is so: the token still works at Dex.
		if _, err := issuerRefresh(t, ctx, cfg.DexIssuer(), testbed.DexClientID, refreshToken); err != nil {
			t.Fatalf("Dex refused the refresh token although it has no way to revoke it: %v", err)
		}
	})
}

// execKubeconfig writes a kubeconfig whose user runs pinniped with args, as
// `pinniped get kubeconfig` would, for `pinniped logout --kubeconfig`.
func execKubeconfig(t *testing.T, pinniped string, args []string) string {
	t.Helper()
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	cfg := Bed.Config()
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: bed
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: %s
      args: [%s]
      interactiveMode: IfAvailable
contexts:
- name: user@bed
  context: {cluster: bed, user: user}
current-context: user@bed
`, cfg.APIServerURL(), cfg.ClusterCAFile(), pinniped, strings.Join(quoted, ", "))
	f := filepath.Join(t.TempDir(), "exec.kubeconfig")
	if err := os.WriteFile(f, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// runLogout runs `pinniped logout` and returns what it said (stdout and stderr); it must
// succeed.
func runLogout(t *testing.T, pinniped string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), pinniped, append([]string{"logout"}, args...)...)
	cmd.Env = append(BedEnv(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pinniped logout %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// findRefreshToken returns the cache file (of the file store under config) holding a
// session with a refresh token, and that token; "" if there is none.
func findRefreshToken(t *testing.T, config string) (file, refreshToken string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(config, "pinniped", "credentials", "*.cred"))
	for _, f := range files {
		var s struct {
			RefreshToken string `json:"refreshToken"`
		}
		if json.Unmarshal(mustRead(t, f), &s) == nil && s.RefreshToken != "" {
			return f, s.RefreshToken
		}
	}
	return "", ""
}

func cachedRefreshToken(t *testing.T, config string) (file, refreshToken string) {
	t.Helper()
	file, refreshToken = findRefreshToken(t, config)
	if file == "" {
		t.Fatalf("no cached session with a refresh token under %s", config)
	}
	return file, refreshToken
}

// replaceRefreshToken puts a refresh's tokens into the cached session that held old.
func replaceRefreshToken(t *testing.T, file, old string, tok *oauth2.Token) {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(mustRead(t, file), &s); err != nil || s["refreshToken"] != old {
		t.Fatalf("%s no longer holds the session (%v)", file, err)
	}
	s["refreshToken"], s["accessToken"] = tok.RefreshToken, tok.AccessToken
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

func discover(t *testing.T, ctx context.Context, issuer string) *oidc.Provider {
	t.Helper()
	p, err := oidc.NewProvider(DexContext(t, ctx), issuer)
	if err != nil {
		t.Fatalf("discovery at %s: %v", issuer, err)
	}
	return p
}

// issuerRefresh redeems a refresh token at the issuer as the public client, as the CLI does.
func issuerRefresh(t *testing.T, ctx context.Context, issuer, clientID, refreshToken string) (*oauth2.Token, error) {
	t.Helper()
	conf := oauth2.Config{ClientID: clientID, Endpoint: discover(t, ctx, issuer).Endpoint()}
	conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	return conf.TokenSource(DexContext(t, ctx), &oauth2.Token{RefreshToken: refreshToken}).Token()
}

func wantInvalidGrant(t *testing.T, err error, what string) {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("%s: want the issuer to refuse it with invalid_grant, got %v", what, err)
	}
}
