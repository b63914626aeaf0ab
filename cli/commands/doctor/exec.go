package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	gobuildinfo "debug/buildinfo"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/kubeexec"
)

// needsArgs is why a check that needs the login skips: exec.args found
// none it would use.
const needsArgs = "needs login arguments that validate (exec.args)"

const regenerate = "ask your administrator for a kubeconfig made by `pinniped get kubeconfig`"

func checkContext(_ context.Context, r *run) Result {
	raw, err := r.load("").RawConfig()
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the kubeconfig cannot be read (%v): fix the file, or point --kubeconfig at another", err))
	}
	for _, u := range raw.AuthInfos {
		// Whatever the context, no user's secrets are ever printed.
		r.secret(kubeexec.Secrets(u)...)
	}
	if len(raw.Contexts) == 0 {
		return fail("", "no kubeconfig with a context was found: pass --kubeconfig, set $KUBECONFIG, or create ~/.kube/config")
	}
	if r.contextName == "" {
		r.contextName = raw.CurrentContext
	}
	if r.contextName == "" {
		return fail("", "the kubeconfig has no current context: pass --kubeconfig-context NAME, or run `kubectl config use-context NAME`")
	}
	kctx := raw.Contexts[r.contextName]
	if kctx == nil {
		names := make([]string, 0, len(raw.Contexts))
		for n := range raw.Contexts {
			names = append(names, n)
		}
		slices.Sort(names)
		return fail("", fmt.Sprintf("the kubeconfig has no context %q: pass --kubeconfig-context with one of %s", r.contextName, strings.Join(names, ", ")))
	}
	if raw.Clusters[kctx.Cluster] == nil {
		return fail("", fmt.Sprintf("context %q names the cluster %q, which the kubeconfig does not define: add it, or %s", r.contextName, kctx.Cluster, regenerate))
	}
	user := raw.AuthInfos[kctx.AuthInfo]
	if user == nil {
		return fail("", fmt.Sprintf("context %q names the user %q, which the kubeconfig does not define: add it, or %s", r.contextName, kctx.AuthInfo, regenerate))
	}
	r.user = user
	r.namespace = kctx.Namespace
	if r.namespace == "" {
		r.namespace = "default"
	}
	// The cluster alone, without the user: an exec plugin or an auth
	// provider would log in.
	bare := raw.DeepCopy()
	bare.AuthInfos[kctx.AuthInfo] = clientcmdapi.NewAuthInfo()
	anon, err := clientcmd.NewNonInteractiveClientConfig(*bare, r.contextName, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the cluster %q of context %q cannot be used (%v): fix its server and certificate-authority in the kubeconfig", kctx.Cluster, r.contextName, err))
	}
	r.anon = rest.AnonymousClientConfig(anon)
	r.anon.UserAgent = "pinniped-doctor"
	// Building the full config only reads it; nothing runs until a request.
	cfg, err := r.load(r.contextName).ClientConfig()
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("kubectl cannot use context %q (%v): fix its user %q in the kubeconfig, or %s", r.contextName, err, kctx.AuthInfo, regenerate))
	}
	if user.Exec != nil {
		// What kubectl hands the plugin, and so what the cache key holds.
		r.execCluster, err = kubeexec.ExecCluster(user.Exec, func() (*rest.Config, error) { return cfg, nil })
		if err != nil {
			return fail(err.Error(), fmt.Sprintf("kubectl cannot run the exec plugin of context %q (%v): fix the cluster's certificate-authority in the kubeconfig, or %s", r.contextName, err, regenerate))
		}
	}
	if user.Exec == nil && user.AuthProvider == nil && (cfg.BearerToken != "" || cfg.BearerTokenFile != "" || len(cfg.CertData) > 0 || cfg.CertFile != "") {
		r.full = rest.CopyConfig(cfg)
		r.full.UserAgent = "pinniped-doctor"
		r.secret(cfg.BearerToken, string(cfg.KeyData))
	}
	return ok("cluster %q at %s, user %q", kctx.Cluster, r.anon.Host, kctx.AuthInfo)
}

func checkFront(_ context.Context, r *run) Result {
	if r.user == nil {
		return skip("needs the context (kubeconfig.context)")
	}
	e := r.user.Exec
	if e == nil {
		if r.full != nil {
			return fail("", "the context's user logs in with a token or certificate in the kubeconfig, not with pinniped: "+regenerate)
		}
		return fail("", "the context's user has no exec entry, so kubectl never runs pinniped: "+regenerate)
	}
	if !handoff.IsFront(e.Command) {
		return fail("", fmt.Sprintf("the context's user runs %q, not pinniped: %s", filepath.Base(e.Command), regenerate))
	}
	path, err := r.resolveCommand(e.Command)
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("kubectl cannot find %s (%v): install pinniped there, or fix the exec entry's command", e.Command, err))
	}
	r.front, r.frontOK = path, true
	return ok("%s", path)
}

// resolveCommand finds an exec command as kubectl does: an absolute path
// as it is, one with a separator relative to the kubeconfig's directory
// (client-go's loader rewrites those), a bare name on $PATH.
func (r *run) resolveCommand(cmd string) (string, error) {
	path := cmd
	switch {
	case filepath.IsAbs(cmd):
	case strings.ContainsRune(cmd, filepath.Separator):
		path = filepath.Join(filepath.Dir(r.user.LocationOfOrigin), cmd)
	default:
		p, err := r.d.LookPath(cmd)
		if err != nil {
			return "", fmt.Errorf("not on $PATH: %w", err)
		}
		path = p
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if info.IsDir() {
		return "", fmt.Errorf("%s is a directory", path)
	}
	return path, nil
}

func checkEngine(_ context.Context, r *run) Result {
	if !r.frontOK {
		return skip("needs pinniped (exec.front)")
	}
	front, engine := handoff.EngineBeside(r.front, r.d.GOOS)
	if _, err := os.Stat(engine); err != nil {
		fix := fmt.Sprintf("%s is missing: pinniped hands every command but a cached login to it, so install both binaries side by side from the same release archive", engine)
		if !errors.Is(err, fs.ErrNotExist) {
			fix = fmt.Sprintf("%s cannot be used (%v): fix its permissions, or reinstall both binaries from the same release archive", engine, err)
		}
		return fail(err.Error(), fix)
	}
	r.engine = engine
	if front != r.front {
		return ok("%s (beside %s, which %s links to)", engine, front, r.front)
	}
	return ok("%s", engine)
}

// Build is what a binary says about its build: its module version and
// the commit it was built from (Go records both, so they can be read
// without running the binary; -ldflags versions cannot, under -trimpath).
type Build struct {
	Version  string
	Revision string
	Modified bool
	// GoVersion is the toolchain's: known even for development builds,
	// and two builds made with different ones are different builds.
	GoVersion string
	// FIPSModule is the Go FIPS 140-3 module it was built with
	// (GOFIPS140), "" for the ordinary flavour: one commit, two builds.
	FIPSModule string
}

// ReadBuild reads the build of the binary at path.
func ReadBuild(path string) (Build, error) {
	bi, err := gobuildinfo.ReadFile(path)
	if err != nil {
		return Build{}, err
	}
	return fromInfo(bi), nil
}

func fromInfo(bi *debug.BuildInfo) Build {
	b := Build{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if b.Version == "(devel)" {
		b.Version = ""
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		case "GOFIPS140":
			if s.Value != "off" {
				b.FIPSModule = s.Value
			}
		}
	}
	return b
}

// known: the build says enough to compare it.
func (b Build) known() bool { return b.Revision != "" || b.Version != "" }

func (b Build) String() string {
	if b.FIPSModule != "" {
		return b.ordinaryString() + ", FIPS flavour (" + b.FIPSModule + ")"
	}
	return b.ordinaryString()
}

func (b Build) ordinaryString() string {
	var parts []string
	if b.Version != "" {
		parts = append(parts, b.Version)
	}
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		parts = append(parts, "commit "+rev)
	}
	if b.Modified {
		parts = append(parts, "with local changes")
	}
	if len(parts) == 0 && b.GoVersion != "" {
		return "a development build with " + b.GoVersion
	}
	if len(parts) == 0 {
		return "unknown build"
	}
	return strings.Join(parts, ", ")
}

// same reports whether a and b are the same build, and whether that can be
// told at all.
func same(a, b Build) (equal, told bool) {
	if a.GoVersion != "" && b.GoVersion != "" && a.GoVersion != b.GoVersion {
		return false, true
	}
	if a.FIPSModule != b.FIPSModule {
		return false, true
	}
	if !a.known() || !b.known() {
		return false, false
	}
	if a.Revision != "" && b.Revision != "" {
		if a.Revision != b.Revision || a.Modified != b.Modified {
			return false, true
		}
		// One commit with local changes may still be two builds.
		return a.Version == b.Version, !a.Modified
	}
	return a.Version == b.Version, a.Version != "" && b.Version != ""
}

func checkVersions(_ context.Context, r *run) Result {
	if r.engine == "" {
		return skip("needs pinniped and pinniped-engine (exec.front, exec.engine)")
	}
	front, ferr := r.d.ReadBuild(r.front)
	engine, eerr := r.d.ReadBuild(r.engine)
	if ferr != nil || eerr != nil {
		return warn(errors.Join(ferr, eerr).Error(), "could not tell which builds pinniped and pinniped-engine are (their build information is unreadable): reinstall both from one release archive if logins misbehave")
	}
	equal, told := same(front, engine)
	switch {
	case told && !equal:
		return fail(fmt.Sprintf("pinniped: %s; pinniped-engine: %s", front, engine),
			fmt.Sprintf("pinniped (%s) and pinniped-engine (%s) are different builds, so they may disagree on cached logins: install both from the same release archive", front, engine))
	case !told:
		// Not a fault: builds without version control information
		// (-buildvcs=false, a source tarball) say too little.
		return skip("could not tell whether pinniped (%s) and pinniped-engine (%s) are the same build: they carry no version or commit", front, engine)
	}
	self, err := r.d.Self()
	if err != nil {
		return ok("pinniped and pinniped-engine: %s (this binary's build is unknown)", front)
	}
	if equal, told := same(front, self); told && !equal {
		return warn(fmt.Sprintf("kubeconfig's pinniped: %s; this pinniped: %s", front, self),
			fmt.Sprintf("the kubeconfig runs %s (%s), another build than this doctor (%s): run that one's doctor, or install one version everywhere", r.front, front, self))
	}
	return ok("pinniped and pinniped-engine: %s", front)
}

func checkArgs(_ context.Context, r *run) Result {
	if r.user == nil || r.user.Exec == nil || !handoff.IsFront(r.user.Exec.Command) {
		return skip("needs an exec entry running pinniped (exec.front)")
	}
	login, err := kubeexec.Parse(r.user.Exec, r.d.f.LookupEnv)
	switch {
	case errors.Is(err, kubeexec.ErrNotALogin):
		return fail("", "the exec entry's arguments do not start with `login oidc` or `login static`: "+regenerate)
	case err != nil:
		return fail(err.Error(), fmt.Sprintf("%v: fix them in the exec entry, or %s", err, regenerate))
	}
	if login.OIDC != nil {
		r.secret(login.OIDC.ClientSecret, login.OIDC.Password)
	} else {
		r.secret(login.Static.Token)
	}
	// The login is recorded for the later checks only once it validates:
	// a login refuses to run with a config Validate refuses, so probing
	// with it would check something kubectl never does.
	if err := login.Validate(); err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", "; ")
		return fail(msg, fmt.Sprintf("the login arguments are refused (%s): fix those flags in the exec entry, or %s", msg, regenerate))
	}
	r.login, r.oidc, r.static, r.mode, r.kind = login, login.OIDC, login.Static, login.CacheMode(), login.Kind()
	if login.OIDC != nil {
		r.conc = login.OIDC.Concierge
	} else {
		r.conc = login.Static.Concierge
	}
	return ok("%s", r.describeLogin())
}

// describeLogin says what the login does, in words that hold no secret.
func (r *run) describeLogin() string {
	var b strings.Builder
	if r.oidc != nil {
		fmt.Fprintf(&b, "login oidc at %s as client %q", r.oidc.Issuer, r.oidc.ClientID)
		if r.oidc.Upstream.Name != "" {
			fmt.Fprintf(&b, " through the identity provider %q", r.oidc.Upstream.Name)
		}
		if r.oidc.Flow != config.FlowAuto {
			fmt.Fprintf(&b, ", flow %s", r.oidc.Flow)
		}
	} else {
		b.WriteString("login static with a token")
		if r.static.TokenEnv != "" {
			fmt.Fprintf(&b, " from $%s", r.static.TokenEnv)
		} else {
			b.WriteString(" written in the kubeconfig")
		}
	}
	if c := r.conc; c != nil {
		kind, _ := c.Kind()
		fmt.Fprintf(&b, "; exchanged with the %s %q at %s (API group suffix %s)", kind, c.AuthenticatorName, c.Endpoint, c.Suffix())
	}
	return b.String()
}
