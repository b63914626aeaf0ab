//go:build e2e

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestConfidentialClientAtDex: `pinniped login oidc --client-secret` logs
// in at Dex as a confidential client (the bed's test Supervisor's client,
// whose secret Dex checks on every token request), and without the secret,
// or with a wrong one, Dex refuses the login.
func TestConfidentialClientAtDex(t *testing.T) {
	cfg := Bed.Config()
	pinniped := BuildStatic(t, "./cmd/pinniped")
	secret, err := os.ReadFile(cfg.SupervisorSecretFile())
	if err != nil {
		t.Fatal(err)
	}
	alice := testbed.DexUsers[0]
	env := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password}
	login := func(extra ...string) (string, error) {
		return RunE(env, pinniped, append([]string{"login", "oidc", "--issuer=" + cfg.DexIssuer(), "--ca-bundle=" + cfg.TestbedCAFile(),
			"--client-id=" + testbed.SupervisorDexClientID, "--scopes=openid,email,groups", "--flow=password", "--credential-cache=none"}, extra...)...)
	}

	out, err := login("--client-secret=" + strings.TrimSpace(string(secret)))
	if err != nil {
		t.Fatal(err)
	}
	var cred struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &cred); err != nil {
		t.Fatalf("not an ExecCredential: %v", err)
	}
	parts := strings.Split(cred.Status.Token, ".")
	if len(parts) != 3 {
		t.Fatal("the credential is not an ID token")
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Aud   any    `json:"aud"`
		Email string `json:"email"`
	}
	_ = json.Unmarshal(payload, &claims)
	auds, _ := claims.Aud.([]any)
	if claims.Email != alice.Email || (claims.Aud != testbed.SupervisorDexClientID && !slices.Contains(auds, any(testbed.SupervisorDexClientID))) {
		t.Fatalf("the ID token is for %v, audience %v", claims.Email, claims.Aud)
	}

	for name, extra := range map[string][]string{"no secret": nil, "a wrong secret": {"--client-secret=not-the-secret"}} {
		if out, err := login(extra...); err == nil {
			t.Errorf("%s: logged in (%d bytes of output)", name, len(out))
		}
	}
}
