// Package conciergeclient trades an identity-provider token for a cluster
// credential at the agent's TokenCredentialRequest API (through the cluster's
// API server or the impersonation proxy). It is plain HTTPS and JSON: the
// request is anonymous, and client-go would only slow the CLI's start-up.
package conciergeclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
)

// Config says where and how to exchange.
type Config struct {
	Endpoint          string // https URL of the API server or proxy
	CABundle          []byte // PEM
	APIGroupSuffix    string // default pinniped.dev
	AuthenticatorType string // jwt or webhook
	AuthenticatorName string
	// Timeout bounds the exchange (default 30 s).
	Timeout time.Duration
}

// Validate checks the config without network access.
func (c *Config) Validate() error {
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Host == "" {
		return fmt.Errorf("--concierge-endpoint %q is not a URL", c.Endpoint)
	}
	if u.Scheme != "https" {
		return fmt.Errorf("--concierge-endpoint %q must be https: the token would cross the network in clear text", c.Endpoint)
	}
	if _, err := c.kind(); err != nil {
		return err
	}
	if c.AuthenticatorName == "" {
		return errors.New("--concierge-authenticator-name is required")
	}
	if len(c.CABundle) > 0 && !x509.NewCertPool().AppendCertsFromPEM(c.CABundle) {
		return errors.New("--concierge-ca-bundle-data holds no PEM certificate")
	}
	return nil
}

func (c *Config) kind() (string, error) {
	switch strings.ToLower(c.AuthenticatorType) {
	case "jwt":
		return "JWTAuthenticator", nil
	case "webhook":
		return "WebhookAuthenticator", nil
	}
	return "", fmt.Errorf("--concierge-authenticator-type %q: use jwt or webhook", c.AuthenticatorType)
}

func (c *Config) suffix() string {
	if c.APIGroupSuffix == "" {
		return "pinniped.dev"
	}
	return c.APIGroupSuffix
}

// ErrRefused means the agent looked at the token and said no.
var ErrRefused = errors.New("the cluster refused the token")

// Exchange sends one TokenCredentialRequest.
func Exchange(ctx context.Context, c *Config, token string) (*loginv1alpha1.ClusterCredential, error) {
	kind, err := c.kind()
	if err != nil {
		return nil, err
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	group := "authentication.concierge." + c.suffix()
	body, err := json.Marshal(&loginv1alpha1.TokenCredentialRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: "login.concierge." + c.suffix() + "/v1alpha1", Kind: "TokenCredentialRequest"},
		Spec: loginv1alpha1.TokenCredentialRequestSpec{
			Token:         token,
			Authenticator: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: kind, Name: c.AuthenticatorName},
		},
	})
	if err != nil {
		return nil, err
	}

	endpoint := strings.TrimRight(c.Endpoint, "/") + "/apis/login.concierge." + c.suffix() + "/v1alpha1/tokencredentialrequests"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := httpClient(c.CABundle).Do(req)
	if err != nil {
		return nil, fmt.Errorf("exchange token at %s: %w", c.Endpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("exchange token at %s: %w", c.Endpoint, err)
	}
	if resp.StatusCode != http.StatusCreated {
		var st struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &st)
		msg := st.Message
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		hint := ""
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusServiceUnavailable {
			hint = " (is the pinniped agent installed and ready on this cluster?)"
		}
		return nil, fmt.Errorf("exchange token at %s: HTTP %d: %s%s", c.Endpoint, resp.StatusCode, msg, hint)
	}
	var out loginv1alpha1.TokenCredentialRequest
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("exchange token at %s: unreadable answer: %w", c.Endpoint, err)
	}
	if out.Status.Message != nil {
		return nil, fmt.Errorf("%w: %s (log in again, or ask an admin to check the %s %q)", ErrRefused, *out.Status.Message, kind, c.AuthenticatorName)
	}
	cred := out.Status.Credential
	if cred == nil || (cred.Token == "" && (cred.ClientCertificateData == "" || cred.ClientKeyData == "")) || cred.ExpirationTimestamp.IsZero() {
		return nil, fmt.Errorf("exchange token at %s: the answer holds no usable credential", c.Endpoint)
	}
	return cred, nil
}

func httpClient(caBundle []byte) *http.Client {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caBundle)
		cfg.RootCAs = pool
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     cfg,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
	}}
}
