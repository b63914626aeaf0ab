package logincmd

import (
	"io"

	"github.com/pinniped-kit/pinniped/cli/execcred"
	"github.com/pinniped-kit/pinniped/cli/login"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

// ParseOIDCArgs reads the arguments a kubeconfig passes to `pinniped login
// oidc` (those after "oidc") with the same flag definitions, so logout finds
// exactly the cache entries a login would use. It returns the request and
// the --credential-cache mode.
func ParseOIDCArgs(args []string, exec *execcred.Request) (*config.OIDC, string, error) {
	cmd, o := oidcCommand(Streams{Out: io.Discard, ErrOut: io.Discard})
	if err := cmd.ParseFlags(args); err != nil {
		return nil, "", err
	}
	if err := o.complete(exec); err != nil {
		return nil, "", err
	}
	return o.config, o.CredentialCache, nil
}

// NewEngine opens the cache a login with this --credential-cache uses.
func NewEngine(s Streams, cacheMode string) (*login.Engine, error) {
	return newEngine(s, cacheMode, false)
}
