// Package jwttest is a minimal in-process OIDC issuer for unit tests: an
// https discovery document and JWKS, and a signer for tokens. End-to-end
// tests use the real Dex instead.
package jwttest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/fips140"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
)

// Issuer serves discovery and keys over TLS and signs tokens.
type Issuer struct {
	URL      string
	CABundle []byte
	// JWKSFetches counts key-set requests, to observe caching.
	JWKSFetches atomic.Int64

	mu   sync.Mutex
	keys []jose.JSONWebKey // public keys served; the last is the signing key
	sign *ecdsa.PrivateKey
	kid  string
}

// New starts an issuer on 127.0.0.1 that is shut down when the test ends.
func New(t testing.TB) *Issuer { return NewOn(t, "") }

// NewOn starts an issuer listening on ip (e.g. a test bed's node address,
// so pods can reach it), with a certificate for that address. An empty ip
// means 127.0.0.1 with httptest's own certificate.
func NewOn(t testing.TB, ip string) *Issuer {
	t.Helper()
	if ip == "" {
		iss, srv := newIssuer(t)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		iss.URL = srv.URL
		iss.CABundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		return iss
	}
	tlsConfig, caPEM := ServingTLS(t, ip)
	return NewAt(t, net.JoinHostPort(ip, "0"), tlsConfig, caPEM)
}

// NewAt starts an issuer listening on addr (host:port; port 0 picks one)
// with the given TLS configuration, whose certificates caPEM verifies: an
// issuer at an address something else already trusts.
func NewAt(t testing.TB, addr string, tlsConfig *tls.Config, caPEM []byte) *Issuer {
	t.Helper()
	iss, srv := newIssuer(t)
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = tlsConfig
	srv.StartTLS()
	t.Cleanup(srv.Close)
	iss.URL = "https://" + ln.Addr().String()
	iss.CABundle = caPEM
	return iss
}

// newIssuer is an issuer with a key, and its server, not yet started; the
// handlers read iss.URL, which the caller sets once it knows the address.
func newIssuer(t testing.TB) (*Issuer, *httptest.Server) {
	t.Helper()
	iss := &Issuer{}
	iss.Rotate(t)
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                iss.URL,
			"jwks_uri":                              iss.URL + "/keys",
			"authorization_endpoint":                iss.URL + "/auth",
			"token_endpoint":                        iss.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"ES256", "RS256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		iss.JWKSFetches.Add(1)
		iss.mu.Lock()
		set := jose.JSONWebKeySet{Keys: append([]jose.JSONWebKey(nil), iss.keys...)}
		iss.mu.Unlock()
		_ = json.NewEncoder(w).Encode(set)
	})
	return iss, srv
}

// ServingTLS returns a server TLS configuration with a certificate for ip,
// from a fresh CA whose PEM is returned for clients to trust.
func ServingTLS(t testing.TB, ip string) (*tls.Config, []byte) {
	t.Helper()
	ca, err := certauthority.New("test CA", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServingCert(ip, nil, []net.IP{net.ParseIP(ip)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, ca.CertPEM()
}

// Rotate adds a new signing key; later tokens carry its new key id.
func (i *Issuer) Rotate(t testing.TB) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.kid = fmt.Sprintf("key-%d", len(i.keys)+1)
	i.sign = key
	i.keys = append(i.keys, jose.JSONWebKey{Key: key.Public(), KeyID: i.kid, Algorithm: "ES256", Use: "sig"})
}

// AddRS256 publishes an RS256 key of bits bits beside the others (the
// current signing key stays) and returns its key id and a signer of tokens
// under it: for keys some builds refuse, e.g. 1024 bits under
// fips140=only.
func (i *Issuer) AddRS256(t testing.TB, bits int) (string, func(claims map[string]any) string) {
	t.Helper()
	// The issuer is not under test: it makes its key even where the test
	// process itself runs FIPS 140-only.
	var key *rsa.PrivateKey
	var err error
	fips140.WithoutEnforcement(func() { key, err = rsa.GenerateKey(rand.Reader, bits) })
	if err != nil {
		t.Fatal(err)
	}
	i.mu.Lock()
	kid := fmt.Sprintf("rsa-%d-%d", bits, len(i.keys)+1)
	i.keys = append(i.keys, jose.JSONWebKey{Key: key.Public(), KeyID: kid, Algorithm: "RS256", Use: "sig"})
	i.mu.Unlock()
	return kid, func(claims map[string]any) string {
		var token string
		fips140.WithoutEnforcement(func() { token = signJWT(t, jose.SigningKey{Algorithm: jose.RS256, Key: key}, kid, claims) })
		return token
	}
}

// PublishOnly serves only the keys named: an issuer whose key set holds
// nothing else (Sign's key too may go).
func (i *Issuer) PublishOnly(kids ...string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.keys = slices.DeleteFunc(i.keys, func(k jose.JSONWebKey) bool { return !slices.Contains(kids, k.KeyID) })
}

// Sign returns a compact JWT with the given claims, signed by the current key.
// It does not add iss/aud/exp: tests choose them.
func (i *Issuer) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	i.mu.Lock()
	key, kid := i.sign, i.kid
	i.mu.Unlock()
	return SignWith(t, key, kid, claims)
}

// SignWith signs with any key, e.g. one the issuer never published.
func SignWith(t testing.TB, key *ecdsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	return signJWT(t, jose.SigningKey{Algorithm: jose.ES256, Key: key}, kid, claims)
}

func signJWT(t testing.TB, key jose.SigningKey, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(key,
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sig.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
