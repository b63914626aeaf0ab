// Package agentclient is the one client of the agent's APIs that the
// commands and doctor share. Exchange trades an identity-provider token for
// a cluster credential at the agent's TokenCredentialRequest API (through
// the cluster's API server or the impersonation proxy): plain HTTPS and
// JSON, as the request is anonymous and a client with credentials would
// only add weight. Probe asks the same API whether it answers at all.
// WhoAmI asks the cluster who a client's user is (the agent's
// WhoAmIRequest, else Kubernetes' SelfSubjectReview).
package agentclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl/redirect"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/cli/httpclient"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// timeout bounds one exchange, its retries included; attemptTimeout one
// attempt, so that one that hangs leaves time to try again.
const (
	timeout        = 30 * time.Second
	attemptTimeout = 10 * time.Second
)

// Retries of an exchange the cluster could not answer for a moment (an
// agent replica that just died, which the aggregator answers with 503
// until its endpoint is gone; a rollout; a restarting API server) start
// after retryBackoff's first wait, double to at most maxRetryWait, and
// stop once the waits, or the time since the first attempt, would pass
// retryFor. A
// TokenCredentialRequest may be sent again safely: it stores nothing and
// consumes nothing; each one only mints another short-lived credential.
var (
	retryBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32}
	maxRetryWait = 2 * time.Second
	retryFor     = 8 * time.Second
	// sleep waits d unless ctx ends first; tests count the waits instead.
	sleep = func(ctx context.Context, d time.Duration) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(d):
			return nil
		}
	}
)

// ErrRefused means the agent looked at the token and said no.
var ErrRefused = errors.New("the cluster refused the token")

// Exchange sends one TokenCredentialRequest. The credential's expiry is
// restated on this machine's clock (see localExpiry).
func Exchange(ctx context.Context, c *config.Concierge, token string) (*loginv1alpha1.ClusterCredential, error) {
	return ExchangeAt(ctx, c, token, time.Now)
}

// ExchangeAt is Exchange with now as this machine's clock.
func ExchangeAt(ctx context.Context, c *config.Concierge, token string, now func() time.Time) (*loginv1alpha1.ClusterCredential, error) {
	kind, err := c.Kind()
	if err != nil {
		return nil, err
	}
	client, err := httpclient.New(c.CABundle, 0)
	if err != nil {
		return nil, fmt.Errorf("--concierge-ca-bundle-data is not a usable certificate bundle: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	endpoint, body, err := request(c, kind, token)
	if err != nil {
		return nil, err
	}
	first := time.Now()
	// When the last attempt was sent: the answer's Date is no earlier, so
	// the remaining life measured from here errs short, the safe way.
	sent := now()
	status, raw, date, err := post(ctx, client, endpoint, body)
	waited, backoff := time.Duration(0), retryBackoff
	for retryable(status, err) {
		wait := min(backoff.Step(), maxRetryWait)
		if waited+wait > retryFor || time.Since(first)+wait > retryFor {
			break
		}
		if serr := sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("exchange token at %s: %w (while retrying after: %w)", c.Endpoint, serr, answerError(status, err))
		}
		waited += wait
		sent = now()
		status, raw, date, err = post(ctx, client, endpoint, body)
	}
	if err != nil {
		return nil, fmt.Errorf("exchange token at %s: %w", c.Endpoint, err)
	}
	if status != http.StatusCreated {
		var st struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &st)
		msg := termsafe.Visible(st.Message)
		if msg == "" {
			msg = http.StatusText(status)
		}
		hint := ""
		switch status {
		case http.StatusNotFound, http.StatusServiceUnavailable:
			hint = " (is the pinniped agent installed and ready on this cluster?)"
		case http.StatusTooManyRequests:
			// Still refused after retrying: the agent (or the API
			// server in front of it) bounds the exchanges it works on
			// at once.
			return nil, fmt.Errorf("exchange token at %s: the agent is busy (HTTP 429: %s); try again in a moment, and if it stays busy, tell the cluster's administrator", c.Endpoint, msg)
		}
		return nil, fmt.Errorf("exchange token at %s: HTTP %d: %s%s", c.Endpoint, status, msg, hint)
	}
	var out loginv1alpha1.TokenCredentialRequest
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("exchange token at %s: unreadable answer: %w", c.Endpoint, err)
	}
	if out.Status.Message != nil {
		return nil, fmt.Errorf("%w: %s (log in again, or ask an admin to check the %s %q)", ErrRefused, termsafe.Visible(*out.Status.Message), kind, c.AuthenticatorName)
	}
	cred := out.Status.Credential
	if cred == nil || (cred.Token == "" && (cred.ClientCertificateData == "" || cred.ClientKeyData == "")) || cred.ExpirationTimestamp.IsZero() {
		return nil, fmt.Errorf("exchange token at %s: the answer holds no usable credential", c.Endpoint)
	}
	cred.ExpirationTimestamp = metav1.NewTime(localExpiry(cred.ExpirationTimestamp.Time, date, sent, lifetime(cred)))
	return cred, nil
}

// request is where a TokenCredentialRequest for token goes, and its body.
func request(c *config.Concierge, kind, token string) (string, []byte, error) {
	group := groupsuffix.Group(groupsuffix.Authentication, c.Suffix())
	body, err := json.Marshal(&loginv1alpha1.TokenCredentialRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: groupsuffix.GroupVersion(groupsuffix.Login, c.Suffix()), Kind: "TokenCredentialRequest"},
		Spec: loginv1alpha1.TokenCredentialRequestSpec{
			Token:         token,
			Authenticator: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: kind, Name: c.AuthenticatorName},
		},
	})
	endpoint := strings.TrimRight(c.Endpoint, "/") + "/apis/" + groupsuffix.GroupVersion(groupsuffix.Login, c.Suffix()) + "/tokencredentialrequests"
	return endpoint, body, err
}

// ProbeToken is what Probe presents: no authenticator accepts it.
const ProbeToken = "pinniped-doctor-probe-not-a-token" //nolint:gosec // a placeholder, refused by design

// ProbeAnswer is how the agent's API answered a TokenCredentialRequest
// that must be refused.
type ProbeAnswer struct {
	// Status is the HTTP status (201 when the agent answered at all).
	Status int
	// Refused is set when the agent looked at the token and said no, as
	// it should: the API is served, end to end.
	Refused bool
	// Message is the agent's refusal, or the API server's error message.
	Message string
	// Credential is set when the agent issued a credential (it never
	// should, for ProbeToken); the credential itself is dropped.
	Credential bool
	// Date is the answer's Date header.
	Date string
}

// Probe sends one TokenCredentialRequest with ProbeToken, without
// retries, to see whether the agent's API answers at c's endpoint (for
// `pinniped doctor`). An error means no HTTP answer (TLS, network).
func Probe(ctx context.Context, client *http.Client, c *config.Concierge) (*ProbeAnswer, error) {
	kind, err := c.Kind()
	if err != nil {
		return nil, err
	}
	endpoint, body, err := request(c, kind, ProbeToken)
	if err != nil {
		return nil, err
	}
	status, raw, date, err := post(ctx, client, endpoint, body)
	if err != nil {
		return nil, err
	}
	a := &ProbeAnswer{Status: status, Date: date}
	var out struct {
		Message string `json:"message"` // a metav1.Status
		Status  struct {
			Message    *string         `json:"message"`
			Credential json.RawMessage `json:"credential"`
		} `json:"status"`
	}
	_ = json.Unmarshal(raw, &out)
	a.Message = out.Message
	a.Credential = len(out.Status.Credential) > 0 && string(out.Status.Credential) != "null"
	if status == http.StatusCreated && out.Status.Message != nil {
		a.Refused, a.Message = true, *out.Status.Message
	}
	return a, nil
}

// maxDateError is the largest difference between the answer's Date and this
// machine's clock taken as noise rather than skew: Date has a resolution of
// one second, and the answer takes a moment to arrive.
const maxDateError = 5 * time.Second

// maxTokenLifetime bounds the remaining life read for a token credential,
// whose own lifetime the CLI cannot see (a certificate's it can).
const maxTokenLifetime = time.Hour

// localExpiry restates a credential's expiry, which is on the cluster's
// clock, on this machine's: kubectl and the credential cache compare it
// with this machine's clock. On a machine 2 minutes behind the cluster, a
// certificate would otherwise be handed out for 2 minutes after the API
// server began refusing it, and kubectl, which asks the plugin again after a
// 401, would be given it again. date is the answer's Date header: the
// clock of the agent that answered (kube-apiserver's aggregation layer
// passes it through), which in a healthy cluster keeps the time of the API
// server that checks the credential. The restated expiry is used only when
// the remaining life it implies is positive and no longer than the
// credential's own lifetime; anything else (a node's clock reset, a Date
// rewritten on the way) keeps the expiry as the cluster stated it, rather
// than caching a credential for years or handing out expired ones.
func localExpiry(exp time.Time, date string, sent time.Time, lifetime time.Duration) time.Time {
	serverNow, err := http.ParseTime(date)
	if err != nil {
		return exp
	}
	// Date is truncated to the second: the server's clock read up to a
	// second more, and the remaining life is taken from that, the shorter.
	remaining := exp.Sub(serverNow.Add(time.Second))
	if remaining <= 0 || remaining > lifetime {
		return exp
	}
	if local := sent.Add(remaining); local.Sub(exp).Abs() > maxDateError {
		return local
	}
	return exp
}

// lifetime is how long the credential was valid for when issued: a
// certificate's NotAfter less its NotBefore; for a token, maxTokenLifetime.
func lifetime(cred *loginv1alpha1.ClusterCredential) time.Duration {
	block, _ := pem.Decode([]byte(cred.ClientCertificateData))
	if block == nil {
		return maxTokenLifetime
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return maxTokenLifetime
	}
	return cert.NotAfter.Sub(cert.NotBefore)
}

// answerError describes the last failed attempt.
func answerError(status int, err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("HTTP %d", status)
}

// post sends the request once and reads the answer and its Date header.
func post(ctx context.Context, client *http.Client, endpoint string, body []byte) (int, []byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := httpclient.Do(client, req)
	if err != nil {
		return 0, nil, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, raw, resp.Header.Get("Date"), err
}

// retryable: what a moment later may go otherwise. A certificate the
// client does not trust, a server that does not speak TLS, a name that
// does not resolve, a redirect the client refused (the server sends the
// same one again), the caller giving up, or an answer the agent meant (a
// refusal, a 4xx, a 500) never does.
func retryable(status int, err error) bool {
	if err != nil {
		var verify *tls.CertificateVerificationError
		var record tls.RecordHeaderError
		var op *net.OpError
		var dns *net.DNSError
		switch {
		case errors.As(err, &verify), errors.As(err, &record), errors.Is(err, http.ErrSchemeMismatch), errors.Is(err, context.Canceled),
			errors.Is(err, httpsurl.ErrNotHTTPS), errors.Is(err, redirect.ErrCrossOrigin):
			return false
		case errors.As(err, &op) && op.Op == "remote error":
			return false // the server's TLS alert: it refused the handshake
		case errors.As(err, &dns):
			return !dns.IsNotFound
		}
		// A timeout of one attempt (not of the whole exchange, which
		// the loop's sleep then reports) may pass on another.
		return true
	}
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}
