package getkubeconfig

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin/oidctest"
	"github.com/pinniped-kit/pinniped/kubeconfig"
)

func TestKubeconfigFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"both static tokens":    {"--static-token=a", "--static-token-env=B"},
		"unknown mode":          {"--concierge-mode=Magic"},
		"unknown authenticator": {"--concierge-authenticator-type=ldap", "--concierge-authenticator-name=x"},
		"type without a name":   {"--concierge-authenticator-type=jwt"},
		"merge without a file":  {"--merge"},
		"http issuer":           {"--oidc-issuer=http://dex"},
		"no time":               {"--timeout=0"},
		"a positional argument": {"extra"},
	} {
		var got *Options
		cmd := NewCmdKubeconfig(cmdutil.Test(nil, &bytes.Buffer{}, &bytes.Buffer{}, nil), func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs(args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil || got != nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// getKubeconfig runs get kubeconfig against a cluster whose agent has one
// JWTAuthenticator trusting idp, and returns the login it writes.
func getKubeconfig(t *testing.T, idp *oidctest.Provider, args ...string) (*config.OIDC, *clientcmdapi.Config, error) {
	t.Helper()
	clusterCA := base64.StdEncoding.EncodeToString(idp.CABundle) // any real certificate
	jwt := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.concierge.pinniped.dev/v1alpha1", "kind": "JWTAuthenticator", "metadata": map[string]any{"name": "dex"},
		"spec": map[string]any{"issuer": idp.URL, "audience": "cluster-7f3a",
			"tls": map[string]any{"certificateAuthorityData": base64.StdEncoding.EncodeToString(idp.CABundle)}}}}
	ci := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.concierge.pinniped.dev/v1alpha1", "kind": "CredentialIssuer", "metadata": map[string]any{"name": "pinniped-config"},
		"status": map[string]any{"strategies": []any{map[string]any{"type": "KubeClusterSigningCertificate", "status": "Success", "reason": "FetchedKey",
			"message": "ok", "lastUpdateTime": "2026-11-22T10:00:00Z",
			"frontend": map[string]any{"type": "TokenCredentialRequestAPI", "tokenCredentialRequestInfo": map[string]any{"server": "https://10.99.0.1:6443", "certificateAuthorityData": clusterCA}}}}}}}
	lists := map[schema.GroupVersionResource]string{
		{Group: "config.concierge.pinniped.dev", Version: "v1alpha1", Resource: "credentialissuers"}:             "CredentialIssuerList",
		{Group: "authentication.concierge.pinniped.dev", Version: "v1alpha1", Resource: "jwtauthenticators"}:     "JWTAuthenticatorList",
		{Group: "authentication.concierge.pinniped.dev", Version: "v1alpha1", Resource: "webhookauthenticators"}: "WebhookAuthenticatorList",
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, jwt, ci)

	admin := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := os.WriteFile(admin, []byte(`apiVersion: v1
kind: Config
current-context: admin
clusters: [{name: kind, cluster: {server: "https://10.99.0.1:6443", certificate-authority-data: `+clusterCA+`}}]
contexts: [{name: admin, context: {cluster: kind, user: admin}}]
users: [{name: admin, user: {token: x}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	f := cmdutil.Test(nil, &out, &errOut, map[string]string{handoff.FrontPathEnv: "/usr/local/bin/pinniped"})
	f.Dynamic = func(clientcmd.ClientConfig) (dynamic.Interface, *rest.Config, error) { return dyn, &rest.Config{}, nil }
	cmd := NewCmdGet(f)
	cmd.SetArgs(append([]string{"kubeconfig", "--kubeconfig=" + admin, "--skip-validation"}, args...))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		return nil, nil, err
	}
	gen, err := clientcmd.Load(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	user := gen.AuthInfos["kind-pinniped"]
	if gen.CurrentContext != "kind-pinniped" || user == nil || user.Exec == nil || user.Exec.Command != "/usr/local/bin/pinniped" || gen.Clusters["kind-pinniped"].Server != "https://10.99.0.1:6443" {
		t.Fatalf("kubeconfig:\n%s", out.String())
	}
	login, err := flagset.ParseOIDC(user.Exec.Args[2:], func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return login, gen, nil
}

// TestKubeconfigFromTheCluster: discovery of the agent's endpoint, the only
// authenticator and the issuer's scopes, through the factory's cluster
// client; the written exec entry reads back as the login it describes.
func TestKubeconfigFromTheCluster(t *testing.T) {
	idp := oidctest.New(t)
	login, _, err := getKubeconfig(t, idp, "--oidc-scopes=openid,offline_access,groups,nonsense,pinniped:request-audience")
	if err != nil {
		t.Fatal(err)
	}
	// oidctest lists no scopes in its discovery: all are kept but the
	// Supervisor's own, which it cannot know.
	if login.Issuer != idp.URL || login.RequestAudience != "cluster-7f3a" || string(login.CABundle) != string(idp.CABundle) ||
		login.Concierge == nil || login.Concierge.AuthenticatorName != "dex" || login.Concierge.Endpoint != "https://10.99.0.1:6443" ||
		strings.Join(login.Scopes, ",") != "openid,offline_access,groups,nonsense" || login.Upstream.Name != "" {
		t.Fatalf("the kubeconfig logs in as %+v", login)
	}
	if _, _, err := getKubeconfig(t, idp, "--upstream-identity-provider-name=okta"); err == nil || !strings.Contains(err.Error(), "not one") {
		t.Fatalf("an identity provider named for an issuer that is no Supervisor: %v", err)
	}
	// A provider's own options are written; presenting the access token,
	// the authenticator's audience is that token's, not one to exchange for.
	login, _, err = getKubeconfig(t, idp, "--oidc-client-secret=GOCSPX-x", "--oidc-authorize-param=prompt=select_account", "--oidc-present-token=access")
	if err != nil {
		t.Fatal(err)
	}
	if login.ClientSecret != "GOCSPX-x" || strings.Join(login.AuthorizeParams, " ") != "prompt=select_account" || !login.PresentsAccessToken() || login.RequestAudience != "" {
		t.Fatalf("the kubeconfig logs in as %+v", login)
	}
}

// TestKubeconfigWithASupervisor: the identity provider and its flow come
// from the Supervisor's list, and the exchange's scope is always asked for.
func TestKubeconfigWithASupervisor(t *testing.T) {
	idp := oidctest.New(t)
	idp.IDPs = []oidctest.IDP{
		{Name: "My LDAP", Type: "ldap", Flows: []string{config.UpstreamFlowPassword, config.UpstreamFlowBrowser}},
		{Name: "okta", Type: "oidc", Flows: []string{config.UpstreamFlowBrowser}},
	}
	login, _, err := getKubeconfig(t, idp, "--upstream-identity-provider-name=My LDAP", "--oidc-scopes=openid,offline_access,username,groups")
	if err != nil {
		t.Fatal(err)
	}
	if login.Upstream != (config.Upstream{Name: "My LDAP", Type: "ldap", Flow: config.UpstreamFlowPassword}) ||
		strings.Join(login.Scopes, ",") != "openid,offline_access,username,groups,pinniped:request-audience" || login.RequestAudience != "cluster-7f3a" {
		t.Fatalf("the kubeconfig logs in as %+v", login)
	}
	if login, _, err = getKubeconfig(t, idp, "--upstream-identity-provider-type=oidc"); err != nil || login.Upstream.Name != "okta" || login.Upstream.Flow != config.UpstreamFlowBrowser {
		t.Fatalf("the only oidc provider: %+v %v", login, err)
	}
	for args, want := range map[string]string{
		"":                                       `multiple Supervisor upstream identity providers were found ([{"name":"My LDAP"`,
		"--upstream-identity-provider-name=nope": `no Supervisor upstream identity providers with name "nope"`,
		"--upstream-identity-provider-name=okta --upstream-identity-provider-flow=cli_password": "offers the flows browser_authcode",
	} {
		if _, _, err := getKubeconfig(t, idp, strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want %q, got %v", args, want, err)
		}
	}
	if _, _, err := getKubeconfig(t, idp, "--upstream-identity-provider-name=okta", "--oidc-request-audience=x.pinniped.dev"); err == nil || !strings.Contains(err.Error(), "refuses to exchange") {
		t.Errorf("an audience the Supervisor refuses: %v", err)
	}
	// All three given: taken as they are, as upstream.
	if login, _, err = getKubeconfig(t, idp, "--upstream-identity-provider-name=later", "--upstream-identity-provider-type=ldap", "--upstream-identity-provider-flow=cli_password"); err != nil || login.Upstream.Name != "later" {
		t.Fatalf("%+v %v", login, err)
	}
}

// TestSupervisorScopes: username and groups go together, as upstream: a
// Supervisor that lists only one of them gets neither.
func TestSupervisorScopes(t *testing.T) {
	asked := []string{"openid", "offline_access", "username", "groups"}
	for supported, want := range map[string]string{
		"":                                 "openid,offline_access,username,groups,pinniped:request-audience",
		"openid,username,groups":           "openid,offline_access,username,groups,pinniped:request-audience",
		"openid,username":                  "openid,offline_access,pinniped:request-audience",
		"openid,groups,offline_access":     "openid,offline_access,pinniped:request-audience",
		"openid,pinniped:request-audience": "openid,offline_access,pinniped:request-audience",
	} {
		var sup []string
		if supported != "" {
			sup = strings.Split(supported, ",")
		}
		if got := strings.Join(supervisorScopes(asked, sup, true), ","); got != want {
			t.Errorf("supported %q: %s, want %s", supported, got, want)
		}
	}
}

// TestKubeconfigFlagsAsUpstream: enumerated values in any case, a static
// token without the agent, repeatable --oidc-ca-bundle.
func TestKubeconfigFlagsAsUpstream(t *testing.T) {
	var got *Options
	cmd := NewCmdKubeconfig(cmdutil.Test(nil, &bytes.Buffer{}, &bytes.Buffer{}, nil), func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--concierge-mode=impersonationproxy", "--concierge-authenticator-type=JWT", "--concierge-authenticator-name=dex",
		"--upstream-identity-provider-type=LDAP", "--upstream-identity-provider-flow=CLI_Password", "--oidc-ca-bundle=a.pem", "--oidc-ca-bundle=b.pem", "--oidc-flow=Device"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.ConciergeMode != "ImpersonationProxy" || got.AuthenticatorType != "jwt" || got.OIDC.Upstream.Type != "ldap" || got.OIDC.Upstream.Flow != "cli_password" || got.OIDC.Flow != config.FlowDevice ||
		strings.Join(got.OIDCCABundlePaths, ",") != "a.pem,b.pem" {
		t.Fatalf("%+v", got)
	}
	got = nil
	cmd = NewCmdKubeconfig(cmdutil.Test(nil, &bytes.Buffer{}, &bytes.Buffer{}, nil), func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--static-token-env=MY_TOKEN", "--no-concierge"})
	if err := cmd.Execute(); err != nil || got == nil || got.Static.TokenEnv != "MY_TOKEN" || !got.NoConcierge {
		t.Fatalf("a static token without the agent: %v %+v", err, got)
	}
}

// TestOutputFileIsReplacedOrMerged: -o replaces the file, as upstream; with
// --merge the new context joins what is there.
func TestOutputFileIsReplacedOrMerged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.kubeconfig")
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: Config\ncurrent-context: old\ncontexts: [{name: old, context: {cluster: old}}]\nclusters: [{name: old, cluster: {server: https://old}}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gen := kubeconfig.Build("new", "https://new", nil, kubeconfig.Exec{Path: "pinniped"}, &config.Static{TokenEnv: "T"})
	var errOut bytes.Buffer
	o := &Options{Output: path, Merge: true, ErrOut: &errOut}
	if err := o.write(gen); err != nil {
		t.Fatal(err)
	}
	merged, err := clientcmd.LoadFromFile(path)
	if err != nil || merged.Contexts["old"] == nil || merged.Contexts["new"] == nil || merged.CurrentContext != "old" {
		t.Fatalf("merged: %+v %v", merged, err)
	}
	o.Merge = false
	if err := o.write(gen); err != nil {
		t.Fatal(err)
	}
	replaced, err := clientcmd.LoadFromFile(path)
	if err != nil || replaced.Contexts["old"] != nil || replaced.CurrentContext != "new" || !strings.Contains(errOut.String(), "Replaced "+path) {
		t.Fatalf("replaced: %+v %v %q", replaced, err, errOut.String())
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", info.Mode())
	}
}

// TestFleet: one kubeconfig for several contexts: a context each, named for
// its cluster, with the same login (one issuer: one session serves all);
// --all-contexts names and skips a cluster without the agent; two contexts
// of one cluster make one; clusters that accept one token are named on
// stderr.
func TestFleet(t *testing.T) {
	idp := oidctest.New(t)
	clusterCA := base64.StdEncoding.EncodeToString(idp.CABundle)
	stagingAudience := "fleet"
	withAgent := func(audience string) dynamic.Interface {
		jwt := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "authentication.concierge.pinniped.dev/v1alpha1", "kind": "JWTAuthenticator", "metadata": map[string]any{"name": "dex"},
			"spec": map[string]any{"issuer": idp.URL, "audience": audience,
				"tls": map[string]any{"certificateAuthorityData": clusterCA}}}}
		ci := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "config.concierge.pinniped.dev/v1alpha1", "kind": "CredentialIssuer", "metadata": map[string]any{"name": "pinniped-config"},
			"status": map[string]any{"strategies": []any{map[string]any{"type": "KubeClusterSigningCertificate", "status": "Success", "reason": "FetchedKey",
				"message": "ok", "lastUpdateTime": "2026-11-22T10:00:00Z",
				"frontend": map[string]any{"type": "TokenCredentialRequestAPI"}}}}}}
		return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			{Group: "config.concierge.pinniped.dev", Version: "v1alpha1", Resource: "credentialissuers"}:             "CredentialIssuerList",
			{Group: "authentication.concierge.pinniped.dev", Version: "v1alpha1", Resource: "jwtauthenticators"}:     "JWTAuthenticatorList",
			{Group: "authentication.concierge.pinniped.dev", Version: "v1alpha1", Resource: "webhookauthenticators"}: "WebhookAuthenticatorList",
		}, jwt, ci)
	}
	without := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Group: "config.concierge.pinniped.dev", Version: "v1alpha1", Resource: "credentialissuers"}: "CredentialIssuerList",
	})
	admin := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := os.WriteFile(admin, []byte(`apiVersion: v1
kind: Config
current-context: prod
clusters:
- {name: prod, cluster: {server: "https://prod:6443", certificate-authority-data: `+clusterCA+`}}
- {name: staging, cluster: {server: "https://staging:6443", certificate-authority-data: `+clusterCA+`}}
- {name: bare, cluster: {server: "https://bare:6443", certificate-authority-data: `+clusterCA+`}}
contexts:
- {name: prod, context: {cluster: prod, user: admin}}
- {name: prod-again, context: {cluster: prod, user: admin}}
- {name: staging, context: {cluster: staging, user: admin}}
- {name: bare, context: {cluster: bare, user: admin}}
- {name: mine, context: {cluster: staging, user: me}}
users:
- {name: admin, user: {token: x}}
- {name: me, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: pinniped, args: [login, oidc]}}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	runCtx := context.Background()
	run := func(args ...string) (*clientcmdapi.Config, string, error) {
		var out, errOut bytes.Buffer
		f := cmdutil.Test(nil, &out, &errOut, map[string]string{handoff.FrontPathEnv: "/usr/local/bin/pinniped"})
		f.Dynamic = func(cc clientcmd.ClientConfig) (dynamic.Interface, *rest.Config, error) {
			cfg, err := cc.ClientConfig()
			if err != nil {
				return nil, nil, err
			}
			switch {
			case strings.Contains(cfg.Host, "bare"):
				return without, cfg, nil
			case strings.Contains(cfg.Host, "staging"):
				return withAgent(stagingAudience), cfg, nil
			}
			return withAgent("fleet"), cfg, nil
		}
		cmd := NewCmdGet(f)
		cmd.SetArgs(append([]string{"kubeconfig", "--kubeconfig=" + admin, "--skip-validation"}, args...))
		if err := cmd.ExecuteContext(runCtx); err != nil {
			return nil, errOut.String(), err
		}
		gen, err := clientcmd.Load(out.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return gen, errOut.String(), nil
	}

	gen, stderr, err := run("--context", "staging", "--context", "prod")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if len(gen.Contexts) != 2 || gen.CurrentContext != "staging-pinniped" || gen.Clusters["prod-pinniped"].Server != "https://prod:6443" ||
		gen.Clusters["staging-pinniped"].Server != "https://staging:6443" {
		t.Fatalf("two contexts: %+v", gen.Contexts)
	}
	a, b := gen.AuthInfos["prod-pinniped"].Exec, gen.AuthInfos["staging-pinniped"].Exec
	la, _ := flagset.ParseOIDC(a.Args[2:], func(string) string { return "" })
	lb, _ := flagset.ParseOIDC(b.Args[2:], func(string) string { return "" })
	if la == nil || lb == nil || la.SessionKey() != lb.SessionKey() {
		t.Fatal("the two clusters' logins do not share one session")
	}
	if a.Env[0].Value != "prod-pinniped" || b.Env[0].Value != "staging-pinniped" {
		t.Fatalf("the entries do not name their contexts: %v %v", a.Env, b.Env)
	}
	// Both JWTAuthenticators have the audience fleet: the token exchanged
	// for one cluster is good at the other. Stdout held only the kubeconfig
	// (run parsed it).
	shared := "warning: contexts prod-pinniped, staging-pinniped accept the same exchanged token (issuer " + idp.URL + ", audience fleet): "
	if strings.Count(stderr, "warning: contexts") != 1 || !strings.Contains(stderr, shared) {
		t.Fatalf("no warning that both clusters accept one token:\n%s", stderr)
	}
	// One client ID and no exchange: the ID token itself goes to both.
	if _, stderr, err := run("--context", "staging", "--context", "prod", "--oidc-client-id=fleet"); err != nil ||
		!strings.Contains(stderr, "warning: contexts prod-pinniped, staging-pinniped accept the same ID token (issuer "+idp.URL+", audience fleet): ") {
		t.Fatalf("the ID token for both clusters: %v\n%s", err, stderr)
	}
	// An audience for each cluster: a token is good at its own only.
	stagingAudience = "fleet-staging"
	if _, stderr, err := run("--context", "staging", "--context", "prod"); err != nil || strings.Contains(stderr, "warning") {
		t.Fatalf("an audience for each cluster: %v\n%s", err, stderr)
	}
	stagingAudience = "fleet"

	gen, stderr, err = run("--all-contexts")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if len(gen.Contexts) != 2 || !strings.Contains(stderr, "skipped bare (no pinniped agent there)") || !strings.Contains(stderr, "context prod-again is the same cluster as prod") ||
		!strings.Contains(stderr, "skipped mine (it already logs in with pinniped)") || !strings.Contains(stderr, shared) {
		t.Fatalf("--all-contexts: %v\n%s", gen.Contexts, stderr)
	}
	if _, stderr, err := run("--context", "bare"); err == nil {
		t.Fatalf("a named context without the agent was skipped:\n%s", stderr)
	}
	if _, _, err := run("--context", "prod", "--all-contexts"); err == nil {
		t.Fatal("--context with --all-contexts accepted")
	}

	// Interrupted (Ctrl-C): no context is skipped as "context canceled",
	// and the kubeconfig at -o is left as it was.
	previous := filepath.Join(t.TempDir(), "fleet.kubeconfig")
	if err := os.WriteFile(previous, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	runCtx = cancelled
	if _, stderr, err := run("--all-contexts", "-o", previous); err == nil || strings.Contains(stderr, "skipped") {
		t.Fatalf("an interrupted --all-contexts: %v\n%s", err, stderr)
	}
	if b, _ := os.ReadFile(previous); string(b) != "kept" {
		t.Fatalf("an interrupted run replaced the kubeconfig at -o: %q", b)
	}
}

// TestPresented: the token each login shows its cluster, as the login
// runner picks it, for the fleet's warning.
func TestPresented(t *testing.T) {
	const issuer = "https://dex.example.com"
	jwt := &kubeconfig.Authenticator{Type: "jwt", Name: "dex", Issuer: issuer, Audience: "api"}
	for name, tc := range map[string]struct {
		login kubeconfig.Login
		auth  *kubeconfig.Authenticator
		want  kubeconfig.Presented
	}{
		"the ID token": {&config.OIDC{Issuer: issuer, ClientID: "pinniped-cli"}, jwt,
			kubeconfig.Presented{Context: "c", Issuer: issuer, Audience: "pinniped-cli", Token: kubeconfig.IDToken}},
		"an exchange": {&config.OIDC{Issuer: issuer, ClientID: "pinniped-cli", RequestAudience: "cluster-a"}, jwt,
			kubeconfig.Presented{Context: "c", Issuer: issuer, Audience: "cluster-a", Token: kubeconfig.ExchangedToken}},
		"the client ID asked for is no exchange": {&config.OIDC{Issuer: issuer, ClientID: "pinniped-cli", RequestAudience: "pinniped-cli"}, nil,
			kubeconfig.Presented{Context: "c", Issuer: issuer, Audience: "pinniped-cli", Token: kubeconfig.IDToken}},
		"the access token": {&config.OIDC{Issuer: issuer, ClientID: "pinniped-cli", PresentToken: config.PresentAccess}, jwt,
			kubeconfig.Presented{Context: "c", Issuer: issuer, Audience: "api", Token: kubeconfig.AccessToken}},
		"the access token, to a webhook": {&config.OIDC{Issuer: issuer, ClientID: "pinniped-cli", PresentToken: config.PresentAccess}, &kubeconfig.Authenticator{Type: "webhook", Name: "w"},
			kubeconfig.Presented{Context: "c", Issuer: issuer, Token: kubeconfig.AccessToken}},
		"a static token": {&config.Static{TokenEnv: "T"}, nil, kubeconfig.Presented{Context: "c"}},
	} {
		if got := presented("c", tc.login, tc.auth); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}
