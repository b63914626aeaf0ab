// Package discovery reads an OIDC issuer's discovery document
// (/.well-known/openid-configuration), once, for both `pinniped login`
// and `pinniped get kubeconfig`: the endpoints a login uses, the scopes and
// response modes the issuer supports, and whether it is a Pinniped
// Supervisor (which lists its identity providers at an endpoint of its own).
package discovery

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
	"github.com/pinniped-kit/pinniped/cli/httpclient"
)

// Document is what the CLI reads of a discovery document.
type Document struct {
	Issuer                      string   `json:"issuer"`
	AuthorizationEndpoint       string   `json:"authorization_endpoint"`
	TokenEndpoint               string   `json:"token_endpoint"`
	DeviceAuthorizationEndpoint string   `json:"device_authorization_endpoint"`
	JWKSURI                     string   `json:"jwks_uri"`
	UserInfoEndpoint            string   `json:"userinfo_endpoint"`
	ScopesSupported             []string `json:"scopes_supported"`
	ResponseModesSupported      []string `json:"response_modes_supported"`
	IDTokenSigningAlgs          []string `json:"id_token_signing_alg_values_supported"`
	// RevocationEndpoint (RFC 7009) and EndSessionEndpoint (RP-initiated
	// logout) are for `pinniped logout`, which checks that they are https
	// where it uses them: it must be able to tell the person that the
	// issuer has one it refuses, not that it has none.
	RevocationEndpoint string `json:"revocation_endpoint"`
	EndSessionEndpoint string `json:"end_session_endpoint"`
	// Supervisor is set by a Pinniped Supervisor only.
	Supervisor *struct {
		IdentityProvidersEndpoint string `json:"pinniped_identity_providers_endpoint"`
	} `json:"discovery.supervisor.pinniped.dev/v1alpha1"`
}

// maxDocument bounds what is read: real documents are a few KiB.
const maxDocument = 1 << 20

// Fetch reads issuer's discovery document with client. The document must
// name the issuer exactly, and every endpoint a login sends a secret to
// must be https; a device endpoint that is not is dropped (the device flow
// is then unavailable), not an error.
func Fetch(ctx context.Context, client *http.Client, issuer string) (*Document, error) {
	if err := httpsurl.Check("issuer", issuer); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpclient.Do(client, req)
	if err != nil {
		var unknownCA x509.UnknownAuthorityError
		if errors.As(err, &unknownCA) {
			return nil, fmt.Errorf("the OIDC issuer %s presents a certificate signed by an authority this machine does not trust: "+
				"pass that CA with --ca-bundle FILE (pinniped get kubeconfig --oidc-ca-bundle FILE writes it into the kubeconfig): %w", issuer, err)
		}
		return nil, fmt.Errorf("the OIDC issuer %s is unreachable from here: %w", issuer, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("OIDC discovery at %s: HTTP %d (is this the issuer's exact URL?)", issuer, resp.StatusCode)
	}
	var d Document
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDocument)).Decode(&d); err != nil {
		return nil, fmt.Errorf("OIDC discovery at %s: not a discovery document: %w", issuer, err)
	}
	if d.Issuer != issuer {
		// Most often a trailing slash: Auth0's issuers end in one, most
		// others do not, and tokens name the issuer exactly as published.
		// Quoted: the value is the provider's, and reaches a terminal.
		return nil, fmt.Errorf("the OIDC provider at %s calls itself %q, and the issuer must match it exactly: use that issuer "+
			"(--issuer, or --oidc-issuer of get kubeconfig; the cluster's JWTAuthenticator needs it in spec.issuer too)", issuer, d.Issuer)
	}
	for _, e := range []struct{ what, url string }{
		{"authorization endpoint", d.AuthorizationEndpoint}, {"token endpoint", d.TokenEndpoint}, {"jwks_uri", d.JWKSURI},
	} {
		if err := httpsurl.Check(e.what, e.url); err != nil {
			return nil, fmt.Errorf("OIDC provider %s: %w", issuer, err)
		}
	}
	if d.DeviceAuthorizationEndpoint != "" && httpsurl.Check("", d.DeviceAuthorizationEndpoint) != nil {
		d.DeviceAuthorizationEndpoint = ""
	}
	if d.UserInfoEndpoint != "" && httpsurl.Check("", d.UserInfoEndpoint) != nil {
		d.UserInfoEndpoint = ""
	}
	if s := d.Supervisor; s != nil && !underIssuer(issuer, s.IdentityProvidersEndpoint) {
		// The list must come from the Supervisor itself.
		d.Supervisor = nil
	}
	return &d, nil
}

// IsSupervisor reports whether the issuer is a Pinniped Supervisor.
func (d *Document) IsSupervisor() bool {
	return d != nil && d.Supervisor != nil && d.Supervisor.IdentityProvidersEndpoint != ""
}

// SupportedScopes keeps, of the scopes asked of an issuer that is not a
// Supervisor, those it lists as supported (openid always): providers such
// as Dex refuse a login that asks for one they do not know, and upstream's
// kubeconfigs ask for the Supervisor's own (pinniped:request-audience,
// username, groups) even of other issuers. Of an issuer that lists none,
// only the two that no issuer but a Supervisor defines are dropped. A
// dropped username scope is asked as email and profile where listed.
func (d *Document) SupportedScopes(scopes []string) (kept, dropped []string) {
	supported := func(s string) bool { return slices.Contains(d.ScopesSupported, s) }
	if len(d.ScopesSupported) == 0 {
		supported = func(s string) bool { return s != "pinniped:request-audience" && s != "username" }
	}
	for _, s := range scopes {
		if s == "openid" || supported(s) {
			kept = append(kept, s)
		} else {
			dropped = append(dropped, s)
		}
	}
	// The Supervisor's username scope is what puts a user name in its ID
	// tokens; an OIDC issuer does that with the standard email and profile
	// scopes. Without them, the claims a JWTAuthenticator usually maps
	// (email, preferred_username) are missing and the cluster refuses the
	// token, so an upstream kubeconfig would log in and still fail.
	if slices.Contains(dropped, "username") {
		for _, s := range []string{"email", "profile"} {
			if !slices.Contains(kept, s) && len(d.ScopesSupported) > 0 && supported(s) {
				kept = append(kept, s)
			}
		}
	}
	return kept, dropped
}

// underIssuer reports whether u is an https URL on the issuer's host, at or
// below its path (a string prefix alone would let https://issuer.evil.com
// pass for https://issuer).
func underIssuer(issuer, u string) bool {
	iu, err1 := url.Parse(issuer)
	uu, err2 := url.Parse(u)
	if err1 != nil || err2 != nil || uu.Scheme != "https" || uu.Host != iu.Host {
		return false
	}
	// Dot segments (also percent-encoded: Path is decoded) would climb out
	// of the issuer's path once the server resolves them.
	for _, seg := range strings.Split(uu.Path, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	base := strings.TrimSuffix(iu.Path, "/")
	return uu.Path == base || strings.HasPrefix(uu.Path, base+"/")
}
