package login

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pinniped-kit/pinniped/agent/apis/tokentimes"
	"github.com/pinniped-kit/pinniped/cache/credcache"
)

// claimNames lists, sorted, the claim names (never the values) of a JWT;
// "" for anything else.
func claimNames(token string) string {
	var claims map[string]json.RawMessage
	if !jwtClaims(token, &claims) || len(claims) == 0 {
		return ""
	}
	return strings.Join(slices.Sorted(maps.Keys(claims)), ", ")
}

// jwtClaims decodes, unverified, a JWT's payload into v; false for a token
// that is not a JWT.
func jwtClaims(token string, v any) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	return err == nil && json.Unmarshal(payload, v) == nil
}

// jwtExpiry reads, unverified, a JWT's exp: only to bound how long it is
// cached and reused (the cluster verifies it). ok is false for a token
// that is not a JWT with an exp.
func jwtExpiry(token string) (time.Time, bool) {
	var claims struct {
		Exp json.RawMessage `json:"exp"`
	}
	if !jwtClaims(token, &claims) {
		return time.Time{}, false
	}
	exp, err := tokentimes.NumericDate(claims.Exp)
	return exp, err == nil && !exp.IsZero()
}

// clusterIdentity is the user a credential from the agent names, for
// display only: the certificate's subject, or, for the impersonation proxy's
// token (which comes without a certificate), its username and groups claims.
func clusterIdentity(cred *credcache.Credential) (name string, groups []string, ok bool) {
	if cred.ClientCertificateData != "" {
		return certIdentity(cred.ClientCertificateData)
	}
	return tokenIdentity(cred.Token)
}

// tokenIdentity reads, unverified, the username and groups claims of a
// token from the impersonation proxy: the proxy verifies the token on every
// request, so the CLI only shows them. ok is false for anything else.
func tokenIdentity(token string) (name string, groups []string, ok bool) {
	var claims struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	}
	if !jwtClaims(token, &claims) || claims.Username == "" {
		return "", nil, false
	}
	return claims.Username, claims.Groups, true
}

// certIdentity is the user a client certificate names to Kubernetes: CN
// and O.
func certIdentity(certPEM string) (name string, groups []string, ok bool) {
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil {
		return "", nil, false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || cert.Subject.CommonName == "" {
		return "", nil, false
	}
	return cert.Subject.CommonName, cert.Subject.Organization, true
}
