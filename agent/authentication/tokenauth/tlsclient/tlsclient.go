// Package tlsclient builds the connections the agent opens to identity
// providers and TokenReview webhooks: only the configured CA bundle (or the
// system roots without one), TLS 1.2 or later, and short dial and handshake
// timeouts, so a dead endpoint cannot stall reconciliation or logins.
package tlsclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl/redirect"
)

// Config trusts caBundle (PEM), or the system roots when it is empty.
func Config(caBundle []byte) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("CA bundle contains no PEM certificates")
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Transport keeps up to idlePerHost connections to an endpoint alive.
func Transport(caBundle []byte, idlePerHost int) (*http.Transport, error) {
	cfg, err := Config(caBundle)
	if err != nil {
		return nil, err
	}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     cfg,
		TLSHandshakeTimeout: 5 * time.Second,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: idlePerHost,
		IdleConnTimeout:     90 * time.Second,
	}, nil
}

// Client is a client over Transport whose requests give up after timeout
// and which follows redirects only as package redirect allows: to https,
// and a request that began as neither GET nor HEAD only within its origin,
// whatever the status. Callers that must not
// follow redirects at all (a token in the body) set their own CheckRedirect.
func Client(caBundle []byte, idlePerHost int, timeout time.Duration) (*http.Client, error) {
	t, err := Transport(caBundle, idlePerHost)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: timeout, Transport: t, CheckRedirect: redirect.Check}, nil
}
