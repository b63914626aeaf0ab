// Package httpclient builds the one kind of HTTP client the CLI uses to
// reach identity providers and clusters: TLS 1.2 or newer, trusting a given
// CA bundle (or the system's roots), through the environment's proxy, with
// bounded waits, following redirects only to https (and a request that
// began as neither GET nor HEAD only within its origin, whatever the
// status; see package redirect).
package httpclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"time"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl/redirect"
)

// New returns a client trusting caBundle (PEM; empty means the system's
// roots) whose requests give up after timeout (0: no overall limit, for
// callers that bound each request with a context).
func New(caBundle []byte, timeout time.Duration) (*http.Client, error) {
	tlsCfg, err := TLSConfig(caBundle)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout: timeout,
		// Bodies hold passwords, refresh tokens, client secrets and PKCE
		// verifiers, which Go would resend on a 307 or 308, and a 303 would
		// carry a POST's headers to wherever it points.
		CheckRedirect: redirect.Check,
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSClientConfig:     tlsCfg,
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
		},
	}, nil
}

// TLSConfig is the TLS side of New's clients, for callers that dial TLS
// themselves: TLS 1.2 or newer, trusting caBundle (PEM; empty means the
// system's roots).
func TLSConfig(caBundle []byte) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
