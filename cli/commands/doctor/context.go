package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cli/login/kubeexec"
)

func checkContext(_ context.Context, s *contextFacts) Result {
	raw, err := s.load("").RawConfig()
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the kubeconfig cannot be read (%v): fix the file, or point --kubeconfig at another", err))
	}
	for _, u := range raw.AuthInfos {
		// Whatever the context, no user's secrets are ever printed.
		s.secret(kubeexec.Secrets(u)...)
	}
	if len(raw.Contexts) == 0 {
		return fail("", "no kubeconfig with a context was found: pass --kubeconfig, set $KUBECONFIG, or create ~/.kube/config")
	}
	if s.contextName == "" {
		s.contextName = raw.CurrentContext
	}
	if s.contextName == "" {
		return fail("", "the kubeconfig has no current context: pass --kubeconfig-context NAME, or run `kubectl config use-context NAME`")
	}
	kctx := raw.Contexts[s.contextName]
	if kctx == nil {
		names := make([]string, 0, len(raw.Contexts))
		for n := range raw.Contexts {
			names = append(names, n)
		}
		slices.Sort(names)
		return fail("", fmt.Sprintf("the kubeconfig has no context %q: pass --kubeconfig-context with one of %s", s.contextName, strings.Join(names, ", ")))
	}
	if raw.Clusters[kctx.Cluster] == nil {
		return fail("", fmt.Sprintf("context %q names the cluster %q, which the kubeconfig does not define: add it, or %s", s.contextName, kctx.Cluster, regenerate))
	}
	user := raw.AuthInfos[kctx.AuthInfo]
	if user == nil {
		return fail("", fmt.Sprintf("context %q names the user %q, which the kubeconfig does not define: add it, or %s", s.contextName, kctx.AuthInfo, regenerate))
	}
	s.user = user
	s.namespace = kctx.Namespace
	if s.namespace == "" {
		s.namespace = "default"
	}
	// The cluster alone, without the user: an exec plugin or an auth
	// provider would log in.
	bare := raw.DeepCopy()
	bare.AuthInfos[kctx.AuthInfo] = clientcmdapi.NewAuthInfo()
	anon, err := clientcmd.NewNonInteractiveClientConfig(*bare, s.contextName, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the cluster %q of context %q cannot be used (%v): fix its server and certificate-authority in the kubeconfig", kctx.Cluster, s.contextName, err))
	}
	s.anon = rest.AnonymousClientConfig(anon)
	s.anon.UserAgent = "pinniped-doctor"
	// Building the full config only reads it; nothing runs until a request.
	cfg, err := s.load(s.contextName).ClientConfig()
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("kubectl cannot use context %q (%v): fix its user %q in the kubeconfig, or %s", s.contextName, err, kctx.AuthInfo, regenerate))
	}
	if user.Exec != nil {
		// What kubectl hands the plugin, and so what the cache key holds.
		s.execCluster, err = kubeexec.ExecCluster(user.Exec, func() (*rest.Config, error) { return cfg, nil })
		if err != nil {
			return fail(err.Error(), fmt.Sprintf("kubectl cannot run the exec plugin of context %q (%v): fix the cluster's certificate-authority in the kubeconfig, or %s", s.contextName, err, regenerate))
		}
	}
	if user.Exec == nil && user.AuthProvider == nil && (cfg.BearerToken != "" || cfg.BearerTokenFile != "" || len(cfg.CertData) > 0 || cfg.CertFile != "") {
		s.full = rest.CopyConfig(cfg)
		s.full.UserAgent = "pinniped-doctor"
		s.secret(cfg.BearerToken, string(cfg.KeyData))
	}
	return ok("cluster %q at %s, user %q", kctx.Cluster, s.anon.Host, kctx.AuthInfo)
}
