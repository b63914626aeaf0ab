package config_test

import (
	"testing"

	"github.com/pinniped-kit/pinniped/cli/login/config"
)

var (
	conc = &config.Concierge{Endpoint: "https://10.0.0.1:6443", CABundle: []byte("concierge CA"), APIGroupSuffix: "pinniped.dev",
		AuthenticatorType: "jwt", AuthenticatorName: "dex"}
	cluster = config.Cluster{Server: "https://10.0.0.1:6443", CA: []byte("cluster CA")}
)

func oidcLogin() *config.OIDC {
	return &config.OIDC{Issuer: "https://dex.example.com", ClientID: "pinniped-cli", Scopes: []string{"openid", "groups", "openid", "email"},
		RequestAudience: "cluster-a", CABundle: []byte("issuer CA"), Concierge: conc}
}

// TestKeysAreStable pins the keys of this key version. A change would
// orphan every cached credential and session, sending every user through a
// login again: change them only with the version.
func TestKeysAreStable(t *testing.T) {
	static := &config.Static{Concierge: conc, Token: "static-token"}
	supervisor := oidcLogin()
	supervisor.Upstream = config.Upstream{Name: "Corporate LDAP", Type: "ldap", Flow: "cli_password"}
	supervisor.Username = "alice"
	for _, c := range []struct {
		name string
		got  string
		want string
	}{
		{"oidc", oidcLogin().CredentialKey(cluster), "cred-3effd70c9baae37a14e9cf26e9a950ea2517db86c58c5944711beb6991be27bf"},
		{"static", static.CredentialKey(cluster), "cred-1f8666f417350ce80bd8165544f96dba9e897b30c6dd833abd63c64d0be6d11b"},
		{"supervisor", supervisor.CredentialKey(cluster), "cred-1d32fa4d73682edc5ed44191f9c9beedac810d5fbcd3cb011f4cf8a85a3aa258"},
		{"oidc session", oidcLogin().SessionKey(), "sess-aa0a9790ee80bd99758f2b735cd7f81db4a2911ebf1944a92b9c3b6b70a767d6"},
		{"supervisor session", supervisor.SessionKey(), "sess-3db40a778c870177d0c2d985fd4e9387378224e2170da4cbca1b72245bee0e09"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
}

// TestEveryIdentityInputChangesTheKeys: two logins that could end as
// different users never share a credential or a session; what changes only
// the cluster or the exchange shares the session.
func TestEveryIdentityInputChangesTheKeys(t *testing.T) {
	base := oidcLogin()
	for name, c := range map[string]struct {
		change  func(*config.OIDC)
		cluster config.Cluster
		session bool // the session changes too
	}{
		"issuer":        {func(c *config.OIDC) { c.Issuer += "/other" }, cluster, true},
		"client":        {func(c *config.OIDC) { c.ClientID = "other" }, cluster, true},
		"scopes":        {func(c *config.OIDC) { c.Scopes = append(c.Scopes, "offline_access") }, cluster, true},
		"issuer CA":     {func(c *config.OIDC) { c.CABundle = []byte("other CA") }, cluster, true},
		"upstream name": {func(c *config.OIDC) { c.Upstream.Name = "Corporate LDAP" }, cluster, true},
		"upstream type": {func(c *config.OIDC) { c.Upstream = config.Upstream{Name: "X", Type: "ldap"} }, cluster, true},
		"upstream flow": {func(c *config.OIDC) { c.Upstream.Flow = "browser_authcode" }, cluster, true},
		"password user": {func(c *config.OIDC) { c.Flow, c.Username = config.FlowPassword, "bob" }, cluster, true},
		"audience":      {func(c *config.OIDC) { c.RequestAudience = "cluster-b" }, cluster, false},
		"client secret": {func(c *config.OIDC) { c.ClientSecret = "s" }, cluster, true},
		"auth params":   {func(c *config.OIDC) { c.AuthorizeParams = []string{"hd=example.com"} }, cluster, true},
		"access token":  {func(c *config.OIDC) { c.PresentToken = config.PresentAccess }, cluster, false},
		"authenticator": {func(c *config.OIDC) { k := *c.Concierge; k.AuthenticatorName = "other"; c.Concierge = &k }, cluster, false},
		"endpoint":      {func(c *config.OIDC) { k := *c.Concierge; k.Endpoint = "https://other"; c.Concierge = &k }, cluster, false},
		"agent CA":      {func(c *config.OIDC) { k := *c.Concierge; k.CABundle = []byte("x"); c.Concierge = &k }, cluster, false},
		"suffix":        {func(c *config.OIDC) { k := *c.Concierge; k.APIGroupSuffix = "x.io"; c.Concierge = &k }, cluster, false},
		"no concierge":  {func(c *config.OIDC) { c.Concierge = nil }, cluster, false},
		"cluster":       {func(*config.OIDC) {}, config.Cluster{Server: "https://10.0.0.2:6443", CA: cluster.CA}, false},
		"cluster CA":    {func(*config.OIDC) {}, config.Cluster{Server: cluster.Server, CA: []byte("other")}, false},
	} {
		changed := oidcLogin()
		c.change(changed)
		if changed.CredentialKey(c.cluster) == base.CredentialKey(cluster) {
			t.Errorf("%s: same credential key", name)
		}
		if (changed.SessionKey() != base.SessionKey()) != c.session {
			t.Errorf("%s: session changed %v, want %v", name, changed.SessionKey() != base.SessionKey(), c.session)
		}
	}
	// What cannot change who logs in changes nothing.
	for name, change := range map[string]func(*config.OIDC){
		"scope order":          func(c *config.OIDC) { c.Scopes = []string{"email", "groups", "openid"} },
		"default suffix":       func(c *config.OIDC) { k := *c.Concierge; k.APIGroupSuffix = ""; c.Concierge = &k },
		"type without a name":  func(c *config.OIDC) { c.Upstream.Type = "oidc" },
		"user of a browser":    func(c *config.OIDC) { c.Username = "ci" },
		"password":             func(c *config.OIDC) { c.Flow, c.Username, c.Password = config.FlowPassword, "", "s3cret" },
		"ports, browser, time": func(c *config.OIDC) { c.ListenPort, c.SkipBrowser, c.SkipListen, c.Timeout = 1234, true, true, 5 },
	} {
		changed := oidcLogin()
		change(changed)
		base := oidcLogin()
		if name == "password" {
			base.Flow = config.FlowPassword
		}
		if changed.CredentialKey(cluster) != base.CredentialKey(cluster) || changed.SessionKey() != base.SessionKey() {
			t.Errorf("%s changed a key", name)
		}
	}
}
