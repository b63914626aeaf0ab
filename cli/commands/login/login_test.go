package login

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

const execInfo = `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":false,"cluster":{"server":"https://10.0.0.1:6443"}}}`

func oidc(t *testing.T, env map[string]string, args ...string) (*OIDCOptions, error) {
	t.Helper()
	var got *OIDCOptions
	f := cmdutil.Test(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, env)
	cmd := NewCmdOIDC(f, func(_ context.Context, o *OIDCOptions) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	return got, err
}

func TestLoginOIDCOptions(t *testing.T) {
	env := map[string]string{"KUBERNETES_EXEC_INFO": execInfo, "PINNIPED_USERNAME": "ci-bot", "PINNIPED_PASSWORD": "s3cret",
		"PINNIPED_UPSTREAM_IDENTITY_PROVIDER_FLOW": "cli_password"}
	o, err := oidc(t, env, "--issuer=https://supervisor.example.com", "--client-id=pinniped-cli", "--scopes=openid,groups",
		"--upstream-identity-provider-name=LDAP", "--upstream-identity-provider-type=ldap", "--upstream-identity-provider-flow=browser_authcode",
		"--enable-concierge", "--concierge-endpoint=https://10.0.0.1:6443", "--concierge-authenticator-type=jwt", "--concierge-authenticator-name=sup",
		"--concierge-api-group-suffix=example.io", "--credential-cache=file")
	if err != nil {
		t.Fatal(err)
	}
	c := o.Login
	if c.Issuer != "https://supervisor.example.com" || strings.Join(c.Scopes, ",") != "openid,groups" || c.CredentialCache != "file" ||
		c.Upstream != (config.Upstream{Name: "LDAP", Type: "ldap", Flow: "cli_password"}) || !c.PasswordLogin() ||
		c.Username != "ci-bot" || c.Password != "s3cret" || c.Concierge == nil || c.Concierge.Suffix() != "example.io" {
		t.Fatalf("login %+v", c)
	}
	if o.Exec.Interactive || o.Exec.Cluster == nil || o.Exec.Cluster.Server != "https://10.0.0.1:6443" {
		t.Fatalf("exec %+v", o.Exec)
	}
	for name, c := range map[string]struct {
		env  map[string]string
		args []string
		want string
	}{
		"no issuer":           {nil, nil, "--issuer is required"},
		"http issuer":         {nil, []string{"--issuer=http://dex"}, "must be an https URL"},
		"unknown flow":        {nil, []string{"--issuer=https://dex", "--flow=pigeon"}, `--flow "pigeon"`},
		"bad agent CA":        {nil, []string{"--issuer=https://dex", "--enable-concierge", "--concierge-endpoint=https://x", "--concierge-authenticator-type=jwt", "--concierge-authenticator-name=a", "--concierge-ca-bundle-data=%%%"}, "not base64"},
		"malformed exec info": {map[string]string{"KUBERNETES_EXEC_INFO": "{"}, []string{"--issuer=https://dex"}, "KUBERNETES_EXEC_INFO"},
		"unknown flag":        {nil, []string{"--issuer=https://dex", "--nope"}, "unknown flag"},
	} {
		if o, err := oidc(t, c.env, c.args...); err == nil || o != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestLoginStaticOptions(t *testing.T) {
	run := func(env map[string]string, args ...string) (*StaticOptions, error) {
		var got *StaticOptions
		cmd := NewCmdStatic(cmdutil.Test(nil, &bytes.Buffer{}, &bytes.Buffer{}, env), func(_ context.Context, o *StaticOptions) error { got = o; return nil })
		cmd.SetArgs(args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		return got, cmd.Execute()
	}
	o, err := run(map[string]string{"MY_TOKEN": "t0k3n"}, "--token-env=MY_TOKEN", "--enable-concierge", "--concierge-endpoint=https://x",
		"--concierge-authenticator-type=webhook", "--concierge-authenticator-name=corp")
	if err != nil || o.Login.Token != "t0k3n" || o.Login.TokenEnv != "MY_TOKEN" || o.Login.Concierge.AuthenticatorName != "corp" {
		t.Fatalf("%+v %v", o, err)
	}
	for name, args := range map[string][]string{
		"no token":       nil,
		"unset variable": {"--token-env=NOT_SET"},
		"http agent":     {"--token=a", "--enable-concierge", "--concierge-endpoint=http://x", "--concierge-authenticator-type=webhook", "--concierge-authenticator-name=c"},
	} {
		if o, err := run(map[string]string{"MY_TOKEN": "t"}, args...); err == nil || o != nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestArgumentErrorsNeverQuoteValues: the login commands' own parsing
// names the flag at fault, never an argument (kubectl shows the error).
func TestArgumentErrorsNeverQuoteValues(t *testing.T) {
	const secret = "positional-secret-value-123"
	for _, args := range [][]string{
		{"--issuer=https://x.example.com", secret},
		{"--issuer=https://x.example.com", "--", secret},
		{"--listen-port=" + secret},
		{"-t" + secret},
	} {
		_, err := oidc(t, nil, args...)
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("oidc %q: %v", args, err)
		}
		f := cmdutil.Test(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, nil)
		cmd := NewCmdStatic(f, func(context.Context, *StaticOptions) error { return nil })
		cmd.SetArgs(append([]string{"--token-env=T"}, args[1:]...))
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); len(args) > 1 && (err == nil || strings.Contains(err.Error(), secret)) {
			t.Errorf("static %q: %v", args, err)
		}
	}
	// A word right after `login` is not echoed either.
	root := NewCmdLogin(cmdutil.Test(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, nil))
	root.SetArgs([]string{secret})
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	if err := root.Execute(); err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "login oidc") {
		t.Errorf("login %q: %v", secret, err)
	}
	if _, err := oidc(t, nil, "--listen-port=many"); err == nil || !strings.Contains(err.Error(), "--listen-port") {
		t.Errorf("the flag at fault is not named: %v", err)
	}
}
