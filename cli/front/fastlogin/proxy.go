package fastlogin

import (
	"strings"

	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
)

// proxyCredential answers `proxy credential --state-dir DIR`, the exec
// entry of pinniped proxy's kubeconfig, which kubectl runs as often as a
// login: the running proxy's local secret, without expiry. Anything else
// (the proxy not running, another spelling of the arguments) is the
// engine's to answer and explain.
func proxyCredential(args []string) *execcred.Status {
	var dir string
	switch {
	case len(args) == 2 && args[0] == "--state-dir":
		dir = args[1]
	case len(args) == 1 && strings.HasPrefix(args[0], "--state-dir="):
		dir = strings.TrimPrefix(args[0], "--state-dir=")
	default:
		return nil
	}
	if !strings.HasPrefix(dir, "/") {
		return nil // the engine checks the path (and knows Windows ones)
	}
	secret, err := state.RunningSecret(dir)
	if err != nil {
		return nil
	}
	return &execcred.Status{Token: string(secret)}
}
