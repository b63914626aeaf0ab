package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	gobuildinfo "debug/buildinfo"

	"sigs.k8s.io/yaml"

	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/kubeexec"
)

// needsArgs is why a check that needs the login skips: exec.args found
// none it would use.
const needsArgs = "needs login arguments that validate (exec.args)"

const regenerate = "ask your administrator for a kubeconfig made by `pinniped get kubeconfig`"

func checkFront(_ context.Context, s *execFacts) Result {
	if s.user == nil {
		return skip("needs the context (kubeconfig.context)")
	}
	e := s.user.Exec
	if e == nil {
		if s.full != nil {
			return fail("", "the context's user logs in with a token or certificate in the kubeconfig, not with pinniped: "+regenerate)
		}
		return fail("", "the context's user has no exec entry, so kubectl never runs pinniped: "+regenerate)
	}
	if !handoff.IsFront(e.Command) {
		return fail("", fmt.Sprintf("the context's user runs %q, not pinniped: %s", filepath.Base(e.Command), regenerate))
	}
	path, err := s.resolveCommand(e.Command)
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("kubectl cannot find %s (%v): install pinniped there, or fix the exec entry's command", e.Command, err))
	}
	s.front, s.frontOK = path, true
	return ok("%s", path)
}

// resolveCommand finds an exec command as kubectl does: an absolute path
// as it is, one with a separator relative to the kubeconfig's directory
// (client-go's loader rewrites those), a bare name on $PATH.
func (s *execFacts) resolveCommand(cmd string) (string, error) {
	path := cmd
	switch {
	case filepath.IsAbs(cmd):
	case strings.ContainsRune(cmd, filepath.Separator):
		path = filepath.Join(filepath.Dir(s.user.LocationOfOrigin), cmd)
	default:
		p, err := s.d.LookPath(cmd)
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

func checkEngine(_ context.Context, s *execFacts) Result {
	if !s.frontOK {
		return skip("needs pinniped (exec.front)")
	}
	front, engine := handoff.EngineBeside(s.front, s.d.GOOS)
	if _, err := os.Stat(engine); err != nil {
		fix := fmt.Sprintf("%s is missing: pinniped hands every command but a cached login to it, so install both binaries side by side from the same release archive", engine)
		if !errors.Is(err, fs.ErrNotExist) {
			fix = fmt.Sprintf("%s cannot be used (%v): fix its permissions, or reinstall both binaries from the same release archive", engine, err)
		}
		return fail(err.Error(), fix)
	}
	s.engine = engine
	if front != s.front {
		return ok("%s (beside %s, which %s links to)", engine, front, s.front)
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

func checkVersions(_ context.Context, s *execFacts) Result {
	if s.engine == "" {
		return skip("needs pinniped and pinniped-engine (exec.front, exec.engine)")
	}
	front, ferr := s.d.ReadBuild(s.front)
	engine, eerr := s.d.ReadBuild(s.engine)
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
	self, err := s.d.Self()
	if err != nil {
		return ok("pinniped and pinniped-engine: %s (this binary's build is unknown)", front)
	}
	if equal, told := same(front, self); told && !equal {
		return warn(fmt.Sprintf("kubeconfig's pinniped: %s; this pinniped: %s", front, self),
			fmt.Sprintf("the kubeconfig runs %s (%s), another build than this doctor (%s): run that one's doctor, or install one version everywhere", s.front, front, self))
	}
	return ok("pinniped and pinniped-engine: %s", front)
}

func checkArgs(_ context.Context, s *execFacts) Result {
	if s.user == nil || s.user.Exec == nil || !handoff.IsFront(s.user.Exec.Command) {
		return skip("needs an exec entry running pinniped (exec.front)")
	}
	login, err := kubeexec.Parse(s.user.Exec, s.d.f.LookupEnv)
	switch {
	case errors.Is(err, kubeexec.ErrNotALogin):
		return fail("", "the exec entry's arguments do not start with `login oidc` or `login static`: "+regenerate)
	case err != nil:
		return fail(err.Error(), fmt.Sprintf("%v: fix them in the exec entry, or %s", err, regenerate))
	}
	if login.OIDC != nil {
		s.secret(login.OIDC.ClientSecret, login.OIDC.Password)
	} else {
		s.secret(login.Static.Token)
	}
	// The login is recorded for the later checks only once it validates:
	// a login refuses to run with a config Validate refuses, so probing
	// with it would check something kubectl never does.
	if err := login.Validate(); err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", "; ")
		return fail(msg, fmt.Sprintf("the login arguments are refused (%s): fix those flags in the exec entry, or %s", msg, regenerate))
	}
	s.login, s.oidc, s.static, s.mode, s.kind = login, login.OIDC, login.Static, login.CacheMode(), login.Kind()
	if login.OIDC != nil {
		s.conc = login.OIDC.Concierge
	} else {
		s.conc = login.Static.Concierge
	}
	return ok("%s", s.describeLogin())
}

// describeLogin says what the login does, in words that hold no secret.
func (s *execFacts) describeLogin() string {
	var b strings.Builder
	if s.oidc != nil {
		fmt.Fprintf(&b, "login oidc at %s as client %q", s.oidc.Issuer, s.oidc.ClientID)
		if s.oidc.Upstream.Name != "" {
			fmt.Fprintf(&b, " through the identity provider %q", s.oidc.Upstream.Name)
		}
		if s.oidc.Flow != config.FlowAuto {
			fmt.Fprintf(&b, ", flow %s", s.oidc.Flow)
		}
	} else {
		b.WriteString("login static with a token")
		if s.static.TokenEnv != "" {
			fmt.Fprintf(&b, " from $%s", s.static.TokenEnv)
		} else {
			b.WriteString(" written in the kubeconfig")
		}
	}
	if c := s.conc; c != nil {
		kind, _ := c.Kind()
		fmt.Fprintf(&b, "; exchanged with the %s %q at %s (API group suffix %s)", kind, c.AuthenticatorName, c.Endpoint, c.Suffix())
	}
	return b.String()
}

// checkPluginPolicy: kubectl 1.35 refuses credential plugins that its
// kuberc does not allow, with an error that names neither the file nor the
// fix.
func checkPluginPolicy(_ context.Context, s *execFacts) Result {
	if !s.frontOK {
		return skip("needs the pinniped binary (exec.front)")
	}
	path := s.kubercPath()
	if path == "" {
		return ok("kubectl reads no kuberc: every credential plugin may run")
	}
	raw, err := os.ReadFile(path) //nolint:gosec // kubectl's own preferences file
	if errors.Is(err, fs.ErrNotExist) {
		return ok("no %s: every credential plugin may run", path)
	}
	if err != nil {
		return warn(err.Error(), fmt.Sprintf("kubectl could not read %s either: fix its permissions", path))
	}
	var pref kuberc
	if err := yaml.Unmarshal(raw, &pref); err != nil {
		return warn(err.Error(), fmt.Sprintf("%s does not parse, and kubectl refuses it too: fix it (kubectl kuberc view shows it)", path))
	}
	// name: is what every kubectl with a plugin policy reads (1.35 knows
	// no other; 1.36 took command: as its new spelling and still reads it).
	entry := "credentialPluginAllowlist:\n  - name: " + s.front
	if pref.Allowlist != nil && pref.Policy != "Allowlist" {
		// client-go's ValidatePluginPolicy: kubectl runs no plugin at all.
		return fail(fmt.Sprintf("credentialPluginAllowlist without credentialPluginPolicy: Allowlist in %s", path),
			fmt.Sprintf("kubectl refuses every credential plugin over this (\"misconfigured credential plugin allowlist\"): in %s set credentialPluginPolicy: Allowlist, and keep pinniped in the list:\n%s", path, entry))
	}
	switch pref.Policy {
	case "", "AllowAll":
		return ok("%s allows every credential plugin", path)
	case "DenyAll":
		return fail(fmt.Sprintf("credentialPluginPolicy: DenyAll in %s", path),
			fmt.Sprintf("kubectl refuses every credential plugin, pinniped too: in %s set credentialPluginPolicy: Allowlist and add\n%s", path, entry))
	case "Allowlist":
	default:
		return warn(fmt.Sprintf("credentialPluginPolicy: %q in %s", pref.Policy, path),
			"kubectl knows AllowAll, DenyAll and Allowlist: fix the policy")
	}
	for i, a := range pref.Allowlist {
		// kubectl 1.36's conversion refuses both spellings with different
		// values, and client-go's validateAllowlist a path filepath.Clean
		// would change. With the file named by $KUBERC kubectl then fails
		// every command; with the default file it warns and reads none of
		// it (every plugin may run, and the policy is lost).
		if a.Name != "" && a.Command != "" && a.Name != a.Command {
			return fail(fmt.Sprintf("entry %d of credentialPluginAllowlist in %s has both name: %s and command: %s", i+1, path, a.Name, a.Command),
				fmt.Sprintf("kubectl 1.36 and later refuse the file over it (command: is name:'s new spelling), and kubectl 1.35 reads only the name: keep one, such as\n  - name: %s", s.front))
		}
		name := a.Command
		if name == "" {
			name = a.Name
		}
		if name == "" {
			return fail(fmt.Sprintf("entry %d of credentialPluginAllowlist in %s names no plugin", i+1, path),
				fmt.Sprintf("kubectl refuses every credential plugin over it (\"empty allowlist entry\"): remove it, or write\n  - name: %s", s.front))
		}
		if filepath.Clean(name) != name {
			return fail(fmt.Sprintf("entry %d of credentialPluginAllowlist in %s is not a clean path: %s", i+1, path, name),
				fmt.Sprintf("kubectl refuses the whole allowlist over it (\"non-normalized file path\"): write it as %s", filepath.Clean(name)))
		}
	}
	// kubectl 1.35 reads only name: an entry without one is an empty entry
	// there, and client-go then refuses the whole list, pinniped's entry
	// too.
	commandOnly := 0
	for i, a := range pref.Allowlist {
		if a.Name == "" && commandOnly == 0 {
			commandOnly = i + 1
		}
	}
	for _, a := range pref.Allowlist {
		name := a.Command
		if name == "" {
			name = a.Name
		}
		allowed := ""
		if name == s.front {
			allowed = name
		} else if !strings.ContainsRune(name, filepath.Separator) {
			if p, err := s.d.LookPath(name); err == nil && p == s.front {
				allowed = name + ", found at " + p
			}
		}
		if allowed == "" {
			continue
		}
		if commandOnly != 0 {
			return warn(fmt.Sprintf("allowed by %s (%s), but kubectl 1.35 refuses the whole list: entry %d has no name:", path, allowed, commandOnly),
				fmt.Sprintf("for kubectl 1.35 too, spell every entry name: (1.36 and later read it as well), such as\n  - name: %s", s.front))
		}
		return ok("allowed by %s (%s)", path, allowed)
	}
	return fail(fmt.Sprintf("%s allows only the credential plugins it lists, and not %s", path, s.front),
		fmt.Sprintf("kubectl refuses pinniped (\"plugin ... not permitted by the credential plugin allowlist\"): add this entry to credentialPluginAllowlist in %s\n  - name: %s", path, s.front))
}
