package loginflags_test

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
)

// The arguments upstream Pinniped's `get kubeconfig` (v0.39) writes, in its
// order, with a CA bundle that is one PEM certificate.
const (
	upstreamCA        = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClEwRT0KLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
	upstreamConcierge = "--enable-concierge --concierge-api-group-suffix=pinniped.dev --concierge-authenticator-name=dex " +
		"--concierge-authenticator-type=jwt --concierge-endpoint=https://10.99.0.1:6443 --concierge-ca-bundle-data=" + upstreamCA
)

// TestUpstreamKubeconfigsLogInUnchanged: kubeconfigs made by upstream's
// get kubeconfig run our login as they are, read the same by the front and
// the engine, and mean what they mean upstream.
func TestUpstreamKubeconfigsLogInUnchanged(t *testing.T) {
	for name, c := range map[string]struct {
		args  string
		check func(*config.OIDC) string
	}{
		"a direct OIDC issuer (Dex)": {
			upstreamConcierge + " --issuer=https://10.99.0.1:5556 --client-id=pinniped-cli" +
				" --scopes=offline_access,openid,pinniped:request-audience,username,groups --ca-bundle-data=" + upstreamCA + " --request-audience=pinniped-cli",
			func(c *config.OIDC) string {
				if c.Issuer != "https://10.99.0.1:5556" || c.RequestAudience != "pinniped-cli" || len(c.CABundle) == 0 ||
					strings.Join(c.Scopes, ",") != "offline_access,openid,pinniped:request-audience,username,groups" {
					return "issuer side"
				}
				return ""
			},
		},
		"a Supervisor, cli_password": {
			upstreamConcierge + " --issuer=https://supervisor.example.com/issuer --client-id=pinniped-cli" +
				" --scopes=offline_access,openid,pinniped:request-audience,username,groups --ca-bundle-data=" + upstreamCA +
				" --request-audience=cluster-1 --upstream-identity-provider-name=My LDAP --upstream-identity-provider-type=ldap" +
				" --upstream-identity-provider-flow=cli_password",
			func(c *config.OIDC) string {
				if c.Upstream != (config.Upstream{Name: "My LDAP", Type: "ldap", Flow: config.UpstreamFlowPassword}) || !c.PasswordLogin() {
					return "upstream identity provider"
				}
				return ""
			},
		},
		"a Supervisor, browser_authcode, with upstream's cache flags": {
			"--credential-cache=/home/alice/.config/pinniped/credentials.yaml " + upstreamConcierge +
				" --issuer=https://supervisor.example.com/issuer --client-id=pinniped-cli --scopes=offline_access,openid,pinniped:request-audience" +
				" --skip-browser --listen-port=48095 --session-cache=/home/alice/.config/pinniped/sessions.yaml --debug-session-cache" +
				" --request-audience=cluster-1 --upstream-identity-provider-name=okta --upstream-identity-provider-type=oidc" +
				" --upstream-identity-provider-flow=browser_authcode",
			func(c *config.OIDC) string {
				if c.Upstream.Flow != config.UpstreamFlowBrowser || !c.SkipBrowser || c.ListenPort != 48095 ||
					c.CredentialCache != "/home/alice/.config/pinniped/credentials.yaml" {
					return "browser login"
				}
				return ""
			},
		},
		"upstream v0.3-v0.5, with --concierge-namespace": {
			"--enable-concierge --concierge-namespace=pinniped-concierge --concierge-authenticator-name=dex --concierge-authenticator-type=jwt" +
				" --concierge-endpoint=https://10.99.0.1:6443 --concierge-ca-bundle-data=" + upstreamCA + " --issuer=https://10.99.0.1:5556" +
				" --client-id=pinniped-cli --scopes=offline_access,openid --request-audience=pinniped-cli",
			func(*config.OIDC) string { return "" },
		},
	} {
		args := strings.Split(c.args, " --")
		for i := 1; i < len(args); i++ {
			args[i] = "--" + args[i]
		}
		got := parseBoth(t, args)
		if err := got.Validate(); err != nil {
			t.Errorf("%s: refused: %v", name, err)
			continue
		}
		if got.Concierge == nil || got.Concierge.Endpoint != "https://10.99.0.1:6443" || got.Concierge.AuthenticatorName != "dex" ||
			got.Concierge.AuthenticatorType != "jwt" || len(got.Concierge.CABundle) == 0 {
			t.Errorf("%s: the agent side: %+v", name, got.Concierge)
		}
		if what := c.check(got); what != "" {
			t.Errorf("%s: %s: %+v", name, what, got)
		}
		if _, err := flagset.ParseOIDC(args, noEnv); err != nil {
			t.Errorf("%s: the engine's command refuses it: %v", name, err)
		}
	}
}

// TestUpstreamStaticKubeconfig: upstream's static-token kubeconfig.
func TestUpstreamStaticKubeconfig(t *testing.T) {
	args := strings.Fields(strings.ReplaceAll(upstreamConcierge, " --", "\n--") + "\n--token-env=PINNIPED_TEST_TOKEN")
	var front, engine loginflags.Static
	if !loginflags.Parse(front.Flags(), args) {
		t.Fatalf("the front declined %q", args)
	}
	fs := pflag.NewFlagSet("static", pflag.ContinueOnError)
	flagset.Add(fs, engine.Flags())
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		return map[string]string{"PINNIPED_TEST_TOKEN": "t0ken"}[k], k == "PINNIPED_TEST_TOKEN"
	}
	for _, s := range []*loginflags.Static{&front, &engine} {
		c, err := s.Config(env)
		if err != nil || c.Token != "t0ken" || c.Concierge == nil || c.Concierge.AuthenticatorName != "dex" {
			t.Fatalf("%+v %v", c, err)
		}
	}
}
