// Package targets reads a kubeconfig as what the local credential proxy
// serves: every context whose user runs `pinniped login oidc|static`. It
// uses the recognisers `pinniped logout` and `pinniped doctor` use (the
// front's names, given as Options.IsFront, and kubeexec), so the proxy computes the same login and
// the same cluster, and so the same cache keys, as kubectl's own call of
// the plugin: the proxy and kubectl share sessions and credentials.
//
// It does no network and runs nothing: it reads the kubeconfig, and the
// certificate-authority files it names.
package targets

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/kubeexec"
)

// Target is one context the proxy serves.
type Target struct {
	// Context is the kubeconfig context's name; the proxy's kubeconfig
	// keeps it, so `kubectl --context` works unchanged.
	Context string
	// Slug names the context in the proxy's URL path (/ctx/<Slug>): only
	// [a-z0-9-], stable for a name, distinct between contexts.
	Slug string
	// Upstream is the context's API server: server, CA (read into
	// CAData), TLS server name, proxy-url. It has no user credential: the
	// proxy's credential generations add theirs.
	Upstream *rest.Config
	// Login is what the context's `pinniped login` arguments ask for, in
	// the environment kubectl gives the plugin.
	Login *kubeexec.Login
	// Exec is the user's exec entry (its environment comes first for the
	// login, as kubectl sets it).
	Exec *clientcmdapi.ExecConfig
	// Cluster is what kubectl hands the plugin, and so what the login's
	// cache keys name.
	Cluster config.Cluster
	// Interactive is set when a login may need a person (a browser, a
	// device code, a password typed in); a static token or a password
	// login with both PINNIPED_USERNAME and PINNIPED_PASSWORD set never does.
	Interactive bool
}

// CredentialKey is the cache key of the cluster credential kubectl's call
// of the plugin stores for this context.
func (t *Target) CredentialKey() string { return t.Login.CredentialKey(t.Cluster) }

// Why a context is not served.
const (
	// NotPinniped: the context's user does not run `pinniped login oidc`
	// or `pinniped login static` (or the context is incomplete).
	NotPinniped = "not-pinniped"
	// AlreadyProxied: the context already goes through a pinniped proxy.
	AlreadyProxied = "already-proxied"
	// Unusable: the context runs pinniped login, but its arguments or its
	// cluster cannot be used as they stand.
	Unusable = "unusable"
)

// Skipped is a context that is not served, and why.
type Skipped struct {
	Context string
	// Kind is NotPinniped, AlreadyProxied or Unusable.
	Kind string
	// Reason says what is wrong and what to do; it quotes no argument's
	// value (a static token may be one).
	Reason string
}

// Options are Build's inputs besides the kubeconfig.
type Options struct {
	// Contexts limits the result to these names (empty: every context).
	// A name the kubeconfig does not have is an error.
	Contexts []string
	// ClientConfig is the context's client config as kubectl builds it
	// (its CA file read, its overrides applied): nil builds it from the
	// kubeconfig alone.
	ClientConfig func(context string) (*rest.Config, error)
	// LookupEnv is the process's environment (the plugin's, after the exec
	// entry's own variables).
	LookupEnv func(string) (string, bool)
	// IsFront says whether an exec entry's command runs pinniped (required:
	// handoff.IsFront).
	IsFront func(command string) bool
}

// ErrUnknownContext is in the error for a requested context the
// kubeconfig does not have.
var ErrUnknownContext = errors.New("no such context in the kubeconfig")

// Build returns the contexts of raw to serve, sorted by name, and every
// other one considered with the reason it is not served. Nothing is
// dropped without a reason.
func Build(raw clientcmdapi.Config, o Options) ([]*Target, []Skipped, error) {
	if o.IsFront == nil {
		return nil, nil, errors.New("targets: Options.IsFront is required")
	}
	names := o.Contexts
	if len(names) == 0 {
		for name := range raw.Contexts {
			names = append(names, name)
		}
	} else {
		var unknown []string
		for _, name := range names {
			if raw.Contexts[name] == nil {
				unknown = append(unknown, fmt.Sprintf("%q", name))
			}
		}
		if len(unknown) > 0 {
			return nil, nil, fmt.Errorf("%w: %s; the kubeconfig has: %s", ErrUnknownContext, strings.Join(unknown, ", "), available(raw))
		}
	}
	names = slices.Clone(names)
	sort.Strings(names)
	names = slices.Compact(names)

	cfgFor := o.ClientConfig
	if cfgFor == nil {
		cfgFor = func(name string) (*rest.Config, error) {
			return clientcmd.NewNonInteractiveClientConfig(raw, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		}
	}
	lookupEnv := o.LookupEnv
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}

	var out []*Target
	var skipped []Skipped
	for _, name := range names {
		t, skip := build(raw, name, cfgFor, lookupEnv, o.IsFront)
		if skip != nil {
			skipped = append(skipped, *skip)
			continue
		}
		out = append(out, t)
	}
	assignSlugs(out)
	return out, skipped, nil
}

func available(raw clientcmdapi.Config) string {
	if len(raw.Contexts) == 0 {
		return "no contexts"
	}
	var names []string
	for name := range raw.Contexts {
		names = append(names, fmt.Sprintf("%q", name))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func build(raw clientcmdapi.Config, name string, cfgFor func(string) (*rest.Config, error), lookupEnv func(string) (string, bool), isFront func(string) bool) (*Target, *Skipped) {
	skip := func(kind, format string, args ...any) (*Target, *Skipped) {
		return nil, &Skipped{Context: name, Kind: kind, Reason: fmt.Sprintf(format, args...)}
	}
	kctx := raw.Contexts[name]
	user := raw.AuthInfos[kctx.AuthInfo]
	switch {
	case user == nil:
		return skip(NotPinniped, "its user %q is not in the kubeconfig", kctx.AuthInfo)
	case user.Exec == nil || !isFront(user.Exec.Command):
		return skip(NotPinniped, "its user does not run pinniped")
	case len(user.Exec.Args) > 0 && user.Exec.Args[0] == "proxy":
		return skip(AlreadyProxied, "it already goes through a pinniped proxy (its user runs `pinniped proxy`): use the kubeconfig the proxy was started with")
	case raw.Clusters[kctx.Cluster] == nil:
		return skip(NotPinniped, "its cluster %q is not in the kubeconfig", kctx.Cluster)
	}
	login, err := kubeexec.Parse(user.Exec, lookupEnv)
	if errors.Is(err, kubeexec.ErrNotALogin) {
		return skip(NotPinniped, "its user runs pinniped, but not `pinniped login oidc` or `pinniped login static`")
	}
	if err != nil {
		return skip(Unusable, "cannot read its pinniped login arguments (%v): fix them, or regenerate the kubeconfig with `pinniped get kubeconfig`", err)
	}
	if err := login.Validate(); err != nil {
		return skip(Unusable, "its pinniped login cannot run as it stands (%v)", err)
	}
	if user.Impersonate != "" || user.ImpersonateUID != "" || len(user.ImpersonateGroups) > 0 || len(user.ImpersonateUserExtra) > 0 {
		// The proxy sends its own credential and strips a client's
		// Impersonate-* headers: served, the context would act as the
		// logged-in user instead of the one it names.
		return skip(Unusable, "its user impersonates another (as:, as-groups:...), which the proxy does not carry: remove that, or use the context without the proxy")
	}
	cfg, err := cfgFor(name)
	if err != nil {
		return skip(Unusable, "its cluster cannot be used (%v): fix its server and certificate-authority in the kubeconfig", err)
	}
	// The CA is read once, now, as kubectl's plugin call reads it for
	// the cache key (ExecCluster): a later change of the file does not
	// split the two.
	up := rest.AnonymousClientConfig(cfg)
	if err := rest.LoadTLSFiles(up); err != nil {
		return skip(Unusable, "its cluster's certificate authority cannot be read (%v): fix certificate-authority in the kubeconfig", err)
	}
	up.CAFile = ""
	cluster, err := kubeexec.ExecCluster(user.Exec, func() (*rest.Config, error) { return cfg, nil })
	if err != nil {
		return skip(Unusable, "%v: fix the cluster's certificate-authority in the kubeconfig", err)
	}
	return &Target{
		Context:     name,
		Upstream:    up,
		Login:       login,
		Exec:        user.Exec,
		Cluster:     cluster,
		Interactive: interactive(login),
	}, nil
}

// interactive reports whether the login may need a person. An OIDC login
// does, except a password login with both the username and the password
// in its environment: a refresh token ends some day, and then it is the
// browser, the device code or a prompt again.
func interactive(l *kubeexec.Login) bool {
	if l.OIDC == nil {
		return false
	}
	c := l.OIDC
	return !c.PasswordLogin() || c.Username == "" || c.Password == ""
}

// slugHex is how many hex digits of the name's SHA-256 a slug carries; a
// clash between two contexts' slugs is settled with more (assignSlugs).
const slugHex = 6

// maxSlugName bounds the readable part of a slug.
const maxSlugName = 40

// Slug is name as a path segment: its lower-case letters and digits, every
// run of anything else a single '-', then '-' and the first n hex digits
// of the name's SHA-256. The hash tells apart names that read the same
// ("a.b", "a_b", "A-B").
func Slug(name string, n int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if b.Len() >= maxSlugName {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	readable := strings.TrimRight(b.String(), "-")
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:])[:n]
	if readable == "" {
		return h
	}
	return readable + "-" + h
}

// assignSlugs gives each target its Slug. Slugs that clash (the same
// readable part and the same first digits of the hash) get more digits,
// until they differ: names are distinct, and so are their hashes.
func assignSlugs(ts []*Target) {
	n := map[string]int{}
	for _, t := range ts {
		n[t.Context] = slugHex
	}
	for {
		seen := map[string][]*Target{}
		for _, t := range ts {
			t.Slug = Slug(t.Context, n[t.Context])
			seen[t.Slug] = append(seen[t.Slug], t)
		}
		clash := false
		for _, same := range seen {
			if len(same) > 1 {
				clash = true
				for _, t := range same {
					// Distinct names have distinct hashes: the whole
					// hash always settles it.
					n[t.Context] = min(n[t.Context]+slugHex, 2*sha256.Size)
				}
			}
		}
		if !clash {
			return
		}
	}
}
