package kubeconfig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// OIDCDiscovery is the part of a discovery document `get kubeconfig` uses.
type OIDCDiscovery struct {
	Issuer          string   `json:"issuer"`
	ScopesSupported []string `json:"scopes_supported"`
}

// DiscoverOIDC fetches the issuer's discovery document, to check the issuer
// answers and to request only scopes it supports.
func DiscoverOIDC(ctx context.Context, issuer string, caBundle []byte) (*OIDCDiscovery, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, fmt.Errorf("the CA bundle for %s holds no PEM certificate", issuer)
		}
		tlsCfg.RootCAs = pool
	}
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsCfg}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the OIDC issuer %s is unreachable from here: %w", issuer, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("OIDC discovery at %s: HTTP %d", issuer, resp.StatusCode)
	}
	var d OIDCDiscovery
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&d); err != nil {
		return nil, fmt.Errorf("OIDC discovery at %s: %w", issuer, err)
	}
	if d.Issuer != issuer {
		return nil, fmt.Errorf("OIDC discovery at %s names the issuer %q; the JWTAuthenticator's issuer must match exactly", issuer, d.Issuer)
	}
	return &d, nil
}

// FilterScopes drops the scopes the provider says it does not support
// (providers such as Dex refuse a login that asks for unknown scopes).
// openid is always kept. When the provider lists none, all are kept.
func FilterScopes(want, supported []string) []string {
	if len(supported) == 0 {
		return want
	}
	var out []string
	for _, s := range want {
		if s == "openid" || slices.Contains(supported, s) {
			out = append(out, s)
		}
	}
	return out
}
