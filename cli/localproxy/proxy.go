// Package localproxy is pinniped proxy, the local credential proxy
// (docs/local-proxy.md), put together: one target per kubeconfig context
// (targets), each kept supplied with a credential by a renewer (renew) over
// the login runner kubectl's calls use, applied as a new set of upstream
// connections (upstream), served on loopback behind the local secret and
// the peer's user (server, peer) with the proxy's own CA (localca), its
// state written for pinniped status (state). The command maps flags to
// Options and calls Run.
package localproxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/agent/plumbing/profiling"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/localproxy/localca"
	"github.com/pinniped-kit/pinniped/cli/localproxy/peer"
	"github.com/pinniped-kit/pinniped/cli/localproxy/renew"
	"github.com/pinniped-kit/pinniped/cli/localproxy/server"
	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
	"github.com/pinniped-kit/pinniped/cli/localproxy/targets"
	"github.com/pinniped-kit/pinniped/cli/localproxy/upstream"
	"github.com/pinniped-kit/pinniped/cli/localuser"
	"github.com/pinniped-kit/pinniped/cli/login"
	"github.com/pinniped-kit/pinniped/cli/login/loginsetup"
	"github.com/pinniped-kit/pinniped/cli/shellquote"
	"github.com/pinniped-kit/pinniped/cli/ui"
	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
	"github.com/pinniped-kit/pinniped/cli/ui/tty"
)

// Server timeouts. No write or idle-request timeout bounds a response:
// watches, log tails, exec sessions and port-forwards last as long as the
// client wants.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 5 * time.Minute
	// drainTimeout is how long a stop waits for requests in flight; the
	// streams still open then are cut.
	drainTimeout = 20 * time.Second
)

// Options are what pinniped proxy serves, and how.
type Options struct {
	// Targets are the contexts to serve; Skipped those of the kubeconfig
	// that are not, with why (the announcement names them).
	Targets []*targets.Target
	Skipped []targets.Skipped
	// Raw is the kubeconfig the targets come from: the written kubeconfig
	// keeps their context names and namespaces.
	Raw clientcmdapi.Config
	// Host and Port are the loopback address to listen on; Listen is how
	// the person wrote it, for messages.
	Host   string
	Port   int
	Listen string
	// ProfilingListen, when set, is a loopback address where Go's pprof
	// profiles of the proxy are served (the agent's profiling endpoint).
	ProfilingListen string
	// StateDir is the proxy's state directory (CA, secret, state file);
	// KubeconfigOut where the kubeconfig that uses the proxy is written.
	StateDir, KubeconfigOut string
	// FrontPath is the pinniped the written kubeconfig's exec entry runs.
	FrontPath string
	// Factory is the world: streams (a person is asked on its terminal),
	// environment, clock, browser, and the caches logins share.
	Factory *cmdutil.Factory
}

// CheckProfilingListen is what Run accepts as ProfilingListen: "" (no
// profiles) or a loopback host:port.
func CheckProfilingListen(addr string) error { return profiling.CheckAddress(addr) }

// Run serves until ctx ends (Ctrl-C, SIGTERM), then drains and removes the
// secret and the state file.
func Run(ctx context.Context, opts Options) error {
	o := &opts
	errOut := o.Factory.IO.ErrOut
	run, err := state.Start(ctx, o.StateDir)
	if err != nil {
		return err
	}
	defer func() { _ = run.Stop() }()
	secret, err := run.NewSecret()
	if err != nil {
		return err
	}
	serving, err := localca.Serve(o.StateDir, o.Factory.Now)
	if err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		return fmt.Errorf("listen on %s (another program may use the port: choose another with --listen): %w", o.Listen, err)
	}
	defer ln.Close()
	base := "https://" + ln.Addr().String()

	p := &proxy{
		o: o, run: run, out: &lockedWriter{w: errOut}, base: base,
		// A person is asked on this terminal: stdin must be it, and this
		// process in its foreground (`pinniped proxy &` would be stopped
		// by the kernel at the first prompt, and every context with it).
		interactive: tty.IsTerminal(errOut) && tty.Foreground(o.Factory.IO.In),
		infos:       map[string]state.Context{},
	}
	if o.ProfilingListen != "" {
		pln, err := profiling.Listen(ctx, o.ProfilingListen)
		if err != nil {
			return fmt.Errorf("--profiling-listen: %w", err)
		}
		// Only this user's processes where the system can tell (Linux),
		// as for the proxy itself, but without the secret: profiles hold
		// no credential.
		srv := profiling.Server(profiling.Handler(peer.Check))
		srv.ConnContext = localuser.ConnContext
		srv.ErrorLog = log.New(p.out, "pinniped proxy profiles: ", 0)
		profCtx, stopProfiles := context.WithCancel(ctx)
		defer stopProfiles() // also when Run fails before serving
		go profiling.Serve(profCtx, srv, pln, slog.New(slog.NewTextHandler(p.out, nil)))
	}
	srvTargets, renewers, err := p.targets()
	if err != nil {
		return err
	}
	if err := p.writeState(); err != nil {
		return err
	}
	kc, err := Kubeconfig(o.Raw, o.Targets, base, serving.CAPEM, o.StateDir, o.FrontPath)
	if err != nil {
		return err
	}
	if err := writePrivate(o.KubeconfigOut, kc); err != nil {
		return err
	}
	srv := p.server(secret, srvTargets, serving)

	renewCtx, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, r := range renewers {
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(renewCtx) }()
	}
	defer func() { stopRenewing(); wg.Wait() }()

	p.announce()
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-served:
		return fmt.Errorf("the proxy's server stopped: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintf(p.out, "Stopping: letting requests in flight finish (up to %s)...\n", drainTimeout)
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		_ = srv.Close()
	}
	fmt.Fprintln(p.out, "pinniped proxy stopped.")
	return nil
}

// targets are the server's targets and their renewers, one per context.
func (p *proxy) targets() ([]*server.Target, []*renew.Renewer, error) {
	srvTargets := make([]*server.Target, 0, len(p.o.Targets))
	renewers := make([]*renew.Renewer, 0, len(p.o.Targets))
	for _, t := range p.o.Targets {
		st, r, err := p.target(t)
		if err != nil {
			return nil, nil, err
		}
		srvTargets = append(srvTargets, st)
		renewers = append(renewers, r)
	}
	return srvTargets, renewers, nil
}

// server is the proxy's HTTPS server on loopback: the local secret, then
// the peer's user, checked on every request (handler), HTTP/2, the serving
// certificate from the proxy's own CA.
func (p *proxy) server(secret []byte, targets []*server.Target, serving *localca.Serving) *http.Server {
	logger := slog.New(slog.NewTextHandler(p.out, nil))
	return &http.Server{
		Handler: handler(secret, targets, logger),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: serving.GetCertificate(p.o.Factory.Now),
			NextProtos:     []string{"h2", "http/1.1"},
		},
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ConnContext:       localuser.ConnContext,
		ErrorLog:          log.New(p.out, "pinniped proxy: ", 0),
	}
}

// handler is the proxy's request path: the local secret first, in
// constant time, then the peer's user, then the rest. The peer check costs
// a scan of the kernel's socket tables, so only a client that proves it
// holds the secret gets one; a right secret from another user is still
// refused (403).
func handler(secret []byte, targets []*server.Target, logger *slog.Logger) http.Handler {
	return server.New(secret, targets, logger, server.AfterSecret(peer.Check))
}

// proxy is one run's shared state.
type proxy struct {
	o           *Options
	run         *state.Running
	out         io.Writer
	base        string
	interactive bool

	mu    sync.Mutex
	infos map[string]state.Context
}

// lockedWriter keeps lines from renewers of several contexts whole.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// target wires one context: its holder, its renewer and its server entry.
func (p *proxy) target(t *targets.Target) (*server.Target, *renew.Renewer, error) {
	up, _, err := rest.DefaultServerUrlFor(t.Upstream)
	if err != nil {
		return nil, nil, fmt.Errorf("context %q: its server: %w", t.Context, err)
	}
	get, err := p.getter(t)
	if err != nil {
		return nil, nil, fmt.Errorf("context %q: %w", t.Context, err)
	}
	holder := &upstream.Holder{}
	n := 0
	r := &renew.Renewer{
		Now:   p.o.Factory.Now,
		After: time.After,
		Get:   get,
		Apply: func(c *credcache.Credential) error {
			n++
			g, err := upstream.NewGeneration(t.Upstream, *c, n)
			if err != nil {
				return err
			}
			holder.Swap(g)
			return nil
		},
		Interactive: p.interactive && t.Interactive,
	}
	var told news
	r.Changed = func(i renew.Info) { p.changed(t, i, &told) }
	p.infos[t.Slug] = state.Context{Context: t.Context, Server: p.base + server.PathPrefix + t.Slug, State: renew.Renewing.String()}
	pid := os.Getpid()
	st := &server.Target{
		Context: t.Context, Slug: t.Slug, Upstream: up, Holder: holder,
		State: func() (bool, string) {
			s, msg := r.State()
			if s == renew.NeedsPerson && r.Interactive {
				msg = fmt.Sprintf("%s (pid %d)", msg, pid)
			}
			// Ready here means the credential just expired and its
			// successor is being got (a laptop woken from sleep).
			return s == renew.Renewing || s == renew.Ready, msg
		},
	}
	return st, r, nil
}

// getter is the renewer's Get for t: the login runner kubectl's call of
// the plugin runs, with the same caches and keys, so both share sessions
// and credentials. One runner per target, set up once; what differs per
// call (the validity asked for, whether a person may be asked) is in the
// request.
func (p *proxy) getter(t *targets.Target) (func(context.Context, renew.Ask) (*credcache.Credential, error), error) {
	f := p.o.Factory
	quiet := ui.ForLogin(ui.LoginOptions{In: f.IO.In, Out: p.out, Getenv: f.Getenv, Open: f.Browser, Now: f.Now})
	// The renewal's own line (changed) says what a background login's
	// summary would, without naming the user.
	quiet.View = noSummary{quiet.View}
	if s := t.Login.Static; s != nil {
		runner, err := loginsetup.New(f, s.CredentialCache, quiet)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, a renew.Ask) (*credcache.Credential, error) {
			return runner.CredentialStatic(ctx, s, login.Request{Cluster: t.Cluster, MinValid: a.MinValid, Unattended: !a.Person})
		}, nil
	}
	c := t.Login.OIDC
	background, err := loginsetup.NewOIDC(f, c, quiet)
	if err != nil {
		return nil, err
	}
	toldBackground := false // used by the renewer's goroutine alone
	return func(ctx context.Context, a renew.Ask) (*credcache.Credential, error) {
		if !a.Person {
			return background.CredentialOIDC(ctx, c, login.Request{Cluster: t.Cluster, MinValid: a.MinValid, Unattended: true})
		}
		// A person logs in: in this terminal, with the login's own
		// timeout, in a view of its own that is finished (the terminal
		// restored) before the next one. Not from the background, where a
		// prompt would stop the whole proxy: it says so and tries again.
		if !tty.Foreground(f.IO.In) {
			if !toldBackground {
				fmt.Fprintf(p.out, "Context %q needs you to log in: bring pinniped proxy to the foreground of its terminal (fg).\n", t.Context)
				toldBackground = true
			}
			return nil, fmt.Errorf("%w: pinniped proxy runs in the background of its terminal; bring it to the foreground (fg) to log in", login.ErrNeedsPerson)
		}
		toldBackground = false
		fmt.Fprintf(p.out, "Context %q needs you to log in.\n", t.Context)
		if c.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.Timeout)
			defer cancel()
		}
		ctx, cancelLogin := context.WithCancelCause(ctx)
		defer cancelLogin(nil)
		view := ui.ForLogin(ui.LoginOptions{
			In: f.IO.In, Out: p.out, Interactive: true, Getenv: f.Getenv, Open: f.Browser, Now: f.Now,
			Issuer: c.Issuer, Cancel: cancelLogin,
		})
		view.View = anonymousSummary{view.View}
		attended, err := loginsetup.NewOIDC(f, c, view)
		if err != nil {
			return nil, view.Finish(err)
		}
		cred, err := attended.CredentialOIDC(ctx, c, login.Request{Cluster: t.Cluster, Interactive: true, MinValid: a.MinValid})
		return cred, view.Finish(err)
	}, nil
}

// noSummary is the view of a background renewal. It drops the runner's
// summary, which names the user and groups, and its progress steps, which
// name the user too ("logging in as ...") and would chatter at every
// renewal: the proxy's output, which may end up in a log, never names an
// identity, and the renewal's own line says what happened. Warnings stay.
type noSummary struct{ loginview.View }

func (noSummary) Success(loginview.Summary) {}

func (noSummary) Step(string) {}

// anonymousSummary shows the person who just logged in that it worked,
// and until when, without naming the user or groups (as noSummary).
type anonymousSummary struct{ loginview.View }

func (v anonymousSummary) Success(s loginview.Summary) {
	s.Username, s.Groups = "", nil
	v.View.Success(s)
}

// changed records a renewer's news in state.json and prints a line for a
// new credential or a new problem: never an identity or a secret.
func (p *proxy) changed(t *targets.Target, i renew.Info, n *news) {
	p.mu.Lock()
	c := p.infos[t.Slug]
	c.Expires, c.Renewals, c.State, c.Problem = i.Expires, i.Renewals, i.State.String(), ""
	if i.State != renew.Ready || i.Message != "" {
		c.Problem = i.Message
	}
	p.infos[t.Slug] = c
	p.mu.Unlock()
	if err := p.writeState(); err != nil {
		fmt.Fprintf(p.out, "! could not update the state file (pinniped status may be out of date): %v\n", err)
	}
	if line := n.line(i); line != "" {
		fmt.Fprintf(p.out, "%s %s: %s\n", p.o.Factory.Now().Local().Format(time.TimeOnly), t.Context, line)
	}
}

// news is what one context's renewer last told that is worth a line.
type news struct{ last renew.Info }

// line is what to print of i ("": nothing new): a new credential, or a
// problem other than the last one printed. Every retry passes through
// Renewing, which is not compared with: a context failing the same way
// again and again prints its problem once.
func (n *news) line(i renew.Info) string {
	last := n.last
	if i.State != renew.Renewing {
		n.last = i
	}
	switch {
	case i.Renewals > last.Renewals && i.Expires.IsZero():
		return "credential ready (no expiry)"
	case i.Renewals > last.Renewals:
		return fmt.Sprintf("new credential (#%d), valid until %s", i.Renewals, i.Expires.Local().Format(time.TimeOnly))
	case (i.State == renew.Failed || i.State == renew.NeedsPerson) && (i.State != last.State || !sameProblem(i, last)):
		return fmt.Sprintf("%s: %s", i.State, i.Message)
	}
	return ""
}

// sameProblem compares two messages without their "next try in" tail,
// which changes at every retry.
func sameProblem(a, b renew.Info) bool {
	cut := func(s string) string {
		if i := strings.LastIndex(s, " (next try in "); i >= 0 {
			return s[:i]
		}
		return s
	}
	return cut(a.Message) == cut(b.Message)
}

func (p *proxy) writeState() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := make(map[string]state.Context, len(p.infos))
	for k, v := range p.infos {
		cs[k] = v
	}
	return p.run.Write(&state.State{Address: p.base, Contexts: cs})
}

// announce says what is served, where, and how to use it.
func (p *proxy) announce() {
	var b []byte
	b = fmt.Appendf(b, "pinniped proxy (pid %d) is serving on %s:\n", os.Getpid(), p.base)
	for _, t := range p.o.Targets {
		b = fmt.Appendf(b, "  %-30s -> %s%s%s\n", t.Context, p.base, server.PathPrefix, t.Slug)
	}
	notPinniped := 0
	var others []string
	for _, s := range p.o.Skipped {
		if s.Kind == targets.NotPinniped {
			notPinniped++
			continue
		}
		others = append(others, fmt.Sprintf("  %s: %s\n", s.Context, s.Reason))
	}
	sort.Strings(others)
	if len(others) > 0 {
		b = append(b, "Not served:\n"...)
		for _, s := range others {
			b = append(b, s...)
		}
	}
	if notPinniped > 0 {
		b = fmt.Appendf(b, "(%d other contexts do not use pinniped login and are not served.)\n", notPinniped)
	}
	b = fmt.Appendf(b, "Use the kubeconfig %s (same context names), e.g.:\n  export KUBECONFIG=%s\n", p.o.KubeconfigOut, shellquote.Quote(p.o.KubeconfigOut))
	if p.interactive {
		b = append(b, "Logins that need you are shown here. Stop with Ctrl-C.\n"...)
	} else {
		b = append(b, "No terminal: logins that need a person are not started here; log in with the original kubeconfig and the proxy uses that session. Stop with SIGTERM or Ctrl-C.\n"...)
	}
	_, _ = p.out.Write(b)
}
