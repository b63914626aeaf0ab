// Package proxycredential names what the impersonation proxy's own
// TokenCredentialRequest returns (the agent's --proxy-credential), shared by
// the agent, which acts on it, and `pinniped install`, which renders it and
// must refuse what the agent would refuse. Standard library only: the CLI
// links it.
package proxycredential

import "fmt"

const (
	// Token is a bearer token the agent signs, valid only at this
	// installation's proxy. A client holding a new token keeps its
	// connections; client-go closes them all for a new client certificate.
	Token = "token"
	// Certificate is a client certificate from the proxy's signer, for
	// clients that need one, and the first step of a downgrade to an agent
	// without proxy tokens.
	Certificate = "certificate"
	// Default is what an agent without the flag returns.
	Default = Token
)

// Check refuses anything but Token and Certificate.
func Check(v string) error {
	if v != Token && v != Certificate {
		return fmt.Errorf("%q is neither %s nor %s", v, Token, Certificate)
	}
	return nil
}
