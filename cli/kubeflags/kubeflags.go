// Package kubeflags is how every command takes its kubeconfig: either
// kubectl's whole set of cluster flags (--kubeconfig, --context,
// -n/--namespace, --server, --token, ...: commands that act on a cluster
// as kubectl would), or only --kubeconfig and a context flag (commands
// that read a kubeconfig's contexts: doctor, logout, login ahead, proxy,
// get kubeconfig). Both load kubeconfigs by the Factory's rules, on
// client-go's clientcmd.
package kubeflags

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Flags holds the parsed cluster flags.
type Flags struct {
	rules     *clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
	nsFlag    *pflag.Flag
}

// New returns flags that load kubeconfigs by rules (the Factory's: kubectl's
// $KUBECONFIG and ~/.kube/config in the real world, the test's own files in
// tests); --kubeconfig sets its explicit path.
func New(rules *clientcmd.ClientConfigLoadingRules) *Flags {
	return &Flags{rules: rules}
}

// AddTo registers the flags.
func (f *Flags) AddTo(fs *pflag.FlagSet) {
	fs.StringVar(&f.rules.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	clientcmd.BindOverrideFlags(&f.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	f.nsFlag = fs.Lookup("namespace")
}

// AddContextAlias registers name as another spelling of --context
// (upstream Pinniped's commands call it --kubeconfig-context).
func (f *Flags) AddContextAlias(fs *pflag.FlagSet, name string) {
	fs.StringVar(&f.overrides.CurrentContext, name, "", "the same as --context")
}

// AddKubeconfig registers --kubeconfig alone, usage saying what the
// command reads it for.
func (f *Flags) AddKubeconfig(fs *pflag.FlagSet, usage string) {
	fs.StringVar(&f.rules.ExplicitPath, "kubeconfig", "", usage+" (default $KUBECONFIG or ~/.kube/config)")
}

// AddContext registers the one context the command works on (default: the
// kubeconfig's current one) under name, and each alias as another
// spelling of it.
func (f *Flags) AddContext(fs *pflag.FlagSet, usage, name string, aliases ...string) {
	fs.StringVar(&f.overrides.CurrentContext, name, "", usage+" (default: the current one)")
	for _, a := range aliases {
		fs.StringVar(&f.overrides.CurrentContext, a, "", "the same as --"+name)
	}
}

// Path is --kubeconfig ("": $KUBECONFIG, else ~/.kube/config).
func (f *Flags) Path() string { return f.rules.ExplicitPath }

// Context is the context flag's value ("": the current context).
func (f *Flags) Context() string { return f.overrides.CurrentContext }

// RawConfig is the merged kubeconfig, without overrides.
func (f *Flags) RawConfig() (clientcmdapi.Config, error) {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(f.rules, &clientcmd.ConfigOverrides{}).RawConfig()
}

// ClientConfigFor is the kubeconfig with context name ("": its current
// one) in place of the flags' context, the other overrides kept.
func (f *Flags) ClientConfigFor(name string) clientcmd.ClientConfig {
	o := f.overrides
	o.CurrentContext = name
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(f.rules, &o)
}

// ClientConfig is the merged kubeconfig plus overrides.
func (f *Flags) ClientConfig() clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(f.rules, &f.overrides)
}

// Dynamic builds a dynamic client for cc, with an error that says what to do.
func Dynamic(cc clientcmd.ClientConfig) (dynamic.Interface, *rest.Config, error) {
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, nil, fmt.Errorf("no cluster to talk to: set --kubeconfig or $KUBECONFIG, or create ~/.kube/config")
		}
		return nil, nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.UserAgent = "pinniped"
	d, err := dynamic.NewForConfig(cfg)
	return d, cfg, err
}

// NamespaceOr returns -n if given, else def. Commands whose objects have a
// home of their own (install) use this instead of the context's namespace.
func (f *Flags) NamespaceOr(def string) string {
	if f.nsFlag != nil && f.nsFlag.Changed && f.overrides.Context.Namespace != "" {
		return f.overrides.Context.Namespace
	}
	return def
}

// Cluster is the name of the kubeconfig cluster the flags select: the
// --cluster override, else the cluster of the --context (or current) context.
func (f *Flags) Cluster() string {
	if f.overrides.Context.Cluster != "" {
		return f.overrides.Context.Cluster
	}
	raw, err := f.ClientConfig().RawConfig()
	if err != nil {
		return ""
	}
	name := f.overrides.CurrentContext
	if name == "" {
		name = raw.CurrentContext
	}
	if c := raw.Contexts[name]; c != nil {
		return c.Cluster
	}
	return ""
}
