// Package fastlogin answers kubectl's most frequent question, `pinniped login
// oidc|static` with a valid cached credential (or `pinniped proxy credential`
// with a running proxy's secret), inside the lean front binary.
// kubectl runs the plugin before nearly every request, and Go runs the init
// of every package a binary links before main: the engine's login flows
// (OIDC, HTTP/2, the TUI, apimachinery) cost milliseconds of start-up that a
// cache hit does not need. Everything here links only the standard library
// and the cache packages; even pflag is left to the engine (see
// loginflags.Parse).
//
// Anything it cannot answer with certainty (a miss, an expired entry, a bad
// flag, --help, an unreadable cache) it leaves to the engine, which decides
// again from scratch and prints the errors: Answer writes nothing then.
package fastlogin

import (
	"context"
	"io"
	"time"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/credstore"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags"
)

// Env is the process environment.
type Env struct {
	Getenv    func(string) string
	LookupEnv func(string) (string, bool)
}

// timeout bounds the cache read; the keyring store has its own, shorter one.
const timeout = 5 * time.Second

// Answer prints the ExecCredential for args (the command line after
// "pinniped") and reports true when it could; false means the engine must run.
func Answer(args []string, env Env, stdout io.Writer) bool {
	if len(args) < 2 {
		return false
	}
	// The commands answered here, by their first two words.
	switch args[0] + " " + args[1] {
	case "login oidc", "login static", "proxy credential":
	default:
		return false
	}
	if loginflags.Debug(env.Getenv) {
		return false // the engine says what it finds, and why
	}
	exec, err := execcred.ParseRequest(env.Getenv(execcred.EnvVar))
	if err != nil {
		return false
	}
	var status *execcred.Status
	switch args[1] {
	case "credential":
		status = proxyCredential(args[2:])
	case "oidc":
		var o loginflags.OIDC
		if !loginflags.Parse(o.Flags(), args[2:]) {
			return false
		}
		status = oidc(&o, exec, env)
	case "static":
		var s loginflags.Static
		if !loginflags.Parse(s.Flags(), args[2:]) {
			return false
		}
		status = static(&s, exec, env)
	}
	if status == nil {
		return false
	}
	return execcred.Write(stdout, exec.APIVersion, *status) == nil
}

func oidc(o *loginflags.OIDC, exec *execcred.Request, env Env) *execcred.Status {
	c, err := o.Config(env.Getenv)
	// What the engine would refuse, however valid a cached credential is,
	// it must also explain.
	if err != nil || c.Validate() != nil {
		return nil
	}
	return cached(env, c.CredentialCache, c.CredentialKey(exec.KeyCluster()))
}

func static(s *loginflags.Static, exec *execcred.Request, env Env) *execcred.Status {
	c, err := s.Config(env.LookupEnv)
	if err != nil || c.Validate() != nil {
		return nil
	}
	if c.Concierge == nil {
		// The token is the credential: nothing to cache or look up.
		return &execcred.Status{Token: c.Token}
	}
	return cached(env, c.CredentialCache, c.CredentialKey(exec.KeyCluster()))
}

func cached(env Env, mode, key string) *execcred.Status {
	// Warnings are the engine's to print; a read never writes a file.
	store, err := credstore.Places{Getenv: env.Getenv}.Open(mode, io.Discard)
	if err != nil || store == nil {
		return nil
	}
	ctx := context.Background()
	if mode != "file" {
		// A file read needs no timer (the first one costs start-up time).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cred, ok, err := (&credcache.Cache{Now: time.Now, Store: store}).Get(ctx, key)
	if err != nil || !ok {
		return nil
	}
	s := execcred.StatusOf(*cred, time.Now())
	return &s
}
