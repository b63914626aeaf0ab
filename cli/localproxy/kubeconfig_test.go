package localproxy_test

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/localproxy"
	"github.com/pinniped-kit/pinniped/cli/localproxy/localproxytest"
	"github.com/pinniped-kit/pinniped/cli/localproxy/targets"
)

// TestKubeconfigIsRecognisedAsProxied: a proxy started on its own
// kubeconfig must not serve itself; targets knows the exec entry the
// proxy writes, and says why.
func TestKubeconfigIsRecognisedAsProxied(t *testing.T) {
	dir := t.TempDir()
	raw, err := clientcmd.LoadFromFile(localproxytest.WriteKubeconfig(t, dir, localproxytest.NewAPIServer(t)))
	if err != nil {
		t.Fatal(err)
	}
	ts, _, err := targets.Build(*raw, targets.Options{IsFront: handoff.IsFront})
	if err != nil || len(ts) != 1 {
		t.Fatalf("targets: %v, %v", ts, err)
	}
	b, err := localproxy.Kubeconfig(*raw, ts, "https://127.0.0.1:47443", []byte("ca"), filepath.Join(dir, "state"), "/usr/local/bin/pinniped")
	if err != nil {
		t.Fatal(err)
	}
	out, err := clientcmd.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	if c := out.Contexts["dev"]; c == nil || c.Namespace != "team" || out.CurrentContext != "dev" ||
		out.Clusters[c.Cluster].Server != "https://127.0.0.1:47443/ctx/"+ts[0].Slug {
		t.Fatalf("the proxy's kubeconfig: %+v", out)
	}
	again, skipped, err := targets.Build(*out, targets.Options{IsFront: handoff.IsFront})
	if err != nil || len(again) != 0 || len(skipped) != 1 || skipped[0].Kind != targets.AlreadyProxied {
		t.Fatalf("the proxy's kubeconfig read as targets: %v, %+v, %v; want dev already proxied", again, skipped, err)
	}
}
