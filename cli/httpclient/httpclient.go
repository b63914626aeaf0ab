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
	"net/url"
	"time"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
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

// Do is client.Do, with a refused redirect reported as Unwrap does.
func Do(client *http.Client, req *http.Request) (*http.Response, error) {
	resp, err := client.Do(req) //nolint:gosec // G704: the caller built req for the URL it means to reach; this only reports errors
	return resp, Unwrap(err)
}

// Unwrap is err without the *url.Error around a redirect that package
// redirect refused, for the errors of New's clients (client.Do, or a
// library's call through one). net/http prefixes that refusal with the
// method and the redirect's target as the server sent it, query included
// (which may hold a code or a token): it would undo redirect's leaving
// the query out, and name the target twice. Any other error is returned
// as it is.
func Unwrap(err error) error {
	// The error as returned, not one a caller wrapped: its message is
	// built already.
	ue, ok := err.(*url.Error) //nolint:errorlint // see above
	if ok && (errors.Is(ue.Err, httpsurl.ErrNotHTTPS) || errors.Is(ue.Err, redirect.ErrCrossOrigin)) {
		return ue.Err
	}
	return err
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
