package kubeconfig_test

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/kubeconfig"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	if *update {
		_ = os.WriteFile("testdata/"+name, got, 0o600)
	}
	want, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatalf("%v (go test ./kubeconfig -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("testdata/%s differs; if intended, run go test ./kubeconfig -update\n%s", name, got)
	}
}

func params() *kubeconfig.LoginParams {
	return &kubeconfig.LoginParams{
		PinnipedPath: "/usr/local/bin/pinniped", InstallHint: "install pinniped",
		Frontend:      kubeconfig.Frontend{Mode: "TokenCredentialRequestAPI", Endpoint: "https://10.99.0.1:6443", CABundle: []byte("CA")},
		APIGroupSuff:  "pinniped.dev",
		Authenticator: kubeconfig.Authenticator{Type: "jwt", Name: "dex", Issuer: "https://dex.example.com", Audience: "cluster-1"},
		ClientID:      "pinniped-cli", Scopes: []string{"openid", "offline_access", "groups"},
		RequestAudience: "cluster-1", OIDCCABundle: []byte("DEXCA"),
	}
}

func TestGoldenKubeconfigs(t *testing.T) {
	for name, p := range map[string]*kubeconfig.LoginParams{
		"oidc.yaml": params(),
		"static.yaml": func() *kubeconfig.LoginParams {
			p := params()
			p.Authenticator = kubeconfig.Authenticator{Type: "webhook", Name: "corp"}
			p.StaticTokenEnv = "MY_TOKEN"
			return p
		}(),
		"no-concierge.yaml": func() *kubeconfig.LoginParams { p := params(); p.NoConcierge = true; p.RequestAudience = ""; return p }(),
	} {
		cfg := kubeconfig.Build("kind-pinniped", "https://10.99.0.1:6443", []byte("CA"), p)
		b, err := clientcmd.Write(*cfg)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, name, b)
		if strings.Contains(string(b), "token=") && !strings.Contains(string(b), "token-env=") {
			t.Errorf("%s holds a literal token", name)
		}
	}
}

func TestMergeKeepsExistingContexts(t *testing.T) {
	existing := clientcmdapi.NewConfig()
	existing.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://prod"}
	existing.Contexts["prod"] = &clientcmdapi.Context{Cluster: "prod"}
	gen := kubeconfig.Build("kind-pinniped", "https://x", nil, params())
	if err := kubeconfig.Merge(existing, gen); err != nil {
		t.Fatal(err)
	}
	if existing.Clusters["prod"].Server != "https://prod" || existing.Contexts["kind-pinniped"] == nil {
		t.Fatal("merge lost or missed entries")
	}
	if err := kubeconfig.Merge(existing, gen); err == nil || !strings.Contains(err.Error(), "already has") {
		t.Fatalf("second merge must refuse to overwrite: %v", err)
	}
}

func TestFilterScopes(t *testing.T) {
	got := kubeconfig.FilterScopes([]string{"openid", "offline_access", "pinniped:request-audience", "groups"}, []string{"offline_access", "groups", "email"})
	if strings.Join(got, ",") != "openid,offline_access,groups" {
		t.Fatal(got)
	}
}
