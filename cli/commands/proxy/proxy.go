// Package proxy implements `pinniped proxy`, the local credential proxy
// (docs/local-proxy.md), and `pinniped proxy credential`, the exec plugin
// of the kubeconfig it writes. It maps flags to cli/localproxy's Options
// (checking the address and reading the kubeconfig's contexts) and calls
// its Run.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/kubeflags"
	"github.com/pinniped-kit/pinniped/cli/localproxy"
	"github.com/pinniped-kit/pinniped/cli/localproxy/localca"
	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
	"github.com/pinniped-kit/pinniped/cli/localproxy/targets"
)

// DefaultListen is the proxy's default address: a fixed port, so the
// kubeconfig it writes stays valid from one start to the next.
const DefaultListen = "127.0.0.1:47443"

// KubeconfigName is the kubeconfig's file name in the state directory.
const KubeconfigName = "kubeconfig"

// Options are the inputs of `pinniped proxy`.
type Options struct {
	// Kube is --kubeconfig; the contexts are Contexts (--context,
	// repeatable).
	Kube          *kubeflags.Flags
	Contexts      []string
	Listen        string
	KubeconfigOut string
	StateDir      string
	// ProfilingListen is --profiling-listen: where profiles are served
	// ("": nowhere).
	ProfilingListen string

	// What Validate made of them.
	raw     clientcmdapi.Config
	targets []*targets.Target
	skipped []targets.Skipped
	host    string // the loopback IP to listen on
	port    int

	f *cmdutil.Factory
}

// NewCmdProxy returns `pinniped proxy` with its `credential` subcommand;
// runF (nil: Options.Run) does the work.
func NewCmdProxy(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{f: f, Kube: f.KubeFlags()}
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Serve your pinniped contexts through a local proxy that renews credentials without cutting streams",
		Long: `proxy runs a credential proxy on this machine's loopback interface for every
context of your kubeconfig whose user runs "pinniped login" (or only the
--context ones), and writes a kubeconfig with the same context names that
points at it. Clients using that kubeconfig (kubectl, k9s, Lens, Headlamp,
controllers) hold only the proxy's local secret, which never changes while
it runs, so a credential renewal never closes their watches, log tails,
exec sessions or port-forwards. The proxy logs in itself, with the same
caches as "pinniped login", renews each credential well before it expires,
and opens new connections with the new one while old streams run to their
end.

It listens on loopback only, with a certificate from a CA of its own that
the kubeconfig pins; every request must carry the local secret (only you
can read it), and on Linux must come from your own user. Identity headers a
client sends are never forwarded. When a login needs you, it asks in this
terminal; requests get a clear error meanwhile, never a hang.

Everything it prints goes to stderr (stdout stays empty): what it serves,
the kubeconfig to use, and one line per renewal, never a secret or an
identity. Stop it with Ctrl-C; "pinniped status" shows whether it runs.
See docs/local-proxy.md.`,
		Example: `  pinniped proxy
  export KUBECONFIG=~/.config/pinniped/proxy/kubeconfig   # in another terminal

  pinniped proxy --context=prod --context=staging --listen=127.0.0.1:8443`,
		Args: cobra.NoArgs,
		RunE: cmdutil.RunE(o, runF),
	}
	fl := cmd.Flags()
	o.Kube.AddKubeconfig(fl, "kubeconfig whose contexts to serve")
	fl.StringArrayVar(&o.Contexts, "context", nil, "context to serve (repeatable; default: every context whose user runs pinniped login)")
	fl.StringVar(&o.Listen, "listen", DefaultListen, "loopback address and port to listen on")
	fl.StringVar(&o.KubeconfigOut, "kubeconfig-out", "", "where to write the kubeconfig that uses the proxy (default <state dir>/kubeconfig); its directory must be private to you")
	fl.StringVar(&o.ProfilingListen, "profiling-listen", "", "loopback address (e.g. 127.0.0.1:6061) where Go's pprof profiles of this proxy are served, for benchmarks and bug reports; while it is on, your user's processes can read them (on Linux; elsewhere any local user); off when empty (the default)")
	fl.StringVar(&o.StateDir, "state-dir", "", "the proxy's state directory: CA, local secret, state (default $XDG_CONFIG_HOME/pinniped/proxy)")
	cmd.AddCommand(NewCmdCredential(f, nil))
	return cmd
}

// Complete fills in the defaults.
func (o *Options) Complete() error {
	if o.StateDir == "" {
		dir, err := o.f.Caches.ConfigDir()
		if err != nil {
			return fmt.Errorf("find the proxy's state directory (or give --state-dir): %w", err)
		}
		o.StateDir = state.DefaultDir(dir)
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return err
	}
	o.StateDir = abs
	if o.KubeconfigOut == "" {
		o.KubeconfigOut = filepath.Join(o.StateDir, KubeconfigName)
	}
	if o.KubeconfigOut, err = filepath.Abs(o.KubeconfigOut); err != nil {
		return err
	}
	return nil
}

// Validate checks the address and reads the kubeconfig into what to
// serve: no network, nothing started.
func (o *Options) Validate() error {
	host, port, err := ParseListen(o.Listen)
	if err != nil {
		return err
	}
	o.host, o.port = host, port
	if err := localproxy.CheckProfilingListen(o.ProfilingListen); err != nil {
		return fmt.Errorf("--profiling-listen: %w", err)
	}

	cc := o.Kube.ClientConfigFor("")
	raw, err := cc.RawConfig()
	if err != nil {
		return fmt.Errorf("read the kubeconfig: %w", err)
	}
	if err := notAnInput(o.KubeconfigOut, cc.ConfigAccess()); err != nil {
		return err
	}
	ts, skipped, err := targets.Build(raw, targets.Options{IsFront: handoff.IsFront, Contexts: o.Contexts, LookupEnv: o.f.LookupEnv})
	if err != nil {
		return err
	}
	if len(o.Contexts) > 0 && len(skipped) > 0 {
		// The person named these: serving fewer is not what they asked.
		var why []string
		for _, s := range skipped {
			why = append(why, fmt.Sprintf("context %q: %s", s.Context, s.Reason))
		}
		return fmt.Errorf("cannot serve every --context asked for:\n  %s", strings.Join(why, "\n  "))
	}
	if len(ts) == 0 {
		return errors.New("no context of the kubeconfig runs `pinniped login oidc` or `pinniped login static`: there is nothing to serve " +
			"(make one with `pinniped get kubeconfig`, or name the kubeconfig with --kubeconfig)")
	}
	o.raw, o.targets, o.skipped = raw, ts, skipped
	return nil
}

// Run serves the contexts until ctx ends (Ctrl-C, SIGTERM).
func (o *Options) Run(ctx context.Context) error {
	return localproxy.Run(ctx, localproxy.Options{
		Targets: o.targets, Skipped: o.skipped, Raw: o.raw,
		Host: o.host, Port: o.port, Listen: o.Listen,
		ProfilingListen: o.ProfilingListen,
		StateDir:        o.StateDir, KubeconfigOut: o.KubeconfigOut,
		FrontPath: handoff.FrontPath(o.f.Getenv),
		Factory:   o.f,
	})
}

// notAnInput refuses to write the proxy's kubeconfig over a kubeconfig it
// reads: the person's own contexts would be replaced by the proxy's.
func notAnInput(out string, access clientcmd.ConfigAccess) error {
	outInfo, err := os.Stat(out)
	if err != nil {
		return nil //nolint:nilerr // a file that is not there yet is no kubeconfig being read
	}
	inputs := access.GetLoadingPrecedence()
	if f := access.GetExplicitFile(); f != "" {
		inputs = []string{f}
	}
	for _, in := range inputs {
		if info, err := os.Stat(in); err == nil && os.SameFile(info, outInfo) {
			return fmt.Errorf("--kubeconfig-out=%s is the kubeconfig the proxy reads its contexts from: writing there would replace them; "+
				"choose another file (the default is in the proxy's state directory)", out)
		}
	}
	return nil
}

// ParseListen accepts only a loopback address: the proxy hands out live
// cluster credentials to whoever has the local secret, and nothing off
// this machine may even reach it. "localhost" means 127.0.0.1 (a name
// could resolve anywhere).
func ParseListen(listen string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("--listen=%q is not host:port (e.g. %s): %w", listen, DefaultListen, err)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("--listen=%q: %q is not a port number", listen, p)
	}
	if h == "localhost" {
		h = "127.0.0.1"
	}
	ip := net.ParseIP(h)
	if ip == nil || !ip.IsLoopback() {
		return "", 0, fmt.Errorf("--listen=%q: the proxy listens only on a loopback address (127.0.0.1, ::1 or localhost), "+
			"never on an address other machines can reach", listen)
	}
	// Other loopback addresses (127.0.0.2) are refused too: the serving
	// certificate names only these, and client-go would refuse a server
	// the written kubeconfig calls by another address.
	if !slices.ContainsFunc(localca.IPs, ip.Equal) {
		return "", 0, fmt.Errorf("--listen=%q: the proxy's certificate is for 127.0.0.1, ::1 and localhost only: listen on one of them "+
			"(another port, e.g. 127.0.0.1:8443, if %s is taken)", listen, DefaultListen)
	}
	return ip.String(), port, nil
}
