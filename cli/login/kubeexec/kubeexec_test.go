package kubeexec

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cli/login/config"
)

func TestParse(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{nil, {"login"}, {"login", "ldap"}, {"get", "kubeconfig"}} {
		if _, err := Parse(&clientcmdapi.ExecConfig{Args: args}, none); !errors.Is(err, ErrNotALogin) {
			t.Errorf("%q: %v", args, err)
		}
	}
	// The exec entry's environment comes before the process's.
	e := &clientcmdapi.ExecConfig{Args: []string{"login", "static", "--token-env=T", "--credential-cache=file"},
		Env: []clientcmdapi.ExecEnvVar{{Name: "T", Value: "from-the-entry"}}}
	l, err := Parse(e, func(string) (string, bool) { return "from-the-process", true })
	if err != nil || l.Kind() != "static" || l.Static.Token != "from-the-entry" || l.CacheMode() != "file" {
		t.Fatalf("%+v %v", l, err)
	}
	if _, err := Parse(&clientcmdapi.ExecConfig{Args: []string{"login", "oidc", "--issuer=https://x", "secret-value-0"}}, none); err == nil || strings.Contains(err.Error(), "secret-value-0") {
		t.Errorf("a positional argument: %v", err)
	}
	l, err = Parse(&clientcmdapi.ExecConfig{Args: []string{"login", "oidc", "--issuer=https://x.example.com"}}, none)
	if err != nil || l.Kind() != "oidc" || l.Validate() != nil {
		t.Fatalf("%+v %v", l, err)
	}
	if l.CredentialKey(config.Cluster{Server: "https://a"}) == l.CredentialKey(config.Cluster{Server: "https://b"}) {
		t.Error("the key does not name the cluster")
	}
}

// TestExecCluster: {} unless asked; a CA file that cannot be read is an
// error, never a guess (which would key other cache entries).
func TestExecCluster(t *testing.T) {
	cfg := &rest.Config{Host: "https://10.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("CA")}}
	get := func() (*rest.Config, error) { return cfg, nil }
	if c, err := ExecCluster(&clientcmdapi.ExecConfig{}, get); err != nil || c.Server != "" {
		t.Errorf("not asked: %+v %v", c, err)
	}
	asked := &clientcmdapi.ExecConfig{ProvideClusterInfo: true}
	if c, err := ExecCluster(asked, get); err != nil || c.Server != cfg.Host || string(c.CA) != "CA" {
		t.Errorf("asked: %+v %v", c, err)
	}
	cfg.TLSClientConfig = rest.TLSClientConfig{CAFile: filepath.Join(t.TempDir(), "missing.pem")}
	if _, err := ExecCluster(asked, get); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("an unreadable CA file: %v", err)
	}
}

func TestReadContext(t *testing.T) {
	raw := clientcmdapi.NewConfig()
	raw.AuthInfos["pinniped"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "pinniped",
		Args: []string{"login", "oidc", "--issuer=https://x.example.com", "--client-id=c"}, ProvideClusterInfo: true}}
	raw.AuthInfos["other"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "kubelogin", Args: []string{"get-token"}}}
	raw.AuthInfos["token"] = &clientcmdapi.AuthInfo{Token: "t"}
	raw.AuthInfos["not-a-login"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "pinniped", Args: []string{"whoami"}}}
	for _, u := range []string{"pinniped", "other", "token", "not-a-login"} {
		raw.Contexts[u] = &clientcmdapi.Context{Cluster: "c", AuthInfo: u}
	}
	raw.CurrentContext = "pinniped"
	isFront := func(cmd string) bool { return cmd == "pinniped" }
	none := func(string) (string, bool) { return "", false }
	cfg := func(string) (*rest.Config, error) {
		return &rest.Config{Host: "https://c.example.com", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}, nil
	}
	kc, err := ReadContext(*raw, "", isFront, none, cfg)
	if err != nil || kc.Name != "pinniped" || kc.Login.OIDC == nil || kc.Login.OIDC.Issuer != "https://x.example.com" || kc.Cluster.Server != "https://c.example.com" {
		t.Fatalf("the current context: %+v, %v", kc, err)
	}
	for _, name := range []string{"other", "token", "not-a-login"} {
		if _, err := ReadContext(*raw, name, isFront, none, cfg); !errors.Is(err, ErrNotPinniped) || !strings.Contains(err.Error(), name) {
			t.Errorf("context %s: %v, want ErrNotPinniped naming it", name, err)
		}
	}
	if _, err := ReadContext(*raw, "missing", isFront, none, cfg); err == nil || errors.Is(err, ErrNotPinniped) {
		t.Errorf("a missing context: %v", err)
	}
}

// TestSecrets: every kind of secret a user entry holds is listed.
func TestSecrets(t *testing.T) {
	u := &clientcmdapi.AuthInfo{Token: "tok-1", ClientKeyData: []byte("key-1"), Password: "pw-1",
		AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"id-token": "idtok-1", "refresh-token": "rt-1", "client-secret": "cs-1", "idp-issuer-url": "https://x"}},
		Exec: &clientcmdapi.ExecConfig{Args: []string{"login", "static", "--token", "argtok-1", "--", "after-1"},
			Env: []clientcmdapi.ExecEnvVar{{Name: "MY_API_KEY", Value: "env-1"}, {Name: "REGION", Value: "eu"}}}}
	got := strings.Join(Secrets(u), " ")
	for _, s := range []string{"tok-1", "key-1", "pw-1", "idtok-1", "rt-1", "cs-1", "argtok-1", "after-1", "env-1"} {
		if !strings.Contains(got, s) {
			t.Errorf("%s is not listed: %s", s, got)
		}
	}
	for _, s := range []string{"https://x", "eu", "login", "static"} {
		if strings.Contains(" "+got+" ", " "+s+" ") {
			t.Errorf("%s is listed: %s", s, got)
		}
	}
	// Another plugin: only its secret-named flags' values (its positionals
	// are words like a cluster's name, which would blank out the report).
	aws := &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "aws", Args: []string{"eks", "get-token", "--cluster-name", "prod", "--role-token=rt-2", "--api-key", "ak-2"}}}
	if got := Secrets(aws); strings.Join(got, " ") != "   rt-2 ak-2" {
		t.Errorf("another plugin: %q", got)
	}
}
