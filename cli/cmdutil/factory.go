// Package cmdutil is what every `pinniped` command shares: one Factory
// holding the process's streams, environment, clock, browser opener,
// kubeconfig loading, cluster clients and credential caches. Commands take it and a run function, as gh's do
// (NewCmdX(f, runF)): the command turns flags into Options, whose
// Complete, Validate and Run (kubectl's phases) RunE calls in order; a
// test's runF replaces Run to check parsing, and a Factory of fakes
// checks Run.
package cmdutil

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cli/credstore"
	"github.com/pinniped-kit/pinniped/cli/httpclient"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/ui/browser"
)

// Factory is the outside world as commands see it.
type Factory struct {
	IO genericiooptions.IOStreams
	// Getenv and LookupEnv read the environment.
	Getenv    func(string) string
	LookupEnv func(string) (string, bool)
	Now       func() time.Time
	// Browser opens a URL for the person ($BROWSER, else the platform's opener).
	Browser func(url string) error
	// KubeConfig loads the kubeconfig at path ("": $KUBECONFIG, else
	// ~/.kube/config) with context ("": its current one).
	KubeConfig func(path, context string) clientcmd.ClientConfig
	// KubeFlags are kubectl's cluster flags (--kubeconfig, --context, ...),
	// loading kubeconfigs as KubeConfig does.
	KubeFlags func() *kubeflags.Flags
	// Dynamic builds a cluster client from a command's kubeconfig (its
	// flags, or one it loaded); DynamicFor from a rest.Config the command
	// built itself.
	Dynamic    func(cc clientcmd.ClientConfig) (dynamic.Interface, *rest.Config, error)
	DynamicFor func(cfg *rest.Config) (dynamic.Interface, error)
	// HTTPClient is an HTTPS client trusting caBundle (PEM; empty: the
	// system's roots), TLS 1.2+, giving up after timeout (0: never).
	HTTPClient func(caBundle []byte, timeout time.Duration) (*http.Client, error)
	// Caches are where logins cache credentials and sessions, and where
	// the configuration directory is.
	Caches Caches
	// Version is this build.
	Version buildinfo.Info

	// cachesFor are the Caches of an environment (WithEnv).
	cachesFor func(getenv func(string) string) Caches
}

// Caches are the places of one environment (credstore.Places in the real
// world): the stores a --credential-cache mode names, their locks, and
// the configuration directory.
type Caches interface {
	// Open is the store a login with this mode reads and writes.
	Open(mode string, warn io.Writer) (cache.Store, error)
	// Everywhere is every store such a login may have written to.
	Everywhere(mode string) ([]cache.Store, error)
	// LockDir is where such logins take their locks ("" for none).
	LockDir(mode string) (string, error)
	// Probe says which store a login with this mode would use here,
	// writing nothing.
	Probe(ctx context.Context, mode string) (credstore.Backend, error)
	// ConfigDir is pinniped's configuration directory (the file cache,
	// the proxy's state).
	ConfigDir() (string, error)
}

// WithEnv is the world as a process with another environment would see
// it (an exec entry's own variables over this process's): its Getenv and
// LookupEnv, and, when it names another configuration directory
// (XDG_CONFIG_HOME), the caches there. Otherwise the caches are f's own
// (a test's fake ones too).
func (f *Factory) WithEnv(lookupEnv func(string) (string, bool)) *Factory {
	g := *f
	g.LookupEnv = lookupEnv
	g.Getenv = func(k string) string { v, _ := lookupEnv(k); return v }
	if f.cachesFor != nil && g.Getenv("XDG_CONFIG_HOME") != f.Getenv("XDG_CONFIG_HOME") {
		g.Caches = f.cachesFor(g.Getenv)
	}
	return &g
}

// New is the real world: the process's streams and environment.
func New(streams genericiooptions.IOStreams, info buildinfo.Info) *Factory {
	return &Factory{
		IO:        streams,
		Getenv:    os.Getenv,
		LookupEnv: os.LookupEnv,
		Now:       time.Now,
		Browser:   func(url string) error { return browser.Open(os.Getenv, url) },
		KubeConfig: func(path, context string) clientcmd.ClientConfig {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = path
			return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
		},
		KubeFlags:  func() *kubeflags.Flags { return kubeflags.New(clientcmd.NewDefaultClientConfigLoadingRules()) },
		Dynamic:    kubeflags.Dynamic,
		DynamicFor: func(cfg *rest.Config) (dynamic.Interface, error) { return dynamic.NewForConfig(cfg) },
		HTTPClient: httpclient.New,
		Caches:     credstore.ForProcess(),
		Version:    info,
		cachesFor:  func(getenv func(string) string) Caches { return credstore.Places{Getenv: getenv} },
	}
}

// Test is a Factory for tests: streams of their own, an empty environment
// unless env says otherwise (KUBECONFIG and XDG_CONFIG_HOME included: set
// them to files of the test's own), a fixed clock, and no browser or
// cluster unless the test puts one there.
func Test(in io.Reader, out, errOut io.Writer, env map[string]string) *Factory {
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	return &Factory{
		IO:        genericiooptions.IOStreams{In: in, Out: out, ErrOut: errOut},
		Getenv:    func(k string) string { return env[k] },
		LookupEnv: lookup,
		Now:       func() time.Time { return time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC) },
		Browser:   func(string) error { return os.ErrNotExist },
		KubeConfig: func(path, context string) clientcmd.ClientConfig {
			rules := testRules(env)
			rules.ExplicitPath = path
			return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
		},
		KubeFlags: func() *kubeflags.Flags { return kubeflags.New(testRules(env)) },
		Dynamic: func(clientcmd.ClientConfig) (dynamic.Interface, *rest.Config, error) {
			return nil, nil, os.ErrNotExist
		},
		DynamicFor: func(*rest.Config) (dynamic.Interface, error) { return nil, os.ErrNotExist },
		HTTPClient: httpclient.New,
		Caches:     testCaches(func(k string) string { return env[k] }),
		Version:    buildinfo.Info{Version: "v0.0.0-test", Commit: "test"},
		cachesFor:  testCaches,
	}
}

// testRules load the test's $KUBECONFIG, and never the person's
// ~/.kube/config.
func testRules(env map[string]string) *clientcmd.ClientConfigLoadingRules {
	rules := &clientcmd.ClientConfigLoadingRules{}
	if env["KUBECONFIG"] != "" {
		rules.Precedence = filepath.SplitList(env["KUBECONFIG"])
	}
	return rules
}

// Options are a command's inputs, in kubectl's three phases.
type Options interface {
	// Complete fills in what the flags leave open: defaults, files, the
	// environment, the world the command reaches. It fails only when it
	// cannot read what it must (a kubeconfig, a file named by a flag).
	Complete() error
	// Validate refuses inputs that cannot work, before any effect (it
	// may read what Complete filled in).
	Validate() error
	// Run does the work.
	Run(ctx context.Context) error
}

// NothingToComplete is the Complete of options whose flags are all there
// is: embedding it says so.
type NothingToComplete struct{}

// Complete does nothing.
func (NothingToComplete) Complete() error { return nil }

// NothingToValidate is the Validate of options that take no input a
// person could get wrong: embedding it says so.
type NothingToValidate struct{}

// Validate refuses nothing.
func (NothingToValidate) Validate() error { return nil }

// RunE is a command's RunE: o's Complete, Validate and Run, in that
// order. A test's runF, when given, runs instead of Run, to check what
// the flags made of the options.
func RunE[O Options](o O, runF func(context.Context, O) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if err := o.Complete(); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		if runF != nil {
			return runF(cmd.Context(), o)
		}
		return o.Run(cmd.Context())
	}
}

// testCaches are the caches under the test's XDG_CONFIG_HOME, and never
// the person's own: the keyring mode keeps files there too (a test must
// not reach the OS keyring), and without an XDG_CONFIG_HOME only "none"
// works.
func testCaches(getenv func(string) string) Caches {
	if getenv("XDG_CONFIG_HOME") == "" {
		return noCaches{}
	}
	return filesOnly{credstore.Places{Getenv: getenv}}
}

type filesOnly struct{ places credstore.Places }

func fileMode(mode string) string {
	if mode == "keyring" {
		return "file"
	}
	return mode
}

func (f filesOnly) Open(mode string, warn io.Writer) (cache.Store, error) {
	return f.places.Open(fileMode(mode), warn)
}

func (f filesOnly) Everywhere(mode string) ([]cache.Store, error) {
	return f.places.Everywhere(fileMode(mode))
}

func (f filesOnly) LockDir(mode string) (string, error) { return f.places.LockDir(fileMode(mode)) }

func (f filesOnly) Probe(ctx context.Context, mode string) (credstore.Backend, error) {
	return f.places.Probe(ctx, fileMode(mode))
}

func (f filesOnly) ConfigDir() (string, error) { return f.places.ConfigDir() }

type noCaches struct{}

var errNoCaches = errors.New("cmdutil.Test: give the test an XDG_CONFIG_HOME of its own to use caches")

func (noCaches) Open(mode string, _ io.Writer) (cache.Store, error) {
	if mode == "none" {
		return nil, nil
	}
	return nil, errNoCaches
}

func (noCaches) Everywhere(mode string) ([]cache.Store, error) {
	if mode == "none" {
		return nil, nil
	}
	return nil, errNoCaches
}

func (noCaches) LockDir(mode string) (string, error) {
	if mode == "none" {
		return "", nil
	}
	return "", errNoCaches
}

func (noCaches) Probe(_ context.Context, mode string) (credstore.Backend, error) {
	if mode == "none" {
		return credstore.Backend{}, nil
	}
	return credstore.Backend{}, errNoCaches
}

func (noCaches) ConfigDir() (string, error) { return "", errNoCaches }
