// Package loginflags defines the flags of `pinniped login oidc` and `login
// static`, flag-compatible with upstream Pinniped's, as one table: the
// cobra commands in the engine register it on their pflag set
// (loginflags/flagset), and the lean front binary parses it with Parse,
// without linking pflag. Both therefore read the same flags with the same
// defaults, and compute the same cache keys from them.
package loginflags

import (
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

// concierge is how many flags Concierge has.
const concierge = 7

// Concierge are the --enable-concierge and --concierge-* flags.
type Concierge struct {
	Enabled      bool
	Endpoint     string
	CABundleData string
	Suffix       string
	AuthType     string
	AuthName     string
	// Namespace is what upstream v0.3 to v0.5 wrote into kubeconfigs;
	// accepted and ignored, so such kubeconfigs keep working.
	Namespace string
}

// Flags lists the flags.
func (c *Concierge) Flags() []Flag { return c.appendFlags(nil) }

func (c *Concierge) appendFlags(flags []Flag) []Flag {
	return append(flags,
		Flag{"enable-concierge", &c.Enabled, false, "trade the token for a cluster credential at the pinniped agent", false},
		Flag{"concierge-endpoint", &c.Endpoint, "", "https URL of the agent's API (the cluster's API server or the impersonation proxy)", false},
		Flag{"concierge-ca-bundle-data", &c.CABundleData, "", "base64 PEM CA bundle of --concierge-endpoint", false},
		Flag{"concierge-api-group-suffix", &c.Suffix, groupsuffix.Default, "API group suffix of the agent's APIs", false},
		Flag{"concierge-authenticator-type", &c.AuthType, "", "jwt or webhook", false},
		Flag{"concierge-authenticator-name", &c.AuthName, "", "name of the JWTAuthenticator or WebhookAuthenticator", false},
		Flag{"concierge-namespace", &c.Namespace, "", "deprecated upstream flag; ignored (the agent is found through its API)", true},
	)
}

// CABundle decodes --concierge-ca-bundle-data.
func (c *Concierge) CABundle() ([]byte, error) {
	ca, err := base64.StdEncoding.DecodeString(c.CABundleData)
	if err != nil {
		return nil, fmt.Errorf("--concierge-ca-bundle-data is not base64: %w", err)
	}
	return ca, nil
}

// OIDC are the flags of `pinniped login oidc`.
type OIDC struct {
	Issuer, ClientID         string
	Scopes                   []string
	ListenPort               int
	SkipBrowser, SkipListen  bool
	CABundlePaths            []string
	CABundleData             []string
	RequestAudience          string
	CredentialCache          string
	SessionCache             string
	Flow                     string
	UpstreamName, UpstreamTy string
	UpstreamFlow             string
	Timeout                  time.Duration
	Concierge                Concierge
}

// cacheUsage documents --credential-cache, where we differ from upstream.
const cacheUsage = `where to cache: keyring (default; files when no keyring works), file, none (nothing at all), a file path (upstream's form; files beside it), or "" (no cluster credentials, sessions still cached, as upstream)`

// Environment variables a login reads, as upstream Pinniped names them.
const (
	EnvUsername = "PINNIPED_USERNAME"
	EnvPassword = "PINNIPED_PASSWORD" //nolint:gosec // a variable's name, not a credential
	// EnvUpstreamFlow overrides --upstream-identity-provider-flow whenever set.
	EnvUpstreamFlow = "PINNIPED_UPSTREAM_IDENTITY_PROVIDER_FLOW"
)

// Config is the login these flags ask for, in this environment: CA bundles
// read and decoded, the variables applied (not yet validated).
func (o *OIDC) Config(getenv func(string) string) (*config.OIDC, error) {
	ca, err := o.IssuerCABundle()
	if err != nil {
		return nil, err
	}
	conc, err := o.Concierge.config()
	if err != nil {
		return nil, err
	}
	c := &config.OIDC{
		Issuer: o.Issuer, ClientID: o.ClientID, Scopes: o.Scopes, CABundle: ca, RequestAudience: o.RequestAudience,
		Flow:       config.Flow(o.Flow),
		Upstream:   config.Upstream{Name: o.UpstreamName, Type: o.UpstreamTy, Flow: o.UpstreamFlow},
		ListenPort: o.ListenPort, SkipBrowser: o.SkipBrowser, SkipListen: o.SkipListen,
		Concierge: conc, CredentialCache: o.CredentialCache, SessionCache: o.SessionCache, Timeout: o.Timeout,
		Username: getenv(EnvUsername), Password: getenv(EnvPassword),
	}
	// The variable wins over the flag whenever set, as upstream.
	if v := getenv(EnvUpstreamFlow); v != "" {
		c.Upstream.Flow = v
	}
	return c, nil
}

func (c *Concierge) config() (*config.Concierge, error) {
	if !c.Enabled {
		return nil, nil
	}
	ca, err := c.CABundle()
	if err != nil {
		return nil, err
	}
	return &config.Concierge{Endpoint: c.Endpoint, APIGroupSuffix: c.Suffix,
		AuthenticatorType: c.AuthType, AuthenticatorName: c.AuthName, CABundle: ca}, nil
}

// Config is the static login these flags ask for: the token from --token
// or the variable --token-env names (not yet validated).
func (s *Static) Config(lookupEnv func(string) (string, bool)) (*config.Static, error) {
	token, err := s.ResolveToken(lookupEnv)
	if err != nil {
		return nil, err
	}
	conc, err := s.Concierge.config()
	if err != nil {
		return nil, err
	}
	return &config.Static{Token: token, TokenEnv: s.TokenEnv, Concierge: conc, CredentialCache: s.CredentialCache}, nil
}

// Flags lists the flags.
func (o *OIDC) Flags() []Flag {
	// One allocation: the front parses this table on every kubectl call.
	return o.Concierge.appendFlags(append(make([]Flag, 0, 17+concierge),
		Flag{"issuer", &o.Issuer, "", "OIDC issuer URL (https)", false},
		Flag{"client-id", &o.ClientID, "pinniped-cli", "OIDC client ID", false},
		Flag{"scopes", &o.Scopes, slices.Clone(config.DefaultScopes), "OIDC scopes to request", false},
		Flag{"listen-port", &o.ListenPort, 0, "port of the 127.0.0.1 callback listener (default: any free port)", false},
		Flag{"skip-browser", &o.SkipBrowser, false, "print the login link instead of opening a browser", false},
		Flag{"skip-listen", &o.SkipListen, false, "no callback listener: paste the code instead", true},
		Flag{"ca-bundle", &o.CABundlePaths, []string(nil), "PEM file of CAs for the issuer (repeatable)", false},
		Flag{"ca-bundle-data", &o.CABundleData, []string(nil), "base64 PEM CA bundle for the issuer (repeatable)", false},
		Flag{"request-audience", &o.RequestAudience, "", "trade the ID token for one with this audience (RFC 8693)", false},
		Flag{"credential-cache", &o.CredentialCache, "keyring", cacheUsage, false},
		Flag{"session-cache", &o.SessionCache, "", "accepted for upstream compatibility; sessions live with --credential-cache", true},
		Flag{"flow", &o.Flow, "", "interactive login method: browser, device or password (default: browser with a paste prompt)", false},
		Flag{"upstream-identity-provider-name", &o.UpstreamName, "", "upstream identity provider at a Pinniped Supervisor", false},
		Flag{"upstream-identity-provider-type", &o.UpstreamTy, "oidc", "its type (oidc, ldap, activedirectory, github)", false},
		Flag{"upstream-identity-provider-flow", &o.UpstreamFlow, "", "browser_authcode or cli_password", false},
		Flag{"timeout", &o.Timeout, 15 * time.Minute, "give up on an interactive login after this long", false},
		Flag{"debug-session-cache", new(bool), false, "accepted for upstream compatibility; ignored", true},
	))
}

// IssuerCABundle reads --ca-bundle files and decodes --ca-bundle-data.
func (o *OIDC) IssuerCABundle() ([]byte, error) {
	var out []byte
	for _, p := range o.CABundlePaths {
		b, err := os.ReadFile(p) //nolint:gosec // the user names the file
		if err != nil {
			return nil, fmt.Errorf("--ca-bundle: %w", err)
		}
		out = joinPEM(out, b)
	}
	for _, d := range o.CABundleData {
		b, err := base64.StdEncoding.DecodeString(d)
		if err != nil {
			return nil, fmt.Errorf("--ca-bundle-data is not base64: %w", err)
		}
		out = joinPEM(out, b)
	}
	return out, nil
}

// joinPEM appends bundle b, on a line of its own: a bundle's bytes stay as
// they were (they are part of cache keys, and a kubeconfig's bundle must
// read back as written).
func joinPEM(out, b []byte) []byte {
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, b...)
}

// Static are the flags of `pinniped login static`.
type Static struct {
	Token, TokenEnv string
	CredentialCache string
	Concierge       Concierge
}

// Flags lists the flags.
func (s *Static) Flags() []Flag {
	return s.Concierge.appendFlags(append(make([]Flag, 0, 3+concierge),
		Flag{"token", &s.Token, "", "the static token", false},
		Flag{"token-env", &s.TokenEnv, "", "name of an environment variable holding the token", false},
		Flag{"credential-cache", &s.CredentialCache, "keyring", cacheUsage, false},
	))
}

// ResolveToken returns the token from --token or the variable --token-env names.
// As upstream, --token-env wins over --token when both are given.
func (s *Static) ResolveToken(lookupEnv func(string) (string, bool)) (string, error) {
	if s.TokenEnv != "" {
		v, ok := lookupEnv(s.TokenEnv)
		if !ok {
			return "", fmt.Errorf("--token-env %s: that environment variable is not set", s.TokenEnv)
		}
		if v == "" {
			return "", fmt.Errorf("--token-env %s: that environment variable is empty", s.TokenEnv)
		}
		return v, nil
	}
	return s.Token, nil
}
