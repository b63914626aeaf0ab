// Package conciergeclient trades an identity-provider token for a cluster
// credential at the agent's TokenCredentialRequest API (through the cluster's
// API server or the impersonation proxy). It is plain HTTPS and JSON: the
// request is anonymous, so a client with credentials would only add weight.
package conciergeclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/cli/httpclient"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

// timeout bounds one exchange.
const timeout = 30 * time.Second

// ErrRefused means the agent looked at the token and said no.
var ErrRefused = errors.New("the cluster refused the token")

// Exchange sends one TokenCredentialRequest.
func Exchange(ctx context.Context, c *config.Concierge, token string) (*loginv1alpha1.ClusterCredential, error) {
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

	group := groupsuffix.Group(groupsuffix.Authentication, c.Suffix())
	body, err := json.Marshal(&loginv1alpha1.TokenCredentialRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: groupsuffix.GroupVersion(groupsuffix.Login, c.Suffix()), Kind: "TokenCredentialRequest"},
		Spec: loginv1alpha1.TokenCredentialRequestSpec{
			Token:         token,
			Authenticator: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: kind, Name: c.AuthenticatorName},
		},
	})
	if err != nil {
		return nil, err
	}

	endpoint := strings.TrimRight(c.Endpoint, "/") + "/apis/" + groupsuffix.GroupVersion(groupsuffix.Login, c.Suffix()) + "/tokencredentialrequests"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
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
