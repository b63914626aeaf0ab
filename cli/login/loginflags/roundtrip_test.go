package loginflags_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
)

func noEnv(string) string { return "" }

// parseBoth reads args (after "login oidc") with the front's parser and
// with pflag, as the engine does; both must give the same login.
func parseBoth(t *testing.T, args []string) *config.OIDC {
	t.Helper()
	var front loginflags.OIDC
	if !loginflags.Parse(front.Flags(), args) {
		t.Fatalf("the front declined %q", args)
	}
	var engine loginflags.OIDC
	fs := pflag.NewFlagSet("oidc", pflag.ContinueOnError)
	flagset.Add(fs, engine.Flags())
	if err := fs.Parse(args); err != nil {
		t.Fatalf("pflag: %v", err)
	}
	a, errA := front.Config(noEnv)
	b, errB := engine.Config(noEnv)
	if errA != nil || errB != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("front %+v (%v), engine %+v (%v)", a, errA, b, errB)
	}
	return a
}

// TestKubeconfigArgsRoundTrip: the flags get kubeconfig writes for a login
// read back into the same login, so what a kubeconfig says is what runs.
func TestKubeconfigArgsRoundTrip(t *testing.T) {
	full := &config.OIDC{Issuer: "https://dex.example.com/x", ClientID: "cli", Scopes: []string{"openid", "groups", "pinniped:request-audience"},
		CABundle: []byte("-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n"), RequestAudience: "cluster-a",
		Flow: config.FlowDevice, Upstream: config.Upstream{Name: "Corporate LDAP", Type: "ldap", Flow: config.UpstreamFlowPassword},
		ListenPort: 48095, SkipBrowser: true, SkipListen: true, CredentialCache: "file", SessionCache: "/tmp/sessions.yaml",
		Concierge: &config.Concierge{Endpoint: "https://10.0.0.1:6443", CABundle: []byte("agent CA"), APIGroupSuffix: "example.io",
			AuthenticatorType: "jwt", AuthenticatorName: "dex"},
		Timeout: 15 * time.Minute}
	// A provider's own options (present-token=access and a token exchange
	// exclude each other).
	direct := &config.OIDC{Issuer: "https://accounts.google.com", ClientID: "x.apps.googleusercontent.com", Scopes: []string{"openid", "email"},
		ClientSecret: "GOCSPX-x", AuthorizeParams: []string{"prompt=select_account", "hd=example.com"}, PresentToken: config.PresentAccess,
		CredentialCache: "keyring", Timeout: 15 * time.Minute, Upstream: config.Upstream{Type: "oidc"}}
	minimal := &config.OIDC{Issuer: "https://dex.example.com", ClientID: "pinniped-cli", Scopes: []string{"openid"},
		CredentialCache: "keyring", Timeout: 15 * time.Minute, Upstream: config.Upstream{Type: "oidc"}}
	for name, want := range map[string]*config.OIDC{"every field": full, "defaults": minimal, "a provider's options": direct} {
		args := want.Args()
		if args[0] != "login" || args[1] != "oidc" {
			t.Fatalf("%s: %q", name, args)
		}
		got := parseBoth(t, args[2:])
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n wrote %q\n read  %+v\n want  %+v", name, args, got, want)
		}
		if got.CredentialKey(config.Cluster{}) != want.CredentialKey(config.Cluster{}) || got.SessionKey() != want.SessionKey() {
			t.Errorf("%s: the keys changed in the round trip", name)
		}
	}
}

// TestKeysFromFlagsAreStable pins the cache keys of kubeconfig arguments
// as they are read (CA bundles decoded and joined, defaults applied): a
// change in how flags become a login orphans cached credentials as surely
// as a change in the key writer, so it must come with a new key version.
func TestKeysFromFlagsAreStable(t *testing.T) {
	ca := "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClEwRT0KLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
	c := parseBoth(t, []string{"--enable-concierge", "--concierge-api-group-suffix=pinniped.dev", "--concierge-authenticator-name=dex",
		"--concierge-authenticator-type=jwt", "--concierge-endpoint=https://10.0.0.1:6443", "--concierge-ca-bundle-data=" + ca,
		"--issuer=https://dex.example.com", "--client-id=pinniped-cli", "--scopes=offline_access,openid,groups",
		"--ca-bundle-data=" + ca, "--ca-bundle-data=" + ca, "--request-audience=cluster-a"})
	cluster := config.Cluster{Server: "https://10.0.0.1:6443", CA: []byte("cluster CA")}
	if got, want := c.CredentialKey(cluster), "cred-07af7eb4c20d48fbd7632e53cb8f50ad45e871225e2e377b321adbc1b33bdc41"; got != want {
		t.Errorf("credential key %s, want %s", got, want)
	}
	if got, want := c.SessionKey(), "sess-f7db67b3aad53c6806573e5243ae95b4b2dae9854d88673476b0077ff51a922f"; got != want {
		t.Errorf("session key %s, want %s", got, want)
	}
	// A provider's own options (the members added after v2 began).
	c = parseBoth(t, []string{"--issuer=https://accounts.google.com", "--client-id=x.apps.googleusercontent.com", "--scopes=openid,email",
		"--client-secret=GOCSPX-x", "--authorize-param=prompt=select_account", "--authorize-param=hd=example.com", "--present-token=access"})
	if got, want := c.CredentialKey(cluster), "cred-4b363fdfe1aa32bd906d3cb449f6adfe4b934f13b4e4503f58ebef909fb0f3cb"; got != want {
		t.Errorf("credential key with a provider's options %s, want %s", got, want)
	}
	if got, want := c.SessionKey(), "sess-883e874178e5b4a70b5dbda6c94c1bcd5b4e87c6616d89eb03c0ca2cddb38ee3"; got != want {
		t.Errorf("session key with a provider's options %s, want %s", got, want)
	}
}
