// Package kubeexec reads a kubeconfig user's exec entry as the pinniped
// login it runs, without running it: the login model (cli/login/config)
// its arguments ask for in the environment kubectl gives the plugin, and
// the cluster kubectl hands it, which the login's cache keys name. It is
// what `pinniped logout` and `pinniped doctor` share, so both find the
// same cache entries a login writes. Engine only: it links client-go and
// pflag.
package kubeexec

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
)

// ErrNotALogin: the exec entry's arguments do not start with
// `login oidc` or `login static`.
var ErrNotALogin = errors.New("the exec entry's arguments do not start with `login oidc` or `login static`")

// Login is the login an exec entry runs: OIDC or Static is set.
type Login struct {
	OIDC   *config.OIDC
	Static *config.Static
}

// Kind is "oidc" or "static".
func (l *Login) Kind() string {
	if l.OIDC != nil {
		return "oidc"
	}
	return "static"
}

// Validate is the model's own check, as the login makes it before running.
func (l *Login) Validate() error {
	if l.OIDC != nil {
		return l.OIDC.Validate()
	}
	return l.Static.Validate()
}

// CredentialKey is the cache key of the cluster credential a login for
// cluster (what ExecCluster returns) stores.
func (l *Login) CredentialKey(cluster config.Cluster) string {
	if l.OIDC != nil {
		return l.OIDC.CredentialKey(cluster)
	}
	return l.Static.CredentialKey(cluster)
}

// CacheMode is the login's --credential-cache.
func (l *Login) CacheMode() string {
	if l.OIDC != nil {
		return l.OIDC.CredentialCache
	}
	return l.Static.CredentialCache
}

// Env is the environment the plugin sees: the exec entry's own variables
// first, as kubectl sets them, then lookupEnv's.
func Env(exec *clientcmdapi.ExecConfig, lookupEnv func(string) (string, bool)) func(string) (string, bool) {
	own := map[string]string{}
	for _, v := range exec.Env {
		own[v.Name] = v.Value
	}
	return func(k string) (string, bool) {
		if v, ok := own[k]; ok {
			return v, true
		}
		return lookupEnv(k)
	}
}

// Parse reads exec's arguments into the login they ask for in the plugin's
// environment (Env), as the engine's command would; it does not Validate.
// Its errors never quote an argument's value.
func Parse(exec *clientcmdapi.ExecConfig, lookupEnv func(string) (string, bool)) (*Login, error) {
	args := exec.Args
	if len(args) < 2 || args[0] != "login" || (args[1] != "oidc" && args[1] != "static") {
		return nil, ErrNotALogin
	}
	env := Env(exec, lookupEnv)
	if args[1] == "oidc" {
		c, err := flagset.ParseOIDC(args[2:], func(k string) string { v, _ := env(k); return v })
		if err != nil {
			return nil, fmt.Errorf("the `pinniped login oidc` arguments do not parse: %w", err)
		}
		return &Login{OIDC: c}, nil
	}
	c, err := flagset.ParseStatic(args[2:], env)
	if err != nil {
		return nil, fmt.Errorf("the `pinniped login static` arguments are unusable: %w", err)
	}
	return &Login{Static: c}, nil
}

// ExecCluster is the cluster kubectl hands the plugin, and so the one its
// cache keys name: {} unless the exec entry asks for the cluster's
// information. cfg (called only then) is the context's client config. An
// error (a certificate-authority file that cannot be read) is returned,
// never guessed around: a wrong cluster would name other cache entries.
func ExecCluster(exec *clientcmdapi.ExecConfig, cfg func() (*rest.Config, error)) (config.Cluster, error) {
	if !exec.ProvideClusterInfo {
		return config.Cluster{}, nil
	}
	c, err := cfg()
	if err != nil {
		return config.Cluster{}, err
	}
	if c.ExecProvider == nil {
		// ConfigToExecCluster reads the exec entry's extension from it.
		c = rest.CopyConfig(c)
		c.ExecProvider = exec
	}
	cluster, err := rest.ConfigToExecCluster(c)
	if err != nil {
		return config.Cluster{}, fmt.Errorf("the cluster information kubectl hands the plugin: %w", err)
	}
	return config.Cluster{Server: cluster.Server, CA: cluster.CertificateAuthorityData}, nil
}

// ErrNotPinniped: a context's user runs no `pinniped login` (another
// plugin, a certificate, a token, or nothing).
var ErrNotPinniped = errors.New("its user does not log in with pinniped")

// Context is a kubeconfig context's pinniped login, read as kubectl would
// run it: the login its exec entry asks for, and the cluster kubectl hands
// the plugin. What `pinniped logout` forgets is what this names.
type Context struct {
	// Name is the context's name (the current context's, when none was
	// asked for).
	Name    string
	Exec    *clientcmdapi.ExecConfig
	Login   *Login
	Cluster config.Cluster
}

// ReadContext reads context name of raw (its current context when name is
// empty). isFront says whether an exec command is the pinniped front (the
// binary the entry must run); cfg is a context's client config, for the
// cluster kubectl hands the plugin. The login is parsed in the plugin's
// environment (lookupEnv, then the entry's own variables), not validated.
func ReadContext(raw clientcmdapi.Config, name string, isFront func(string) bool, lookupEnv func(string) (string, bool),
	cfg func(context string) (*rest.Config, error),
) (*Context, error) {
	if name == "" {
		name = raw.CurrentContext
	}
	kctx := raw.Contexts[name]
	if kctx == nil {
		return nil, fmt.Errorf("kubeconfig has no context %q", name)
	}
	user := raw.AuthInfos[kctx.AuthInfo]
	if user == nil || user.Exec == nil || !isFront(user.Exec.Command) {
		return nil, fmt.Errorf("context %q: %w", name, ErrNotPinniped)
	}
	login, err := Parse(user.Exec, lookupEnv)
	if errors.Is(err, ErrNotALogin) {
		return nil, fmt.Errorf("context %q: %w", name, ErrNotPinniped)
	}
	if err != nil {
		return nil, fmt.Errorf("context %q: cannot read its pinniped login arguments: %w", name, err)
	}
	cluster, err := ExecCluster(user.Exec, func() (*rest.Config, error) { return cfg(name) })
	if err != nil {
		return nil, fmt.Errorf("context %q: %w", name, err)
	}
	return &Context{Name: name, Exec: user.Exec, Login: login, Cluster: cluster}, nil
}

// Secrets are the secrets a kubeconfig user entry may hold, for a report
// or an error that must never show them: its token,
// key and password, the secret-looking values of its exec arguments and
// environment, and of its auth-provider configuration (id-token,
// refresh-token, client-secret...).
func Secrets(u *clientcmdapi.AuthInfo) []string {
	out := []string{u.Token, string(u.ClientKeyData), u.Password}
	if u.Exec != nil {
		out = append(out, secretArgs(u.Exec.Args)...)
		for _, e := range u.Exec.Env {
			if secretName(e.Name) {
				out = append(out, e.Value)
			}
		}
	}
	if u.AuthProvider != nil {
		for k, v := range u.AuthProvider.Config {
			if secretName(k) {
				out = append(out, v)
			}
		}
	}
	return out
}

// secretArgs are the values of the exec arguments that may be secrets,
// read before any parsing: an argument that does not parse must not leak
// either. For a pinniped login ("login oidc|static", its command words) the
// flag table says what is a value and what is positional, and every
// positional counts. Another plugin's grammar is unknown, and its
// positionals are ordinary words (a cluster or region name) that would
// blank out the report: only the values of its secret-named flags count.
func secretArgs(args []string) []string {
	if len(args) > 0 && args[0] == "login" {
		args = args[1:]
		if len(args) > 0 && (args[0] == "oidc" || args[0] == "static") {
			args = args[1:]
		}
		return flagset.SecretArgs(args)
	}
	var out []string
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-") || !flagset.SecretFlag(name):
		case hasValue:
			out = append(out, value)
		case i+1 < len(args):
			out = append(out, args[i+1])
		}
	}
	return out
}

// secretName: an environment variable whose name says it holds a secret.
func secretName(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
