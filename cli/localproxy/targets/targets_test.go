package targets

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/kubeconfig"
)

func caPEM(t *testing.T) []byte {
	t.Helper()
	ca, err := certauthority.New("test", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM()
}

// roundTrip writes cfg to a file and loads it back, as the command will.
func roundTrip(t *testing.T, cfg *clientcmdapi.Config) *clientcmdapi.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	loaded, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return loaded
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestKubeconfigsOfGetKubeconfig: the contexts the project's kubeconfig
// writer makes are served, with the cache key kubectl's call of the plugin
// uses (the login model's key for the cluster kubectl hands it), and an
// upstream that carries the cluster and no credential.
func TestKubeconfigsOfGetKubeconfig(t *testing.T) {
	ca, issuerCA := caPEM(t), caPEM(t)
	oidc := &config.OIDC{Issuer: "https://issuer.example.com", ClientID: "pinniped-cli", Scopes: config.DefaultScopes, CABundle: issuerCA,
		RequestAudience: "cluster-a", Concierge: &config.Concierge{Endpoint: "https://10.0.0.1:6443", CABundle: ca, APIGroupSuffix: "pinniped.dev",
			AuthenticatorType: "jwt", AuthenticatorName: "sup"}}
	static := &config.Static{TokenEnv: "MY_TOKEN", Concierge: &config.Concierge{Endpoint: "https://10.0.0.2:6443", CABundle: ca,
		APIGroupSuffix: "pinniped.dev", AuthenticatorType: "webhook", AuthenticatorName: "hook"}}
	exec := kubeconfig.Exec{Path: "/usr/local/bin/pinniped"}
	cfg := kubeconfig.Build("cluster-a", "https://10.0.0.1:6443", ca, exec, oidc)
	if err := kubeconfig.Merge(cfg, kubeconfig.Build("Cluster_B", "https://10.0.0.2:6443", ca, exec, static)); err != nil {
		t.Fatal(err)
	}
	raw := roundTrip(t, cfg)

	ts, skipped, err := Build(*raw, Options{IsFront: handoff.IsFront, LookupEnv: env(map[string]string{"MY_TOKEN": "t0k3n"})})
	if err != nil || len(skipped) != 0 || len(ts) != 2 {
		t.Fatalf("%d targets, skipped %+v, %v", len(ts), skipped, err)
	}
	a, b := ts[1], ts[0] // sorted: "Cluster_B" < "cluster-a"
	if a.Context != "cluster-a" || b.Context != "Cluster_B" {
		t.Fatalf("order: %q %q", ts[0].Context, ts[1].Context)
	}
	for _, c := range []struct {
		t      *Target
		server string
		want   string
	}{
		{a, "https://10.0.0.1:6443", oidc.CredentialKey(config.Cluster{Server: "https://10.0.0.1:6443", CA: ca})},
		{b, "https://10.0.0.2:6443", (&config.Static{Token: "t0k3n", TokenEnv: "MY_TOKEN", Concierge: static.Concierge}).CredentialKey(config.Cluster{Server: "https://10.0.0.2:6443", CA: ca})},
	} {
		if got := c.t.CredentialKey(); got != c.want {
			t.Errorf("%s: credential key %s, kubectl's login stores %s", c.t.Context, got, c.want)
		}
		u := c.t.Upstream
		if u.Host != c.server || string(u.CAData) != string(ca) || u.CAFile != "" {
			t.Errorf("%s: upstream %s CA %d bytes file %q", c.t.Context, u.Host, len(u.CAData), u.CAFile)
		}
		if u.BearerToken != "" || u.ExecProvider != nil || u.AuthProvider != nil || len(u.CertData) > 0 || len(u.KeyData) > 0 {
			t.Errorf("%s: the upstream carries a user credential: %+v", c.t.Context, u)
		}
	}
	if !a.Interactive || b.Interactive {
		t.Errorf("interactive: oidc %v, static %v", a.Interactive, b.Interactive)
	}
	if a.Login.Kind() != "oidc" || b.Login.Kind() != "static" {
		t.Errorf("kinds %s %s", a.Login.Kind(), b.Login.Kind())
	}
}

// upstreamKubeconfig is the shape upstream Pinniped's `pinniped get
// kubeconfig` writes, with a CA in a file, a TLS server name and a proxy.
func upstreamKubeconfig(t *testing.T, ca []byte) string {
	t.Helper()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(ca)
	yaml := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kind
  cluster:
    server: https://10.99.0.1:6443
    certificate-authority: %s
    tls-server-name: kube.internal
    proxy-url: http://proxy.example.com:3128
contexts:
- name: kind-pinniped
  context: {cluster: kind, user: kind-pinniped}
current-context: kind-pinniped
users:
- name: kind-pinniped
  user:
    token: must-not-be-forwarded
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: /usr/local/bin/pinniped
      args:
      - login
      - oidc
      - --enable-concierge
      - --concierge-api-group-suffix=pinniped.dev
      - --concierge-authenticator-name=dex
      - --concierge-authenticator-type=jwt
      - --concierge-endpoint=https://10.99.0.1:6443
      - --concierge-ca-bundle-data=%s
      - --issuer=https://dex.example.com
      - --client-id=pinniped-cli
      - --scopes=offline_access,openid,pinniped:request-audience,username,groups
      - --ca-bundle-data=%s
      - --request-audience=kind
      - --upstream-identity-provider-flow=cli_password
      env: []
      provideClusterInfo: true
`, caFile, b64, b64)
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUpstreamPinnipedKubeconfig(t *testing.T) {
	ca := caPEM(t)
	raw, err := clientcmd.LoadFromFile(upstreamKubeconfig(t, ca))
	if err != nil {
		t.Fatal(err)
	}
	ts, skipped, err := Build(*raw, Options{IsFront: handoff.IsFront})
	if err != nil || len(ts) != 1 || len(skipped) != 0 {
		t.Fatalf("%d targets, skipped %+v, %v", len(ts), skipped, err)
	}
	tg := ts[0]
	u := tg.Upstream
	if u.Host != "https://10.99.0.1:6443" || u.ServerName != "kube.internal" || u.Proxy == nil || string(u.CAData) != string(ca) || u.CAFile != "" {
		t.Errorf("upstream %s server name %q proxy %v CA %d bytes file %q", u.Host, u.ServerName, u.Proxy != nil, len(u.CAData), u.CAFile)
	}
	if u.BearerToken != "" {
		t.Error("the kubeconfig user's token reached the upstream")
	}
	// kubectl hands the plugin the CA read from the file.
	if tg.Cluster.Server != "https://10.99.0.1:6443" || string(tg.Cluster.CA) != string(ca) {
		t.Errorf("cluster %+v", tg.Cluster)
	}
	if tg.Login.OIDC.Concierge == nil || tg.Login.OIDC.Concierge.AuthenticatorName != "dex" {
		t.Errorf("login %+v", tg.Login.OIDC)
	}
	// A password login needs a person unless both variables are set.
	if !tg.Interactive {
		t.Error("a password login without PINNIPED_USERNAME/PASSWORD needs a person")
	}
	ts, _, _ = Build(*raw, Options{IsFront: handoff.IsFront, LookupEnv: env(map[string]string{"PINNIPED_USERNAME": "u", "PINNIPED_PASSWORD": "p"})})
	if ts[0].Interactive {
		t.Error("a password login with both variables set needs nobody")
	}
	ts, _, _ = Build(*raw, Options{IsFront: handoff.IsFront, LookupEnv: env(map[string]string{"PINNIPED_USERNAME": "u"})})
	if !ts[0].Interactive {
		t.Error("a password login with no password needs a person")
	}
}

// TestSkippedWithAReason: every context not served is returned, with why.
func TestSkippedWithAReason(t *testing.T) {
	ca := caPEM(t)
	raw := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server, cluster.CertificateAuthorityData = "https://10.0.0.1:6443", ca
	raw.Clusters["c"] = cluster
	badCA := clientcmdapi.NewCluster()
	badCA.Server, badCA.CertificateAuthority = "https://10.0.0.1:6443", filepath.Join(t.TempDir(), "missing.pem")
	raw.Clusters["bad-ca"] = badCA
	good := []string{"login", "oidc", "--issuer=https://issuer.example.com", "--client-id=x"}
	// What kubectl accepts: a v1 entry names its interactive mode.
	ex := func(command string, args ...string) *clientcmdapi.ExecConfig {
		return &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode, Command: command, Args: args}
	}
	users := map[string]*clientcmdapi.AuthInfo{
		"token":     {Token: "abc"},
		"aws":       {Exec: ex("aws", "eks", "get-token")},
		"whoami":    {Exec: ex("pinniped", "whoami")},
		"proxied":   {Exec: ex("/home/me/bin/pinniped", "proxy", "credential", "--state-dir=/x")},
		"bad-flag":  {Exec: ex("pinniped", "login", "oidc", "--no-such-flag=secret-value-1")},
		"no-token":  {Exec: ex("pinniped", "login", "static", "--token-env=UNSET")},
		"http":      {Exec: ex("pinniped", "login", "oidc", "--issuer=http://issuer.example.com")},
		"as":        {Impersonate: "admin", Exec: ex("pinniped", good...)},
		"ok":        {Exec: ex("pinniped", good...)},
		"windows":   {Exec: ex(`C:\bin\Pinniped.exe`, good...)},
		"bad-ca":    {Exec: withClusterInfo(ex("pinniped", good...))},
		"no-user-c": nil,
	}
	want := map[string]string{
		"token": NotPinniped, "aws": NotPinniped, "whoami": NotPinniped, "proxied": AlreadyProxied, "bad-flag": Unusable,
		"no-token": Unusable, "http": Unusable, "as": Unusable, "bad-ca": Unusable, "no-user-c": NotPinniped, "no-cluster": NotPinniped,
	}
	for name, u := range users {
		if u != nil {
			raw.AuthInfos[name] = u
		}
		kctx := clientcmdapi.NewContext()
		kctx.Cluster, kctx.AuthInfo = "c", name
		if name == "bad-ca" {
			kctx.Cluster = "bad-ca"
		}
		raw.Contexts[name] = kctx
	}
	raw.Contexts["no-cluster"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "ok"}

	ts, skipped, err := Build(*roundTrip(t, raw), Options{IsFront: handoff.IsFront})
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, tg := range ts {
		served = append(served, tg.Context)
	}
	if strings.Join(served, ",") != "ok,windows" {
		t.Errorf("served %q", served)
	}
	got := map[string]string{}
	for _, s := range skipped {
		got[s.Context] = s.Kind
		if s.Reason == "" {
			t.Errorf("%s: no reason", s.Context)
		}
		if strings.Contains(s.Reason, "secret-value-1") || strings.Contains(s.Reason, "abc") {
			t.Errorf("%s: the reason quotes a value: %s", s.Context, s.Reason)
		}
		t.Logf("%s: %s: %s", s.Context, s.Kind, s.Reason)
	}
	for name, kind := range want {
		if got[name] != kind {
			t.Errorf("%s: skipped as %q, want %q", name, got[name], kind)
		}
	}
	if len(got) != len(want) {
		t.Errorf("skipped %v, want %v", got, want)
	}
}

func withClusterInfo(e *clientcmdapi.ExecConfig) *clientcmdapi.ExecConfig {
	e.ProvideClusterInfo = true
	return e
}

func TestOnlyTheNamedContexts(t *testing.T) {
	raw, err := clientcmd.LoadFromFile(upstreamKubeconfig(t, caPEM(t)))
	if err != nil {
		t.Fatal(err)
	}
	raw.Contexts["other"] = &clientcmdapi.Context{Cluster: "kind", AuthInfo: "kind-pinniped"}
	ts, _, err := Build(*raw, Options{IsFront: handoff.IsFront, Contexts: []string{"other"}})
	if err != nil || len(ts) != 1 || ts[0].Context != "other" {
		t.Fatalf("%+v %v", ts, err)
	}
	_, _, err = Build(*raw, Options{IsFront: handoff.IsFront, Contexts: []string{"other", "nope"}})
	if !errors.Is(err, ErrUnknownContext) || !strings.Contains(err.Error(), `"nope"`) ||
		!strings.Contains(err.Error(), `"kind-pinniped", "other"`) {
		t.Errorf("an unknown context: %v", err)
	}
}

// TestTheClientConfigIsKubectls: the context's client config comes from
// the caller (kubectl's loading rules and overrides) when given.
func TestTheClientConfigIsKubectls(t *testing.T) {
	raw, err := clientcmd.LoadFromFile(upstreamKubeconfig(t, caPEM(t)))
	if err != nil {
		t.Fatal(err)
	}
	ca := caPEM(t)
	ts, _, err := Build(*raw, Options{IsFront: handoff.IsFront, ClientConfig: func(name string) (*rest.Config, error) {
		return &rest.Config{Host: "https://elsewhere:443", TLSClientConfig: rest.TLSClientConfig{CAData: ca}, BearerToken: "x"}, nil
	}})
	if err != nil || len(ts) != 1 {
		t.Fatal(err)
	}
	if ts[0].Upstream.Host != "https://elsewhere:443" || ts[0].Cluster.Server != "https://elsewhere:443" || ts[0].Upstream.BearerToken != "" {
		t.Errorf("%+v %+v", ts[0].Upstream, ts[0].Cluster)
	}
}

var slugRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

func TestSlug(t *testing.T) {
	for name, prefix := range map[string]string{
		"kind-pinniped": "kind-pinniped-",
		"Cluster_B":     "cluster-b-",
		"arn:aws:eks:eu-west-1:123456789012:cluster/prod": "arn-aws-eks-eu-west-1-123456789012-clust-",
		"gke_proj_zone_c": "gke-proj-zone-c-",
		"..":              "",
		"":                "",
		"ünïcode/ctx":     "n-code-ctx-",
		"a/../b":          "a-b-",
	} {
		s := Slug(name, slugHex)
		if !slugRE.MatchString(s) || !strings.HasPrefix(s, prefix) || len(s) > maxSlugName+1+slugHex {
			t.Errorf("Slug(%q) = %q, want [a-z0-9-] starting %q", name, s, prefix)
		}
		if Slug(name, slugHex) != s {
			t.Errorf("Slug(%q) is not stable", name)
		}
	}
	if Slug("a.b", slugHex) == Slug("a_b", slugHex) || Slug("A", slugHex) == Slug("a", slugHex) {
		t.Error("names that read the same have the same slug")
	}
}

// TestSlugClash: two names with the same readable part and the same first
// six hex digits of their hash (found by search) still get distinct slugs.
func TestSlugClash(t *testing.T) {
	seps := []string{".", "_", ":", "/", "@"}
	seen := map[string]string{}
	var x, y string
	for i := 0; x == ""; i++ {
		// x<seps...>y: every variant reads "x-...-y".
		var b strings.Builder
		b.WriteString("x")
		for j, n := 0, i; j < 9; j, n = j+1, n/len(seps) {
			b.WriteString(seps[n%len(seps)])
			b.WriteString(string(rune('a' + j)))
		}
		name := b.String()
		s := Slug(name, slugHex)
		if other, ok := seen[s]; ok {
			x, y = other, name
		}
		seen[s] = name
	}
	ts := []*Target{{Context: x}, {Context: y}, {Context: "plain"}}
	assignSlugs(ts)
	if ts[0].Slug == ts[1].Slug {
		t.Fatalf("%q and %q share the slug %s", x, y, ts[0].Slug)
	}
	if ts[2].Slug != Slug("plain", slugHex) {
		t.Errorf("a context without a clash changed slug: %s", ts[2].Slug)
	}
	for _, tg := range ts {
		if !slugRE.MatchString(tg.Slug) {
			t.Errorf("slug %q", tg.Slug)
		}
	}
}
