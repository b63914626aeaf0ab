// Package webhook asks a remote TokenReview webhook about tokens, as
// configured by a WebhookAuthenticator: TokenReview v1, with a fallback to
// authentication.k8s.io/v1beta1 for webhooks that predate v1 (upstream
// Pinniped only ever spoke v1beta1), TLS 1.2+ with the configured CA bundle,
// and timeouts.
//
// The protocol is one JSON POST, so it is spoken here with net/http and the
// k8s.io/api types rather than with k8s.io/apiserver's webhook plugin: that
// plugin links the API server's egress selector, and with it gRPC, the
// konnectivity client and OpenTelemetry exporters the agent never uses.
// Their package inits alone held 4 MB of every replica's resident memory.
// Recently accepted tokens are still remembered with k8s.io/apiserver's
// token cache.
package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/tlsclient"

	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
)

// Timeout bounds one TokenReview round trip.
const Timeout = 10 * time.Second

// SuccessCacheTTL is how long an accepted token is remembered, to spare the
// webhook repeated reviews of the same token during a burst of logins.
const SuccessCacheTTL = 10 * time.Second

// retryAfter is the pause before the one retry of a review that failed in
// transit (connection error, HTTP 429 or 5xx).
const retryAfter = 200 * time.Millisecond

// maxResponse bounds what is read of a webhook's answer.
const maxResponse = 1 << 20

const (
	v1      = "authentication.k8s.io/v1"
	v1beta1 = "authentication.k8s.io/v1beta1"
)

// Config describes one webhook.
type Config struct {
	Endpoint string
	CABundle []byte // PEM; empty means system roots
}

// Authenticator implements authenticator.Token.
type Authenticator struct {
	cached authenticator.Token
	client *http.Client
}

var _ authenticator.Token = (*Authenticator)(nil)

// ValidateEndpoint checks the URL without contacting it.
func ValidateEndpoint(endpoint string) error {
	return httpsurl.Check("endpoint", endpoint)
}

// New builds the authenticator. It does not contact the webhook; the
// controller probes reachability separately to report status.
func New(cfg Config) (*Authenticator, error) {
	if err := ValidateEndpoint(cfg.Endpoint); err != nil {
		return nil, err
	}
	transport, err := tlsclient.Transport(cfg.CABundle, 16)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.Endpoint) // validated above
	r := &reviewer{
		endpoint: cfg.Endpoint,
		// Errors are logged: they name the webhook without any user
		// information or query, which may hold credentials.
		display: (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(),
		client: &http.Client{
			Transport: transport,
			// A redirect would send the token on to another address.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	return &Authenticator{cached: cache.New(r, false, SuccessCacheTTL, 0), client: r.client}, nil
}

// CloseIdleConnections lets go of kept-alive connections to the webhook;
// the registry calls it when this authenticator is replaced or removed.
func (a *Authenticator) CloseIdleConnections() { a.client.CloseIdleConnections() }

// AuthenticateToken reviews the token, or answers from the short cache of
// accepted tokens.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	return a.cached.AuthenticateToken(ctx, token)
}

// reviewer sends TokenReviews, in v1 unless the webhook has shown it only
// understands v1beta1.
type reviewer struct {
	endpoint   string
	display    string
	client     *http.Client
	useV1beta1 atomic.Bool
}

// errVersion means the webhook did not understand the TokenReview version.
var errVersion = errors.New("the webhook does not understand this TokenReview version")

func (r *reviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	if r.useV1beta1.Load() {
		return r.review(ctx, v1beta1, token)
	}
	resp, ok, err := r.review(ctx, v1, token)
	if !errors.Is(err, errVersion) {
		return resp, ok, err
	}
	resp, ok, err2 := r.review(ctx, v1beta1, token)
	if err2 != nil {
		return nil, false, fmt.Errorf("TokenReview v1: %w; v1beta1: %w", err, err2)
	}
	r.useV1beta1.Store(true)
	return resp, ok, nil
}

// review sends one TokenReview, retrying once after a failure in transit.
func (r *reviewer) review(ctx context.Context, version, token string) (*authenticator.Response, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	// v1 and v1beta1 TokenReviews have the same fields.
	body, err := json.Marshal(&authenticationv1.TokenReview{
		TypeMeta: metav1.TypeMeta{APIVersion: version, Kind: "TokenReview"},
		Spec:     authenticationv1.TokenReviewSpec{Token: token},
	})
	if err != nil {
		return nil, false, fmt.Errorf("encode TokenReview: %w", err)
	}
	status, err := r.post(ctx, version, body)
	if errors.Is(err, errTransient) {
		select {
		case <-ctx.Done():
			return nil, false, err
		case <-time.After(retryAfter):
		}
		status, err = r.post(ctx, version, body)
	}
	if err != nil {
		return nil, false, err
	}
	if !status.Authenticated {
		if status.Error != "" {
			return nil, false, &tokenauth.RefusedError{By: "the webhook", Detail: status.Error}
		}
		return nil, false, nil
	}
	if status.User.Username == "" {
		return nil, false, errors.New("the webhook accepted the token but named no user")
	}
	var extra map[string][]string
	if len(status.User.Extra) > 0 {
		extra = make(map[string][]string, len(status.User.Extra))
		for k, v := range status.User.Extra {
			extra[k] = v
		}
	}
	return &authenticator.Response{User: &user.DefaultInfo{
		Name: status.User.Username, UID: status.User.UID, Groups: status.User.Groups, Extra: extra,
	}}, true, nil
}

// errTransient marks failures worth one retry.
var errTransient = errors.New("transient")

func (r *reviewer) post(ctx context.Context, version string, body []byte) (*authenticationv1.TokenReviewStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build TokenReview request for %s: %w", r.display, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "pinniped-agent")
	resp, err := r.client.Do(req)
	if err != nil {
		// url.Error would repeat the endpoint as configured.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("TokenReview at %s: %w", r.display, ctx.Err())
		case permanent(err):
			return nil, fmt.Errorf("TokenReview at %s: %w", r.display, err)
		}
		return nil, fmt.Errorf("TokenReview at %s: %w: %w", r.display, errTransient, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("read TokenReview answer from %s: %w: %w", r.display, errTransient, err)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return nil, fmt.Errorf("TokenReview at %s: HTTP %d: %w", r.display, resp.StatusCode, errTransient)
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusNotFound ||
		resp.StatusCode == http.StatusUnsupportedMediaType || resp.StatusCode == http.StatusUnprocessableEntity:
		return nil, fmt.Errorf("TokenReview at %s: HTTP %d: %w", r.display, resp.StatusCode, errVersion)
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated:
		return nil, fmt.Errorf("TokenReview at %s: unexpected HTTP %d", r.display, resp.StatusCode)
	case len(raw) > maxResponse:
		return nil, fmt.Errorf("TokenReview at %s: the answer is larger than %d bytes", r.display, maxResponse)
	}
	var answer authenticationv1.TokenReview
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("TokenReview at %s: the answer is not a TokenReview: %w", r.display, err)
	}
	// Webhooks may leave out apiVersion and kind (the API server's own
	// client fills them in from what it asked for); only a different
	// version or kind named in the answer is a version problem.
	if (answer.Kind != "" && answer.Kind != "TokenReview") || (answer.APIVersion != "" && answer.APIVersion != version) {
		return nil, fmt.Errorf("TokenReview at %s: answered with %q %q: %w", r.display, answer.APIVersion, answer.Kind, errVersion)
	}
	return &answer.Status, nil
}

// permanent reports failures that a retry cannot mend: the webhook's
// certificate is not trusted, or its name does not exist.
func permanent(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalid          x509.CertificateInvalidError
		hostname         x509.HostnameError
		verification     *tls.CertificateVerificationError
		dns              *net.DNSError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &verification) || (errors.As(err, &dns) && dns.IsNotFound)
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
	cfg, err := tlsclient.Config(caBundle)
	if err != nil {
		return err
	}
	cfg.ServerName = u.Hostname()
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("cannot connect to %s: %w", host, err)
	}
	return conn.Close()
}
