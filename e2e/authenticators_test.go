//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt/jwttest"
	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// installAgent installs the agent with a JWTAuthenticator "dex" (and extra
// arguments to `pinniped install`) and removes it when the test ends. It
// returns the pinniped binary.
func installAgent(t *testing.T, extra ...string) string {
	t.Helper()
	// The CLI stores credentials in the keyring; the tests' own keyring must
	// own the Secret Service name before anything D-Bus-activates another.
	KeyringSession(t)
	pinniped := BuildStatic(t, "./cmd/pinniped")
	Run(t, nil, pinniped, installArgs(t, extra...)...)
	t.Cleanup(func() { _, _ = RunE(nil, pinniped, "uninstall") })
	return pinniped
}

// installArgs are the arguments installAgent passes to `pinniped install`, plus extra.
func installArgs(t *testing.T, extra ...string) []string {
	cfg := Bed.Config()
	return append([]string{"install", "--image=" + AgentImage(t), "--image-pull-policy=Never",
		"--oidc-issuer=" + cfg.DexIssuer(), "--oidc-audience=" + testbed.DexClientID,
		"--oidc-ca-bundle=" + cfg.TestbedCAFile(), "--oidc-username-claim=email",
		"--authenticator-name=dex", "--timeout=4m"}, extra...)
}

func applyYAML(t *testing.T, doc string) {
	t.Helper()
	// Not t.TempDir(): its name comes from the test's, and kubectl -f splits at commas.
	dir, err := os.MkdirTemp("", "pinniped-e2e-apply-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := filepath.Join(dir, "obj.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	Kubectl(t, "apply", "-f", f)
}

func waitPhase(t *testing.T, kind, name, phase string) {
	t.Helper()
	Eventually(t, time.Minute, kind+" "+name+" phase "+phase, func(context.Context) error {
		out, err := RunE(nil, "kubectl", "get", kind, name, "-o", `jsonpath={.status.phase}{"\n"}{range .status.conditions[?(@.status!="True")]}{.type}: {.message}{"\n"}{end}`)
		if err != nil {
			return err
		}
		if got, why, _ := strings.Cut(out, "\n"); got != phase {
			return fmt.Errorf("phase %q; conditions not true:\n%s", got, why)
		}
		return nil
	})
}

// TestAuthenticators covers what only a second identity provider can show:
// expired, wrong-audience and wrong-issuer tokens, a broken authenticator
// that leaves the others working, and a webhook authenticator, on the real
// cluster. The extra issuer and webhook run in this test process, on the
// node address the agent's pods can reach.
func TestAuthenticators(t *testing.T) {
	ctx := context.Background()
	cfg := Bed.Config()
	pinniped := installAgent(t)

	iss := jwttest.NewOn(t, cfg.NodeIP)
	applyYAML(t, fmt.Sprintf(`apiVersion: authentication.concierge.pinniped.dev/v1alpha1
kind: JWTAuthenticator
metadata: {name: other}
spec:
  issuer: %s
  audience: cluster-e2e
  tls: {certificateAuthorityData: %s}
---
apiVersion: authentication.concierge.pinniped.dev/v1alpha1
kind: JWTAuthenticator
metadata: {name: unreachable}
spec:
  issuer: https://%s:1/nothing-here
  audience: x
`, iss.URL, base64.StdEncoding.EncodeToString(iss.CABundle), cfg.NodeIP))
	waitPhase(t, "jwtauthenticator", "other", "Ready")
	waitPhase(t, "jwtauthenticator", "unreachable", "Error")

	t.Run("a broken authenticator says why", func(t *testing.T) {
		out := Kubectl(t, "get", "jwtauthenticator", "unreachable", "-o",
			`jsonpath={range .status.conditions[*]}{.type}={.status}{"\n"}{end}`)
		if !strings.Contains(out, "DiscoveryURLValid=False") || !strings.Contains(out, "Ready=False") {
			t.Fatalf("conditions:\n%s", out)
		}
	})

	claims := func(extra map[string]any) map[string]any {
		c := map[string]any{"iss": iss.URL, "aud": "cluster-e2e", "sub": "dave-id", "username": "dave",
			"groups": []string{"testers"}, "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	t.Run("a second issuer works beside Dex", func(t *testing.T) {
		cred := exchangeUntilIssued(t, iss.Sign(t, claims(nil)), "JWTAuthenticator", "other")
		if who := whoamiWithCert(t, cred); who.Username != "dave" || !slices.Contains(who.Groups, "testers") {
			t.Fatalf("the API server sees %+v", who)
		}
	})

	t.Run("wrong tokens get authentication failed", func(t *testing.T) {
		dexToken := PasswordLogin(t, ctx, testbed.DexUsers[0]).Extra("id_token").(string)
		cases := map[string][2]string{
			"expired":          {iss.Sign(t, claims(map[string]any{"exp": time.Now().Add(-10 * time.Minute).Unix()})), "other"},
			"wrong audience":   {iss.Sign(t, claims(map[string]any{"aud": "another-cluster"})), "other"},
			"wrong issuer":     {iss.Sign(t, claims(map[string]any{"iss": cfg.DexIssuer(), "aud": testbed.DexClientID})), "dex"},
			"Dex token, other": {dexToken, "other"},
			"system username":  {iss.Sign(t, claims(map[string]any{"username": "system:admin"})), "other"},
			"system:masters":   {iss.Sign(t, claims(map[string]any{"groups": []string{"system:masters"}})), "other"},
			"not ready":        {dexToken, "unreachable"},
		}
		for name, c := range cases {
			if cred := exchange(t, c[0], "JWTAuthenticator", c[1]); cred.Message != "authentication failed" || cred.Cert != "" {
				t.Errorf("%s: got %+v", name, cred)
			}
		}
	})

	t.Run("webhook authenticator", func(t *testing.T) {
		endpoint, caPEM := startTokenReviewer(t, cfg.NodeIP, map[string][2]string{"carol-token": {"carol", "qa"}})
		applyYAML(t, fmt.Sprintf(`apiVersion: authentication.concierge.pinniped.dev/v1alpha1
kind: WebhookAuthenticator
metadata: {name: corp}
spec:
  endpoint: %s
  tls: {certificateAuthorityData: %s}
`, endpoint, base64.StdEncoding.EncodeToString(caPEM)))
		waitPhase(t, "webhookauthenticator", "corp", "Ready")
		cred := exchangeUntilIssued(t, "carol-token", "WebhookAuthenticator", "corp")
		if who := whoamiWithCert(t, cred); who.Username != "carol" || !slices.Contains(who.Groups, "qa") {
			t.Fatalf("the API server sees %+v", who)
		}
		if bad := exchange(t, "mallory-token", "WebhookAuthenticator", "corp"); bad.Message != "authentication failed" {
			t.Fatalf("unknown webhook token: %+v", bad)
		}

		// The static-token login, through a generated kubeconfig.
		kubeconfig := filepath.Join(t.TempDir(), "carol.kubeconfig")
		out := Run(t, nil, pinniped, "get", "kubeconfig", "--concierge-authenticator-type=webhook",
			"--concierge-authenticator-name=corp", "--static-token-env=CAROL_TOKEN")
		if strings.Contains(out, "carol-token") {
			t.Fatal("the kubeconfig contains the token")
		}
		_ = os.WriteFile(kubeconfig, []byte(out), 0o600)
		env := []string{"KUBECONFIG=" + kubeconfig, "CAROL_TOKEN=carol-token", "XDG_CONFIG_HOME=" + t.TempDir()}
		if who := Run(t, env, "kubectl", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); who != "carol" {
			t.Fatalf("kubectl auth whoami: %q", who)
		}
	})
}

// startTokenReviewer serves TokenReview (v1) over TLS on ip, accepting the
// given tokens as {username, group}.
func startTokenReviewer(t *testing.T, ip string, users map[string][2]string) (endpoint string, caPEM []byte) {
	t.Helper()
	tlsConfig, caPEM := jwttest.ServingTLS(t, ip)
	ln, err := tls.Listen("tcp", net.JoinHostPort(ip, "0"), tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			APIVersion string `json:"apiVersion"`
			Spec       struct {
				Token string `json:"token"`
			} `json:"spec"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		status := map[string]any{"authenticated": false}
		if u, ok := users[review.Spec.Token]; ok {
			status = map[string]any{"authenticated": true, "user": map[string]any{"username": u[0], "groups": []string{u[1]}}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": review.APIVersion, "kind": "TokenReview", "status": status})
	})}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Log(err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().String() + "/authenticate", caPEM
}
