// Package config is the one model of what `pinniped login` is asked to do:
// an OIDC login (with or without the agent's token exchange) or a static
// token. The lean front binary and the engine both build it from the same
// flags (package loginflags), validate it with the same Validate, and key
// their caches with the same CredentialKey and SessionKey, so a credential
// the engine cached is exactly the one the front finds. `pinniped get
// kubeconfig` writes a login's flags with Args, so a kubeconfig round-trips.
//
// It links only the standard library, the cache's JSON writer and the
// wire contract's https check: the front runs before nearly every kubectl
// request.
package config

import (
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
)

// Flow is how an OIDC login asks the person (or the environment) for
// proof of identity.
type Flow string

// Login flows.
const (
	FlowAuto     Flow = ""         // browser, plus a paste prompt when a person is at a terminal
	FlowBrowser  Flow = "browser"  // browser only
	FlowDevice   Flow = "device"   // device code
	FlowPassword Flow = "password" // password from PINNIPED_USERNAME/PINNIPED_PASSWORD
)

// Flows are the accepted --flow values.
var Flows = []Flow{FlowAuto, FlowBrowser, FlowDevice, FlowPassword}

// Upstream flows of a Pinniped Supervisor.
const (
	UpstreamFlowBrowser  = "browser_authcode"
	UpstreamFlowPassword = "cli_password"
)

// Scopes a Pinniped Supervisor defines: the token exchange needs
// ScopeRequestAudience, and the ID token carries the username and groups
// claims only when asked for.
const (
	ScopeRequestAudience = "pinniped:request-audience"
	ScopeUsername        = "username"
	ScopeGroups          = "groups"
)

// DefaultScopes are upstream Pinniped's defaults plus email and profile,
// which plain OIDC issuers need for the email claim and a Supervisor
// accepts. A login asks an issuer that is not a Supervisor only for those
// it lists as supported.
var DefaultScopes = []string{"offline_access", "openid", ScopeRequestAudience, ScopeUsername, ScopeGroups, "email", "profile"}

// OIDC is `pinniped login oidc`.
type OIDC struct {
	Issuer   string
	ClientID string
	// ClientSecret is for providers that want one even from an installed
	// application (Google's "Desktop app" clients): there it is not a
	// secret, the provider says so, and PKCE still protects the code.
	ClientSecret string
	// AuthorizeParams are extra "name=value" parameters of the browser
	// login's authorization request and the device flow's (prompt,
	// domain_hint, an Auth0 audience); none may replace one the login
	// itself sets.
	AuthorizeParams []string
	// PresentToken is the token shown to the cluster: "" or "id" for the
	// ID token, "access" for the access token, where a provider puts the
	// claims the cluster maps in an access token that is a JWT.
	PresentToken    string
	Scopes          []string
	CABundle        []byte // PEM, the issuer's; empty means system roots
	RequestAudience string
	Flow            Flow
	// Upstream is the identity provider behind a Pinniped Supervisor: one
	// Supervisor can log the same person in as different users through
	// different providers.
	Upstream    Upstream
	ListenPort  int
	SkipBrowser bool
	SkipListen  bool
	// Concierge is nil when the ID token itself is the credential.
	Concierge *Concierge
	// CredentialCache is keyring, file, none, or a file path (upstream's form).
	CredentialCache string
	// SessionCache is accepted for upstream compatibility and written back
	// to kubeconfigs; sessions live with CredentialCache.
	SessionCache string
	Timeout      time.Duration

	// Username and Password come from the environment, never from flags
	// or kubeconfigs. The password is in no key.
	Username, Password string
}

// Tokens a login can present to the cluster (--present-token).
const (
	PresentID     = "id"
	PresentAccess = "access"
)

// reservedAuthorizeParams are set by the login; PKCE, state and nonce are
// what keep a stolen code or a forged callback from becoming a login.
// request and request_uri carry a request object whose values a provider
// takes over the query's. Compared without case: some servers fold it.
var reservedAuthorizeParams = []string{"client_id", "client_secret", "redirect_uri", "response_type", "response_mode", "scope", "state",
	"nonce", "code_challenge", "code_challenge_method", "access_type", "request", "request_uri", "pinniped_idp_name", "pinniped_idp_type"}

// IsReservedAuthorizeParam reports whether the login sets name itself.
func IsReservedAuthorizeParam(name string) bool {
	return slices.Contains(reservedAuthorizeParams, strings.ToLower(name))
}

// PresentsAccessToken reports whether the cluster is shown the access token.
func (c *OIDC) PresentsAccessToken() bool { return c.PresentToken == PresentAccess }

// ExchangesToken reports whether the login trades its tokens at the issuer
// (RFC 8693) for RequestAudience, so that the cluster is shown a token of
// that audience, not the ID token (whose audience is the client ID).
func (c *OIDC) ExchangesToken() bool {
	return c.RequestAudience != "" && c.RequestAudience != c.ClientID
}

// AuthorizeParam splits the AuthorizeParams (Validate has checked them).
func (c *OIDC) AuthorizeParam(i int) (name, value string) {
	name, value, _ = strings.Cut(c.AuthorizeParams[i], "=")
	return name, value
}

// Upstream names an identity provider of a Pinniped Supervisor.
type Upstream struct {
	Name, Type, Flow string
}

// Concierge is where a token is exchanged for a cluster credential.
type Concierge struct {
	Endpoint          string // https URL of the API server or the impersonation proxy
	CABundle          []byte // PEM
	APIGroupSuffix    string
	AuthenticatorType string // jwt or webhook
	AuthenticatorName string
}

// Static is `pinniped login static`.
type Static struct {
	// Token is the token itself; TokenEnv names the variable it came
	// from, which is what a kubeconfig should say.
	Token, TokenEnv string
	Concierge       *Concierge
	CredentialCache string
}

// PasswordLogin reports whether the login was told to use a password:
// --flow=password, or the Supervisor's cli_password flow. The variables
// PINNIPED_USERNAME and PINNIPED_PASSWORD alone never turn a browser login
// into a password one (as upstream).
func (c *OIDC) PasswordLogin() bool {
	return c.Flow == FlowPassword || c.Upstream.Flow == UpstreamFlowPassword
}

// MayUsePassword reports whether the login may end up using a password:
// told to, or a Supervisor's identity provider named without a flow, whose
// default flow the Supervisor decides at login time (whatever --flow
// says: only --upstream-identity-provider-flow picks it).
func (c *OIDC) MayUsePassword() bool {
	return c.PasswordLogin() || (c.Upstream.Name != "" && c.Upstream.Flow == "")
}

// Validate checks everything that needs no network.
func (c *OIDC) Validate() error {
	var errs []error
	if c.Issuer == "" {
		errs = append(errs, errors.New("--issuer is required"))
	} else if err := httpsurl.Check("--issuer", c.Issuer); err != nil {
		errs = append(errs, err)
	}
	if !slices.Contains(Flows, c.Flow) {
		errs = append(errs, fmt.Errorf("--flow %q: use browser, device or password", c.Flow))
	}
	seen := map[string]bool{}
	for _, p := range c.AuthorizeParams {
		name, _, ok := strings.Cut(p, "=")
		lower := strings.ToLower(name)
		switch {
		case !ok || name == "":
			errs = append(errs, fmt.Errorf("--authorize-param %q: write name=value", p))
		case strings.ContainsAny(p, ",\"\r\n"):
			// A kubeconfig's flags are read as a comma-separated list.
			errs = append(errs, fmt.Errorf("--authorize-param %q: a parameter cannot hold a comma, a quote or a line break", p))
		case slices.Contains(reservedAuthorizeParams, lower):
			errs = append(errs, fmt.Errorf("--authorize-param %q: the login sets that parameter itself, and its protection against a forged or stolen login depends on it", name))
		case seen[lower]:
			errs = append(errs, fmt.Errorf("--authorize-param %q: given twice; give it once", name))
		}
		seen[lower] = true
	}
	switch c.PresentToken {
	case "", PresentID:
	case PresentAccess:
		if c.ExchangesToken() {
			errs = append(errs, errors.New("--present-token=access and --request-audience: the token exchange already decides which token the cluster sees; leave one out"))
		}
	default:
		errs = append(errs, fmt.Errorf("--present-token %q: use id or access", c.PresentToken))
	}
	if len(c.CABundle) > 0 && !HasCertificate(c.CABundle) {
		errs = append(errs, errors.New("the issuer's CA bundle (--ca-bundle, --ca-bundle-data) holds no PEM certificate"))
	}
	if c.Concierge != nil {
		errs = append(errs, c.Concierge.Validate())
	}
	return errors.Join(errs...)
}

// Validate checks the static login.
func (c *Static) Validate() error {
	var errs []error
	if c.Token == "" {
		errs = append(errs, errors.New("no token: pass --token, or --token-env naming a set environment variable"))
	}
	if c.Concierge != nil {
		errs = append(errs, c.Concierge.Validate())
	}
	return errors.Join(errs...)
}

// Validate checks where the token would be sent.
func (c *Concierge) Validate() error {
	var errs []error
	if err := httpsurl.Check("--concierge-endpoint", c.Endpoint); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Kind(); err != nil {
		errs = append(errs, err)
	}
	if c.AuthenticatorName == "" {
		errs = append(errs, errors.New("--concierge-authenticator-name is required"))
	}
	if len(c.CABundle) > 0 && !HasCertificate(c.CABundle) {
		errs = append(errs, errors.New("--concierge-ca-bundle-data holds no PEM certificate"))
	}
	if c.APIGroupSuffix != "" {
		if err := groupsuffix.Validate(c.APIGroupSuffix); err != nil {
			errs = append(errs, fmt.Errorf("--concierge-api-group-suffix: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Kind is the authenticator's resource kind.
func (c *Concierge) Kind() (string, error) {
	switch strings.ToLower(c.AuthenticatorType) {
	case "jwt":
		return "JWTAuthenticator", nil
	case "webhook":
		return "WebhookAuthenticator", nil
	}
	return "", fmt.Errorf("--concierge-authenticator-type %q: use jwt or webhook", c.AuthenticatorType)
}

// Suffix is the agent's API group suffix (default pinniped.dev).
func (c *Concierge) Suffix() string {
	return groupsuffix.OrDefault(c.APIGroupSuffix)
}

// HasCertificate reports whether bundle holds at least one PEM certificate:
// a cheap check (no certificate parsing, which the front must not pay
// for); the TLS client parses the bundle for real.
func HasCertificate(bundle []byte) bool {
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return false
		}
		if block.Type == "CERTIFICATE" {
			return true
		}
	}
}
