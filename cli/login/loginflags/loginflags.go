// Package loginflags defines the flags of `pinniped login oidc` and `login
// static`, flag-compatible with upstream Pinniped's, as one table: the
// cobra commands in the engine register it on their pflag set
// (loginflags/flagset), and the lean front binary parses it with Parse,
// without linking pflag. Both therefore read the same flags with the same
// defaults, and compute the same cache keys from them. The flags write
// straight into the login model (package config); only what arrives in
// another form on a command line (CA bundles as files or base64, the
// Concierge's on/off switch) is kept here until Config turns it into the
// model.
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

// Concierge are the --enable-concierge and --concierge-* flags. Those
// that are the model's own fields write straight into Login.
type Concierge struct {
	Enabled      bool
	Login        config.Concierge
	CABundleData string
	// Namespace is what upstream v0.3 to v0.5 wrote into kubeconfigs;
	// accepted and ignored, so such kubeconfigs keep working.
	Namespace string
}

// Flags lists the flags.
func (c *Concierge) Flags() []Flag { return c.appendFlags(nil) }

func (c *Concierge) appendFlags(flags []Flag) []Flag {
	return append(flags,
		Flag{"enable-concierge", &c.Enabled, false, "trade the token for a cluster credential at the pinniped agent", false},
		Flag{"concierge-endpoint", &c.Login.Endpoint, "", "https URL of the agent's API (the cluster's API server or the impersonation proxy)", false},
		Flag{"concierge-ca-bundle-data", &c.CABundleData, "", "base64 PEM CA bundle of --concierge-endpoint", false},
		Flag{"concierge-api-group-suffix", &c.Login.APIGroupSuffix, groupsuffix.Default, "API group suffix of the agent's APIs", false},
		Flag{"concierge-authenticator-type", &c.Login.AuthenticatorType, "", "jwt or webhook", false},
		Flag{"concierge-authenticator-name", &c.Login.AuthenticatorName, "", "name of the JWTAuthenticator or WebhookAuthenticator", false},
		Flag{"concierge-namespace", &c.Namespace, "", "deprecated upstream flag; ignored (the agent is found through its API)", true},
	)
}

// OIDC are the flags of `pinniped login oidc`. Those that are the model's
// own fields write straight into Login; the rest are how the model's CA
// bundles and Concierge arrive on a command line.
type OIDC struct {
	Login         config.OIDC
	CABundlePaths []string
	CABundleData  []string
	Concierge     Concierge
}

// cacheUsage documents --credential-cache, where we differ from upstream.
const cacheUsage = `where to cache: keyring (default; files when no keyring works), file, none (nothing at all), a file path (upstream's form; files beside it), or "" (no cluster credentials, sessions still cached, as upstream)`

// Environment variables a login reads, as upstream Pinniped names them.
const (
	EnvUsername = "PINNIPED_USERNAME"
	EnvPassword = "PINNIPED_PASSWORD" //nolint:gosec // a variable's name, not a credential
	// EnvUpstreamFlow overrides --upstream-identity-provider-flow whenever set.
	EnvUpstreamFlow = "PINNIPED_UPSTREAM_IDENTITY_PROVIDER_FLOW"
	// EnvDebug is read by Debug alone.
	EnvDebug = "PINNIPED_DEBUG"
)

// Debug is PINNIPED_DEBUG=true, upstream's spelling and the only value
// that counts, everywhere pinniped reads it: every step, warning and
// decision of a login on stderr, the front leaving even a cached login to
// the engine, and a bug's panic re-raised with its trace.
func Debug(getenv func(string) string) bool { return getenv(EnvDebug) == "true" }

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
	c := o.Login
	c.CABundle, c.Concierge = ca, conc
	c.Username, c.Password = getenv(EnvUsername), getenv(EnvPassword)
	// The variable wins over the flag whenever set, as upstream.
	if v := getenv(EnvUpstreamFlow); v != "" {
		c.Upstream.Flow = v
	}
	return &c, nil
}

func (c *Concierge) config() (*config.Concierge, error) {
	if !c.Enabled {
		return nil, nil
	}
	ca, err := base64.StdEncoding.DecodeString(c.CABundleData)
	if err != nil {
		return nil, fmt.Errorf("--concierge-ca-bundle-data is not base64: %w", err)
	}
	conc := c.Login
	conc.CABundle = ca
	return &conc, nil
}

// Config is the static login these flags ask for: the token from --token
// or the variable --token-env names (not yet validated).
func (s *Static) Config(lookupEnv func(string) (string, bool)) (*config.Static, error) {
	token, err := s.resolveToken(lookupEnv)
	if err != nil {
		return nil, err
	}
	conc, err := s.Concierge.config()
	if err != nil {
		return nil, err
	}
	c := s.Login
	c.Token, c.Concierge = token, conc
	return &c, nil
}

// Flags lists the flags.
func (o *OIDC) Flags() []Flag {
	c := &o.Login
	// One allocation: the front parses this table on every kubectl call.
	return o.Concierge.appendFlags(append(make([]Flag, 0, 20+concierge),
		Flag{"issuer", &c.Issuer, "", "OIDC issuer URL (https)", false},
		Flag{"client-id", &c.ClientID, "pinniped-cli", "OIDC client ID", false},
		Flag{"client-secret", &c.ClientSecret, "", "client secret, for providers that want one even from an installed app (Google); it is not kept secret there, and PKCE still applies", false},
		Flag{"authorize-param", &c.AuthorizeParams, []string(nil), "extra name=value parameter of the authorization (and device) request, e.g. prompt=select_account (repeatable; a value cannot hold a comma)", false},
		Flag{"present-token", &c.PresentToken, "", "the token shown to the cluster: id (default) or access (an access token that is a JWT)", false},
		Flag{"scopes", &c.Scopes, slices.Clone(config.DefaultScopes), "OIDC scopes to request", false},
		Flag{"listen-port", &c.ListenPort, 0, "port of the 127.0.0.1 callback listener (default: any free port)", false},
		Flag{"skip-browser", &c.SkipBrowser, false, "print the login link instead of opening a browser", false},
		Flag{"skip-listen", &c.SkipListen, false, "no callback listener: paste the code instead", true},
		Flag{"ca-bundle", &o.CABundlePaths, []string(nil), "PEM file of CAs for the issuer (repeatable)", false},
		Flag{"ca-bundle-data", &o.CABundleData, []string(nil), "base64 PEM CA bundle for the issuer (repeatable)", false},
		Flag{"request-audience", &c.RequestAudience, "", "trade the ID token for one with this audience (RFC 8693)", false},
		Flag{"credential-cache", &c.CredentialCache, "keyring", cacheUsage, false},
		Flag{"session-cache", &c.SessionCache, "", "accepted for upstream compatibility; sessions live with --credential-cache", true},
		Flag{"flow", (*string)(&c.Flow), "", "interactive login method: browser, device or password (default: browser with a paste prompt)", false},
		Flag{"upstream-identity-provider-name", &c.Upstream.Name, "", "upstream identity provider at a Pinniped Supervisor", false},
		Flag{"upstream-identity-provider-type", &c.Upstream.Type, "oidc", "its type (oidc, ldap, activedirectory, github)", false},
		Flag{"upstream-identity-provider-flow", &c.Upstream.Flow, "", "browser_authcode or cli_password", false},
		Flag{"timeout", &c.Timeout, 15 * time.Minute, "give up on an interactive login after this long", false},
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
		if !config.HasCertificate(b) {
			return nil, fmt.Errorf("--ca-bundle %s holds no PEM certificate (a file starting with -----BEGIN CERTIFICATE-----)", p)
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

// Static are the flags of `pinniped login static`. Those that are the
// model's own fields write straight into Login; the token itself is
// resolved from them and the environment.
type Static struct {
	Login     config.Static
	Concierge Concierge
}

// Flags lists the flags.
func (s *Static) Flags() []Flag {
	return s.Concierge.appendFlags(append(make([]Flag, 0, 3+concierge),
		Flag{"token", &s.Login.Token, "", "the static token", false},
		Flag{"token-env", &s.Login.TokenEnv, "", "name of an environment variable holding the token", false},
		Flag{"credential-cache", &s.Login.CredentialCache, "keyring", cacheUsage, false},
	))
}

// resolveToken returns the token from --token or the variable --token-env names.
// As upstream, --token-env wins over --token when both are given.
func (s *Static) resolveToken(lookupEnv func(string) (string, bool)) (string, error) {
	if env := s.Login.TokenEnv; env != "" {
		v, ok := lookupEnv(env)
		if !ok {
			return "", fmt.Errorf("--token-env %s: that environment variable is not set", env)
		}
		if v == "" {
			return "", fmt.Errorf("--token-env %s: that environment variable is empty", env)
		}
		return v, nil
	}
	return s.Login.Token, nil
}
