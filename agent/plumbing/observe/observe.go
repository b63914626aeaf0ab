// Package observe is what the agent's request paths tell the rest of the
// agent about each request: an exchange, a request through the
// impersonation proxy. The paths (package exchange, package impersonator)
// fill these in; metrics and the audit log read them. A leaf, so the
// metrics depend on these words only, and not on the request paths.
package observe

import "time"

// Exchange is what one TokenCredentialRequest did, told by the exchange
// handler (of the aggregated API or the impersonation proxy).
type Exchange struct {
	Success       bool
	Authenticator string
	// TokenHash is a truncated SHA-256 of the token: enough to correlate
	// log lines about the same token, useless for replay.
	TokenHash string
	Username  string
	Groups    []string
	// CredentialID is the issued credential's credential-id extra
	// ("JTI=<jti>"), which the API server's audit log shows for every
	// request made with it; empty for certificates.
	CredentialID string
	Reason       string // why it failed; never sent to the caller
	Duration     time.Duration
}

// AuthMethod is how a client of the impersonation proxy proved who it is;
// its values are metric labels.
type AuthMethod string

// Authentication methods, as reported to Observe.
const (
	MethodCertificate AuthMethod = "certificate"
	MethodToken       AuthMethod = "token"
	MethodProxyToken  AuthMethod = "proxy-token" // a token the agent issued for this proxy
	MethodAnonymous   AuthMethod = "anonymous"
	MethodRefused     AuthMethod = "refused"
)

// ProxyRequest is one request through the impersonation proxy.
type ProxyRequest struct {
	Method   AuthMethod
	Verb     string
	Path     string
	Code     int
	Username string
	// ImpersonatedUser is set when the client asked to act as someone else
	// and was allowed to.
	ImpersonatedUser string
	// Upgrade is the protocol an upgrade asked for (SPDY/3.1, websocket),
	// "" for plain requests.
	Upgrade  string
	Duration time.Duration
}
