package kubeflags

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
)

const twoContexts = `apiVersion: v1
kind: Config
current-context: a
clusters:
- {name: a, cluster: {server: "https://a.example:6443"}}
- {name: b, cluster: {server: "https://b.example:6443"}}
users:
- {name: u, user: {}}
contexts:
- {name: a, context: {cluster: a, user: u}}
- {name: b, context: {cluster: b, user: u}}
`

func host(t *testing.T, cc clientcmd.ClientConfig) string {
	t.Helper()
	cfg, err := cc.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Host
}

// TestKubeconfigAndContext: the narrow form reads --kubeconfig and one
// context flag under every spelling it is given; ClientConfigFor picks
// another context of the same file; the raw config is the file's own.
func TestKubeconfigAndContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--kubeconfig", path, "--kubeconfig-context", "b"}, {"--kubeconfig", path, "--context", "b"}} {
		f := New(&clientcmd.ClientConfigLoadingRules{})
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		f.AddKubeconfig(fs, "the kubeconfig")
		f.AddContext(fs, "the context", "kubeconfig-context", "context")
		if fs.Lookup("server") != nil || fs.Lookup("token") != nil {
			t.Fatal("the narrow form registered kubectl's other cluster flags")
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if f.Path() != path || f.Context() != "b" {
			t.Fatalf("%v: path %q context %q", args, f.Path(), f.Context())
		}
		if got := host(t, f.ClientConfig()); got != "https://b.example:6443" {
			t.Errorf("%v: the flags' context reaches %s", args, got)
		}
		if got := host(t, f.ClientConfigFor("a")); got != "https://a.example:6443" {
			t.Errorf("%v: context a reaches %s", args, got)
		}
		if got := host(t, f.ClientConfigFor("")); got != "https://a.example:6443" {
			t.Errorf(`%v: context "" (the current one) reaches %s`, args, got)
		}
		raw, err := f.RawConfig()
		if err != nil || raw.CurrentContext != "a" || len(raw.Contexts) != 2 {
			t.Errorf("%v: raw config %v, %v", args, raw.CurrentContext, err)
		}
	}
}

// TestWholeSetKeepsOverrides: with kubectl's whole set, another context
// keeps the other overrides (--server here).
func TestWholeSetKeepsOverrides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	f := New(&clientcmd.ClientConfigLoadingRules{})
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.AddTo(fs)
	if err := fs.Parse([]string{"--kubeconfig", path, "--server", "https://override.example:6443"}); err != nil {
		t.Fatal(err)
	}
	if got := host(t, f.ClientConfigFor("b")); got != "https://override.example:6443" {
		t.Errorf("context b with --server reaches %s", got)
	}
}
