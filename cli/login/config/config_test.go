package config_test

import (
	"encoding/pem"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/login/config"
)

var certPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("any DER")}))

func validOIDC() *config.OIDC {
	return &config.OIDC{Issuer: "https://dex.example.com", ClientID: "pinniped-cli", CABundle: []byte(certPEM),
		Concierge: &config.Concierge{Endpoint: "https://10.0.0.1:6443", AuthenticatorType: "jwt", AuthenticatorName: "dex", CABundle: []byte(certPEM)}}
}

func TestValidate(t *testing.T) {
	if err := validOIDC().Validate(); err != nil {
		t.Fatalf("a valid login refused: %v", err)
	}
	for name, c := range map[string]struct {
		change func(*config.OIDC)
		want   string
	}{
		"no issuer":             {func(c *config.OIDC) { c.Issuer = "" }, "--issuer is required"},
		"http issuer":           {func(c *config.OIDC) { c.Issuer = "http://dex" }, "must be an https URL"},
		"issuer not a URL":      {func(c *config.OIDC) { c.Issuer = "::" }, "is not a URL"},
		"unknown flow":          {func(c *config.OIDC) { c.Flow = "carrier-pigeon" }, `--flow "carrier-pigeon"`},
		"issuer CA not PEM":     {func(c *config.OIDC) { c.CABundle = []byte("nope") }, "holds no PEM certificate"},
		"http concierge":        {func(c *config.OIDC) { c.Concierge.Endpoint = "http://x" }, "clear text"},
		"concierge not a URL":   {func(c *config.OIDC) { c.Concierge.Endpoint = "::" }, "is not a URL"},
		"bad authenticator":     {func(c *config.OIDC) { c.Concierge.AuthenticatorType = "ldap" }, "use jwt or webhook"},
		"no authenticator name": {func(c *config.OIDC) { c.Concierge.AuthenticatorName = "" }, "--concierge-authenticator-name is required"},
		"concierge CA not PEM":  {func(c *config.OIDC) { c.Concierge.CABundle = []byte("nope") }, "--concierge-ca-bundle-data holds no PEM"},
	} {
		cfg := validOIDC()
		c.change(cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
	if err := (&config.Static{}).Validate(); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Errorf("static without a token: %v", err)
	}
}

func TestPasswordLogin(t *testing.T) {
	for _, c := range []struct {
		cfg  config.OIDC
		want bool
	}{
		{config.OIDC{}, false},
		{config.OIDC{Flow: config.FlowPassword}, true},
		{config.OIDC{Upstream: config.Upstream{Flow: config.UpstreamFlowPassword}}, true},
		// The variables alone choose nothing: a browser login stays one.
		{config.OIDC{Username: "ci", Password: "x"}, false},
		{config.OIDC{Username: "ci"}, false},
		{config.OIDC{Flow: config.FlowDevice, Upstream: config.Upstream{Flow: config.UpstreamFlowBrowser}}, false},
	} {
		if got := c.cfg.PasswordLogin(); got != c.want {
			t.Errorf("%+v: %v", c.cfg, got)
		}
	}
	// A Supervisor's provider named without a flow may turn out to take a
	// password: its key must name the user.
	if !(&config.OIDC{Upstream: config.Upstream{Name: "ldap"}}).MayUsePassword() ||
		// --flow does not choose the Supervisor's flow.
		!(&config.OIDC{Flow: config.FlowBrowser, Upstream: config.Upstream{Name: "ldap"}}).MayUsePassword() ||
		!(&config.OIDC{Flow: config.FlowDevice, Upstream: config.Upstream{Name: "ldap"}}).MayUsePassword() ||
		(&config.OIDC{Upstream: config.Upstream{Name: "ldap", Flow: config.UpstreamFlowBrowser}}).MayUsePassword() ||
		(&config.OIDC{Username: "ci", Password: "x"}).MayUsePassword() {
		t.Error("MayUsePassword")
	}
}
