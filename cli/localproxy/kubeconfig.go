package localproxy

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cache/privatedir"
	"github.com/pinniped-kit/pinniped/cli/localproxy/server"
	"github.com/pinniped-kit/pinniped/cli/localproxy/targets"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
)

// UserName is the one user of the proxy's kubeconfig.
const UserName = "pinniped-proxy"

// Kubeconfig is the kubeconfig that uses the proxy: the served contexts
// under their own names (and namespaces), each with a cluster at
// base/ctx/<slug> trusted through the proxy's CA, and one user whose exec
// entry prints the local secret (`pinniped proxy credential`), the form
// targets recognises as already proxied. It holds no secret: a client
// asks for the secret each time it starts, and again after a 401 (a
// restarted proxy has a new one).
func Kubeconfig(raw clientcmdapi.Config, ts []*targets.Target, base string, caPEM []byte, stateDir, pinniped string) ([]byte, error) {
	out := clientcmdapi.NewConfig()
	out.AuthInfos[UserName] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:      execcred.V1,
		Command:         pinniped,
		Args:            []string{"proxy", "credential", "--state-dir", stateDir},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		InstallHint:     "pinniped proxy's kubeconfig runs pinniped (https://github.com/pinniped-kit/pinniped): install it, then start `pinniped proxy`",
	}}
	for _, t := range ts {
		out.Clusters[t.Context] = &clientcmdapi.Cluster{
			Server:                   base + server.PathPrefix + t.Slug,
			CertificateAuthorityData: caPEM,
		}
		kctx := &clientcmdapi.Context{Cluster: t.Context, AuthInfo: UserName}
		if c := raw.Contexts[t.Context]; c != nil {
			kctx.Namespace = c.Namespace
		}
		out.Contexts[t.Context] = kctx
	}
	out.CurrentContext = ts[0].Context
	if out.Contexts[raw.CurrentContext] != nil {
		out.CurrentContext = raw.CurrentContext
	}
	b, err := clientcmd.Write(*out)
	if err != nil {
		return nil, fmt.Errorf("make the proxy's kubeconfig: %w", err)
	}
	return b, nil
}

// writePrivate writes the kubeconfig 0600 in a directory private to this
// user (privatedir's rule, as the state directory), atomically.
func writePrivate(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	// The kubeconfig names the command kubectl runs: a directory another
	// user could swap would let them choose it.
	if err := privatedir.CheckParent(dir); err != nil {
		return fmt.Errorf("write the proxy's kubeconfig %s (choose a private directory with --kubeconfig-out): %w", path, err)
	}
	if err := privatedir.WriteFile(dir, filepath.Base(path), data); err != nil {
		return fmt.Errorf("write the proxy's kubeconfig %s (choose a private directory with --kubeconfig-out): %w", path, err)
	}
	return nil
}
