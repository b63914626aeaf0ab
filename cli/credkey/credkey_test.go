package credkey_test

import (
	"testing"

	"github.com/pinniped-kit/pinniped/cli/credkey"
)

// TestKeysAreStable pins the keys: they were computed by the code before it
// moved here. A change would orphan every cached credential and session,
// sending every user through a login again.
func TestKeysAreStable(t *testing.T) {
	conc := &credkey.Concierge{Endpoint: "https://10.0.0.1:6443", CABundle: []byte("concierge CA"), APIGroupSuffix: "pinniped.dev",
		AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	oidc := credkey.Inputs{Issuer: "https://dex.example.com", ClientID: "pinniped-cli", Scopes: []string{"openid", "groups", "openid", "email"},
		RequestAudience: "cluster-a", CABundle: []byte("issuer CA"), Concierge: conc,
		ClusterServer: "https://10.0.0.1:6443", ClusterCA: []byte("cluster CA")}
	static := credkey.Inputs{Concierge: conc, ClusterServer: "https://10.0.0.1:6443", ClusterCA: []byte("cluster CA"), StaticToken: "static-token"}
	for _, c := range []struct {
		name string
		in   credkey.Inputs
		want string
	}{
		{"oidc", oidc, "cred-1a1f056db6ad3bef488372e696c42187260784a23aa287103120c5da56306fe6"},
		{"static", static, "cred-4fd31b7d5651311e677167513926978d4d329725ff9e86b1a4f4bc26d01cc60f"},
	} {
		if got, err := credkey.Credential(c.in); err != nil || got != c.want {
			t.Errorf("%s: %s %v, want %s", c.name, got, err, c.want)
		}
	}
	if got := credkey.Session(oidc.Issuer, oidc.ClientID, oidc.Scopes, oidc.CABundle); got != "sess-cred-eb2e6ceef97f3f41fadcfa974964f6e3292a23b584c645deacae0cf1dcf74fc5" {
		t.Errorf("session key %s", got)
	}
	// Scope order and duplicates do not matter.
	reordered := oidc
	reordered.Scopes = []string{"email", "groups", "openid"}
	if a, _ := credkey.Credential(oidc); a != mustKey(t, reordered) {
		t.Error("scope order changed the key")
	}
}

func mustKey(t *testing.T, in credkey.Inputs) string {
	t.Helper()
	k, err := credkey.Credential(in)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
