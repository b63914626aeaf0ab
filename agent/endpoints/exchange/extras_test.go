package exchange_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/endpoints/exchange"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
	"github.com/pinniped-kit/pinniped/agent/plumbing/observe"
)

// webhookUser stands in for a WebhookAuthenticator, the one kind that can
// return extras: whatever the token, it authenticates u.
type webhookUser struct{ u user.Info }

func (w webhookUser) AuthenticateToken(context.Context, tokenauth.Key, string) (*authenticator.Response, error) {
	return &authenticator.Response{User: w.u}, nil
}

func exchangeAs(t *testing.T, f *fixture, u user.Info) (*loginv1alpha1.TokenCredentialRequest, observe.Exchange) {
	t.Helper()
	f.handler.Authenticators = webhookUser{u: u}
	f.results = nil
	code, body := do(t, f.handler, http.MethodPost, tcrPath, tcrBody("opaque-token", "WebhookAuthenticator", "hook"))
	if code != http.StatusCreated {
		t.Fatalf("status %d: %s", code, body)
	}
	var out loginv1alpha1.TokenCredentialRequest
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	if len(f.results) != 1 {
		t.Fatalf("%d results observed", len(f.results))
	}
	return &out, f.results[0]
}

// TestCertificateSourceRefusesExtras: with a certificate source the exchange
// fails as it always has for a user with extras, with the same reason, and
// the values stay out of the reason.
func TestCertificateSourceRefusesExtras(t *testing.T) {
	f := newFixture(t)
	out, res := exchangeAs(t, f, &user.DefaultInfo{Name: "alice", Extra: map[string][]string{"example.com/team": {"value-of-alice-5d1e"}}})
	if out.Status.Credential != nil || out.Status.Message == nil || *out.Status.Message != exchange.FailedMessage {
		t.Fatalf("a user with extras got a certificate: %+v", out.Status)
	}
	if want := `authenticator returned extra "example.com/team", which client certificates cannot carry`; res.Success || res.Reason != want {
		t.Fatalf("reason %q, want %q", res.Reason, want)
	}
	_, res = exchangeAs(t, f, &user.DefaultInfo{Name: "alice", Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=1"}}})
	if !res.Success {
		t.Fatalf("the credential ID alone was refused: %s", res.Reason)
	}
}

// TestOriginalUserExtraIsRefused: no credential source may hand out a credential that
// carries another install's (or this one's) original-user extra; a proxy
// token would present it to the impersonation proxy as if the proxy had
// recorded a nested impersonation itself.
func TestOriginalUserExtraIsRefused(t *testing.T) {
	f := newFixture(t)
	for _, key := range []string{groupsuffix.OriginalUserExtra(""), strings.ToUpper(groupsuffix.OriginalUserExtra("tuna.io"))} {
		out, res := exchangeAs(t, f, &user.DefaultInfo{Name: "alice", Extra: map[string][]string{key: {`{"username":"admin"}`}}})
		if out.Status.Credential != nil || res.Success || !strings.Contains(res.Reason, "reserved for the impersonation proxy") {
			t.Fatalf("%s: credential %v, reason %q", key, out.Status.Credential != nil, res.Reason)
		}
		if bytes.Contains([]byte(res.Reason), []byte("admin")) {
			t.Fatalf("the reason names the extra's value: %s", res.Reason)
		}
	}
}

// TestTokenSourceCarriesExtras: the exchange lets through, to the proxy's
// token source, the extra the certificate source refuses; the token carries
// it, and the audit result names the token's credential ID (never the
// token). The original-user extra stays refused.
func TestTokenSourceCarriesExtras(t *testing.T) {
	f := newFixture(t)
	key, err := proxytoken.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	aud := proxytoken.ForInstall("install-1")
	f.handler.Credentials = &proxytoken.Source{
		Key:      func() (*proxytoken.Key, proxytoken.Audience, bool) { return key, aud, true },
		Fallback: &clustercred.CA{CA: f.ca},
		Now:      func() time.Time { return now },
	}
	out, res := exchangeAs(t, f, &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}, Extra: map[string][]string{"example.com/team": {"blue"}}})
	if !res.Success || out.Status.Credential == nil {
		t.Fatalf("refused: %s", res.Reason)
	}
	cred := out.Status.Credential
	if cred.ClientCertificateData != "" || cred.Token == "" {
		t.Fatalf("want only a token: %+v", cred)
	}
	u, _, err := proxytoken.Verify(&proxytoken.KeySet{Verify: map[string]*ecdsa.PublicKey{key.ID: &key.Private.PublicKey}}, aud, cred.Token, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.GetExtra()["example.com/team"]; len(got) != 1 || got[0] != "blue" {
		t.Errorf("the token's extra is %v", got)
	}
	if ids := u.GetExtra()[proxytoken.CredentialIDExtra]; res.CredentialID == "" || len(ids) != 1 || ids[0] != res.CredentialID {
		t.Errorf("result's credential ID %q, the token's %v", res.CredentialID, ids)
	}
	if strings.Contains(res.CredentialID, cred.Token) || strings.Contains(res.Reason, cred.Token) {
		t.Error("the result holds the token")
	}

	out, res = exchangeAs(t, f, &user.DefaultInfo{Name: "alice", Extra: map[string][]string{groupsuffix.OriginalUserExtra(""): {"{}"}}})
	if res.Success || out.Status.Credential != nil || !strings.Contains(res.Reason, "reserved for the impersonation proxy") {
		t.Fatalf("the original-user extra went through the token source: %q", res.Reason)
	}
}
