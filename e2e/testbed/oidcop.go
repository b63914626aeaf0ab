package testbed

// OIDCOPUser is a password user of the bed's second OpenID provider (e2e/tools/oidcop).
type OIDCOPUser struct {
	ID       string
	Username string // what its login form asks for
	Password string
	Email    string
}

// OIDCOPClientID is the second provider's public native client: no secret, PKCE, refresh
// tokens with offline_access (rotated on every refresh), revocation and end_session, and any
// loopback redirect http://127.0.0.1:<port>/callback.
const OIDCOPClientID = "pinniped-cli"

// OIDCOPUsers are its users. Test-only credentials; the provider listens only inside the
// bed's network namespace.
var OIDCOPUsers = []OIDCOPUser{
	{ID: "2001", Username: "alice", Password: "alice-password", Email: "alice@example.com"},
}
