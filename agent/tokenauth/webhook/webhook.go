// Package webhook asks a remote TokenReview webhook about tokens, as
// configured by a WebhookAuthenticator. The protocol work is
// k8s.io/apiserver's webhook token authenticator; this package adds the
// TLS setup, timeouts, and a fallback to authentication.k8s.io/v1beta1 for
// webhooks that predate v1 (upstream Pinniped only ever spoke v1beta1).
package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"
	"k8s.io/client-go/rest"
)

// Timeout bounds one TokenReview round trip.
const Timeout = 10 * time.Second

// SuccessCacheTTL is how long an accepted token is remembered, to spare the
// webhook repeated reviews of the same token during a burst of logins.
const SuccessCacheTTL = 10 * time.Second

// Config describes one webhook.
type Config struct {
	Endpoint string
	CABundle []byte // PEM; empty means system roots
}

// Authenticator implements authenticator.Token.
type Authenticator struct {
	v1, v1beta1 authenticator.Token
	// useV1beta1 is set once the webhook has shown it only speaks v1beta1.
	useV1beta1 atomic.Bool
}

var _ authenticator.Token = (*Authenticator)(nil)

// ValidateEndpoint checks the URL without contacting it.
func ValidateEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("endpoint %q is not a URL: %w", endpoint, err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("endpoint %q must be an https URL: tokens must not cross the network in clear text", endpoint)
	}
	return nil
}

// New builds the authenticator. It does not contact the webhook; the
// controller probes reachability separately to report status.
func New(cfg Config) (*Authenticator, error) {
	if err := ValidateEndpoint(cfg.Endpoint); err != nil {
		return nil, err
	}
	rc := &rest.Config{
		Host:            cfg.Endpoint,
		Timeout:         Timeout,
		TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CABundle},
		// The webhook is called with no credentials of ours.
		UserAgent: "pinniped-agent",
	}
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 2}
	v1, err := webhook.New(rc, "v1", nil, backoff)
	if err != nil {
		return nil, fmt.Errorf("configure TokenReview v1 client for %s: %w", cfg.Endpoint, err)
	}
	v1beta1, err := webhook.New(rc, "v1beta1", nil, backoff)
	if err != nil {
		return nil, fmt.Errorf("configure TokenReview v1beta1 client for %s: %w", cfg.Endpoint, err)
	}
	return &Authenticator{
		v1:      cache.New(v1, false, SuccessCacheTTL, 0),
		v1beta1: cache.New(v1beta1, false, SuccessCacheTTL, 0),
	}, nil
}

// AuthenticateToken sends a TokenReview, in v1 unless the webhook has shown
// it only understands v1beta1.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	if a.useV1beta1.Load() {
		return a.v1beta1.AuthenticateToken(ctx, token)
	}
	resp, ok, err := a.v1.AuthenticateToken(ctx, token)
	if err == nil || !versionProblem(err) {
		return resp, ok, err
	}
	resp, ok, err2 := a.v1beta1.AuthenticateToken(ctx, token)
	if err2 != nil {
		return nil, false, errors.Join(err, err2)
	}
	a.useV1beta1.Store(true)
	return resp, ok, nil
}

// versionProblem guesses whether a v1 failure was about the API version
// rather than the token or the network: the answer could not be decoded as
// v1, or the webhook refused the request's shape.
func versionProblem(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	if apierrors.IsBadRequest(err) || apierrors.IsNotFound(err) || apierrors.IsUnsupportedMediaType(err) ||
		apierrors.IsInvalid(err) || runtime.IsNotRegisteredError(err) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"no kind", "v1beta1", "unable to decode", "does not match"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Probe checks that the webhook's TLS endpoint answers with a certificate
// the CA bundle trusts, without sending a token.
func Probe(ctx context.Context, endpoint string, caBundle []byte) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return errors.New("CA bundle contains no PEM certificates")
		}
		cfg.RootCAs = pool
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("cannot connect to %s: %w", host, err)
	}
	return conn.Close()
}
