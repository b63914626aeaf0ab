package credkey_test

import (
	"testing"

	"github.com/pinniped-kit/pinniped/cli/credkey"
)

var (
	conc = &credkey.Concierge{Endpoint: "https://10.0.0.1:6443", CABundle: []byte("concierge CA"), APIGroupSuffix: "pinniped.dev",
		AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	oidc = credkey.Inputs{Issuer: "https://dex.example.com", ClientID: "pinniped-cli", Scopes: []string{"openid", "groups", "openid", "email"},
		RequestAudience: "cluster-a", CABundle: []byte("issuer CA"), Concierge: conc,
		ClusterServer: "https://10.0.0.1:6443", ClusterCA: []byte("cluster CA")}
)

// TestKeysAreStable pins the keys of this key version. A change would
// orphan every cached credential and session, sending every user through a
// login again: change them only with the version.
func TestKeysAreStable(t *testing.T) {
	static := credkey.Inputs{Concierge: conc, ClusterServer: "https://10.0.0.1:6443", ClusterCA: []byte("cluster CA"), StaticToken: "static-token"}
	supervisor := oidc
	supervisor.Upstream = credkey.Upstream{Name: "Corporate LDAP", Type: "ldap", Flow: "cli_password"}
	supervisor.PasswordUser = "alice"
	for _, c := range []struct {
		name string
		got  string
		want string
	}{
		{"oidc", credkey.Credential(oidc), "cred-3effd70c9baae37a14e9cf26e9a950ea2517db86c58c5944711beb6991be27bf"},
		{"static", credkey.Credential(static), "cred-1f8666f417350ce80bd8165544f96dba9e897b30c6dd833abd63c64d0be6d11b"},
		{"supervisor", credkey.Credential(supervisor), "cred-1d32fa4d73682edc5ed44191f9c9beedac810d5fbcd3cb011f4cf8a85a3aa258"},
		{"oidc session", credkey.Session(oidc), "sess-aa0a9790ee80bd99758f2b735cd7f81db4a2911ebf1944a92b9c3b6b70a767d6"},
		{"supervisor session", credkey.Session(supervisor), "sess-3db40a778c870177d0c2d985fd4e9387378224e2170da4cbca1b72245bee0e09"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
}

// TestEveryIdentityInputChangesTheKeys: two logins that could end as
// different users never share a credential or a session.
func TestEveryIdentityInputChangesTheKeys(t *testing.T) {
	for name, change := range map[string]func(*credkey.Inputs){
		"issuer":        func(in *credkey.Inputs) { in.Issuer += "/other" },
		"client":        func(in *credkey.Inputs) { in.ClientID = "other" },
		"scopes":        func(in *credkey.Inputs) { in.Scopes = append(in.Scopes, "offline_access") },
		"issuer CA":     func(in *credkey.Inputs) { in.CABundle = []byte("other CA") },
		"upstream name": func(in *credkey.Inputs) { in.Upstream.Name = "Corporate LDAP" },
		"upstream type": func(in *credkey.Inputs) { in.Upstream.Type = "ldap" },
		"upstream flow": func(in *credkey.Inputs) { in.Upstream.Flow = "cli_password" },
		"password user": func(in *credkey.Inputs) { in.PasswordUser = "bob" },
		"audience":      func(in *credkey.Inputs) { in.RequestAudience = "cluster-b" },
		"concierge":     func(in *credkey.Inputs) { c := *in.Concierge; c.AuthenticatorName = "other"; in.Concierge = &c },
		"no concierge":  func(in *credkey.Inputs) { in.Concierge = nil },
		"cluster":       func(in *credkey.Inputs) { in.ClusterServer = "https://10.0.0.2:6443" },
		"cluster CA":    func(in *credkey.Inputs) { in.ClusterCA = []byte("other") },
		"static token":  func(in *credkey.Inputs) { in.StaticToken = "t" },
	} {
		changed := oidc
		change(&changed)
		if credkey.Credential(changed) == credkey.Credential(oidc) {
			t.Errorf("%s: same credential key", name)
		}
		sessionInput := map[string]bool{"issuer": true, "client": true, "scopes": true, "issuer CA": true,
			"upstream name": true, "upstream type": true, "upstream flow": true, "password user": true}
		if sessionInput[name] && credkey.Session(changed) == credkey.Session(oidc) {
			t.Errorf("%s: same session key", name)
		}
		if !sessionInput[name] && credkey.Session(changed) != credkey.Session(oidc) {
			t.Errorf("%s: a different session, though the login is the same", name)
		}
	}
	// Scope order and duplicates do not matter.
	reordered := oidc
	reordered.Scopes = []string{"email", "groups", "openid"}
	if credkey.Credential(reordered) != credkey.Credential(oidc) || credkey.Session(reordered) != credkey.Session(oidc) {
		t.Error("scope order changed a key")
	}
}
