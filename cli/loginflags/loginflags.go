// Package loginflags defines the flags of `pinniped login oidc` and `login
// static`, flag-compatible with upstream Pinniped's. It only registers them
// on a pflag.FlagSet, so the cobra commands (in the engine) and the lean
// front binary (answering kubectl from the cache) parse exactly the same
// flags, and compute the same cache keys from them.
package loginflags

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
)

// Concierge are the --enable-concierge and --concierge-* flags.
type Concierge struct {
	Enabled      bool
	Endpoint     string
	CABundleData string
	Suffix       string
	AuthType     string
	AuthName     string
}

// AddFlags registers the flags.
func (c *Concierge) AddFlags(f *pflag.FlagSet) {
	f.BoolVar(&c.Enabled, "enable-concierge", false, "trade the token for a cluster credential at the pinniped agent")
	f.StringVar(&c.Endpoint, "concierge-endpoint", "", "https URL of the agent's API (the cluster's API server or the impersonation proxy)")
	f.StringVar(&c.CABundleData, "concierge-ca-bundle-data", "", "base64 PEM CA bundle of --concierge-endpoint")
	f.StringVar(&c.Suffix, "concierge-api-group-suffix", "pinniped.dev", "API group suffix of the agent's APIs")
	f.StringVar(&c.AuthType, "concierge-authenticator-type", "", "jwt or webhook")
	f.StringVar(&c.AuthName, "concierge-authenticator-name", "", "name of the JWTAuthenticator or WebhookAuthenticator")
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

// Flows are the accepted --flow values ("" is the default: browser with a
// paste prompt).
var Flows = []string{"", "browser", "device", "password"}

// AddFlags registers the flags.
func (o *OIDC) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Issuer, "issuer", "", "OIDC issuer URL (https)")
	f.StringVar(&o.ClientID, "client-id", "pinniped-cli", "OIDC client ID")
	f.StringSliceVar(&o.Scopes, "scopes", []string{"openid", "offline_access", "email", "profile", "groups"}, "OIDC scopes to request")
	f.IntVar(&o.ListenPort, "listen-port", 0, "port of the 127.0.0.1 callback listener (default: any free port)")
	f.BoolVar(&o.SkipBrowser, "skip-browser", false, "print the login link instead of opening a browser")
	f.BoolVar(&o.SkipListen, "skip-listen", false, "no callback listener: paste the code instead")
	f.StringSliceVar(&o.CABundlePaths, "ca-bundle", nil, "PEM file of CAs for the issuer (repeatable)")
	f.StringSliceVar(&o.CABundleData, "ca-bundle-data", nil, "base64 PEM CA bundle for the issuer (repeatable)")
	f.StringVar(&o.RequestAudience, "request-audience", "", "trade the ID token for one with this audience (RFC 8693)")
	f.StringVar(&o.CredentialCache, "credential-cache", "keyring", "where to cache credentials: keyring, file, none")
	f.StringVar(&o.SessionCache, "session-cache", "", "accepted for upstream compatibility; sessions live with --credential-cache")
	f.StringVar(&o.Flow, "flow", "", "interactive login method: browser, device or password (default: browser with a paste prompt)")
	f.StringVar(&o.UpstreamName, "upstream-identity-provider-name", "", "upstream identity provider at a Pinniped Supervisor")
	f.StringVar(&o.UpstreamTy, "upstream-identity-provider-type", "oidc", "its type (oidc, ldap, activedirectory, github)")
	f.StringVar(&o.UpstreamFlow, "upstream-identity-provider-flow", "", "browser_authcode or cli_password")
	f.DurationVar(&o.Timeout, "timeout", 15*time.Minute, "give up on an interactive login after this long")
	f.Bool("debug-session-cache", false, "accepted for upstream compatibility; ignored")
	for _, h := range []string{"skip-listen", "debug-session-cache", "session-cache"} {
		_ = f.MarkHidden(h)
	}
	o.Concierge.AddFlags(f)
}

// IssuerCABundle reads --ca-bundle files and decodes --ca-bundle-data.
func (o *OIDC) IssuerCABundle() ([]byte, error) {
	var out []byte
	for _, p := range o.CABundlePaths {
		b, err := os.ReadFile(p) //nolint:gosec // the user names the file
		if err != nil {
			return nil, fmt.Errorf("--ca-bundle: %w", err)
		}
		out = append(out, b...)
		out = append(out, '\n')
	}
	for _, d := range o.CABundleData {
		b, err := base64.StdEncoding.DecodeString(d)
		if err != nil {
			return nil, fmt.Errorf("--ca-bundle-data is not base64: %w", err)
		}
		out = append(out, b...)
		out = append(out, '\n')
	}
	return out, nil
}

// Static are the flags of `pinniped login static`.
type Static struct {
	Token, TokenEnv string
	CredentialCache string
	Concierge       Concierge
}

// AddFlags registers the flags.
func (s *Static) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&s.Token, "token", "", "the static token")
	f.StringVar(&s.TokenEnv, "token-env", "", "name of an environment variable holding the token")
	f.StringVar(&s.CredentialCache, "credential-cache", "keyring", "where to cache credentials: keyring, file, none")
	s.Concierge.AddFlags(f)
}

// ResolveToken returns the token from --token or the variable --token-env names.
func (s *Static) ResolveToken(lookupEnv func(string) (string, bool)) (string, error) {
	if s.Token != "" && s.TokenEnv != "" {
		return "", errors.New("use --token or --token-env, not both")
	}
	if s.TokenEnv != "" {
		v, ok := lookupEnv(s.TokenEnv)
		if !ok || v == "" {
			return "", fmt.Errorf("--token-env %s: that environment variable is not set", s.TokenEnv)
		}
		return v, nil
	}
	return s.Token, nil
}
