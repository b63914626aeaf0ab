package kubeconfig_test

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cli/login/config"
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

var pinniped = kubeconfig.Exec{Path: "/usr/local/bin/pinniped", InstallHint: "install pinniped"}

func concierge() *config.Concierge {
	return &config.Concierge{Endpoint: "https://10.99.0.1:6443", CABundle: []byte("CA"), APIGroupSuffix: "pinniped.dev",
		AuthenticatorType: "jwt", AuthenticatorName: "dex"}
}

func oidcLogin() *config.OIDC {
	return &config.OIDC{Issuer: "https://dex.example.com", ClientID: "pinniped-cli", Scopes: []string{"openid", "offline_access", "groups"},
		RequestAudience: "cluster-1", CABundle: []byte("DEXCA"), Concierge: concierge()}
}

func TestGoldenKubeconfigs(t *testing.T) {
	for name, p := range map[string]kubeconfig.Login{
		"oidc.yaml": oidcLogin(),
		"static.yaml": func() kubeconfig.Login {
			c := concierge()
			c.AuthenticatorType, c.AuthenticatorName = "webhook", "corp"
			return &config.Static{TokenEnv: "MY_TOKEN", Concierge: c}
		}(),
		"no-concierge.yaml": func() kubeconfig.Login { c := oidcLogin(); c.Concierge = nil; c.RequestAudience = ""; return c }(),
	} {
		cfg := kubeconfig.Build("kind-pinniped", "https://10.99.0.1:6443", []byte("CA"), pinniped, p)
		b, err := clientcmd.Write(*cfg)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, name, b)
		// The shape upstream's CLI (which answers only v1beta1) can run.
		if v := cfg.AuthInfos["kind-pinniped"].Exec.APIVersion; v != "client.authentication.k8s.io/v1beta1" {
			t.Errorf("%s: the exec entry asks for %s; upstream's CLI answers only v1beta1", name, v)
		}
		if strings.Contains(string(b), "token=") && !strings.Contains(string(b), "token-env=") {
			t.Errorf("%s holds a literal token", name)
		}
	}
}

func TestMergeKeepsExistingContexts(t *testing.T) {
	existing := clientcmdapi.NewConfig()
	existing.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://prod"}
	existing.Contexts["prod"] = &clientcmdapi.Context{Cluster: "prod"}
	gen := kubeconfig.Build("kind-pinniped", "https://x", nil, pinniped, oidcLogin())
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
