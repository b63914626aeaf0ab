package exchange_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/endpoints/exchange"
)

const suffix = "tuna.io"

func suffixedTCR(token, apiVersion, authGroup string) string {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": apiVersion, "kind": "TokenCredentialRequest",
		"spec": map[string]any{"token": token, "authenticator": map[string]any{
			"apiGroup": authGroup, "kind": "JWTAuthenticator", "name": "dex"}},
	})
	return string(b)
}

// TestSuffixServesOnlyItsGroups: under a suffix the agent serves only the
// renamed groups, so a Concierge (or another agent) can keep the default
// ones; and an agent with the default serves nothing of a suffix.
func TestSuffixServesOnlyItsGroups(t *testing.T) {
	f := newFixture(t)
	f.handler.GroupSuffix = suffix
	token := f.token(t, nil)

	code, body := do(t, f.handler, http.MethodPost, "/apis/login.concierge.tuna.io/v1alpha1/tokencredentialrequests",
		suffixedTCR(token, "login.concierge.tuna.io/v1alpha1", "authentication.concierge.tuna.io"))
	var out loginv1alpha1.TokenCredentialRequest
	if code != http.StatusCreated || json.Unmarshal(body, &out) != nil || out.Status.Credential == nil {
		t.Fatalf("exchange under the suffix: %d %s", code, body)
	}
	if out.APIVersion != "login.concierge.tuna.io/v1alpha1" {
		t.Fatalf("answered as %s", out.APIVersion)
	}

	for path, want := range map[string]string{
		"/apis":                                                    `"name":"login.concierge.tuna.io"`,
		"/apis/login.concierge.tuna.io":                            `"groupVersion":"login.concierge.tuna.io/v1alpha1"`,
		"/apis/identity.concierge.tuna.io":                         `"name":"identity.concierge.tuna.io"`,
		"/apis/login.concierge.tuna.io/v1alpha1":                   `"groupVersion":"login.concierge.tuna.io/v1alpha1"`,
		"/apis/identity.concierge.tuna.io/v1alpha1":                `"name":"whoamirequests"`,
		"/apis/identity.concierge.tuna.io/v1alpha1/whoamirequests": `"apiVersion":"identity.concierge.tuna.io/v1alpha1"`,
	} {
		code, body := do(t, f.handler, http.MethodGet, path, "")
		if code != http.StatusOK || !bytes.Contains(body, []byte(want)) {
			t.Errorf("GET %s: %d %s, want %s", path, code, body, want)
		}
		if bytes.Contains(body, []byte("pinniped.dev")) {
			t.Errorf("GET %s names the default groups: %s", path, body)
		}
	}

	for _, path := range []string{
		"/apis/login.concierge.pinniped.dev",
		"/apis/login.concierge.pinniped.dev/v1alpha1",
		tcrPath,
		"/apis/identity.concierge.pinniped.dev/v1alpha1/whoamirequests",
	} {
		if code, body := do(t, f.handler, http.MethodPost, path, tcrBody(token, "JWTAuthenticator", "dex")); code != http.StatusNotFound {
			t.Errorf("POST %s under a suffix: %d %s, want 404", path, code, body)
		}
	}

	// The default handler knows nothing of the suffix.
	d := newFixture(t)
	if code, body := do(t, d.handler, http.MethodPost, "/apis/login.concierge.tuna.io/v1alpha1/tokencredentialrequests",
		suffixedTCR(token, "login.concierge.tuna.io/v1alpha1", "authentication.concierge.tuna.io")); code != http.StatusNotFound {
		t.Errorf("default handler, suffixed path: %d %s, want 404", code, body)
	}
}

// TestSuffixChecksAPIVersionAndAuthenticatorGroup: a request naming the
// default groups on the suffixed path is refused, so a client built for
// another server cannot be served by accident.
func TestSuffixChecksAPIVersionAndAuthenticatorGroup(t *testing.T) {
	f := newFixture(t)
	f.handler.GroupSuffix = suffix
	token := f.token(t, nil)
	path := exchange.TokenCredentialRequestPath(suffix)
	if path != "/apis/login.concierge.tuna.io/v1alpha1/tokencredentialrequests" {
		t.Fatalf("path %s", path)
	}

	code, body := do(t, f.handler, http.MethodPost, path,
		suffixedTCR(token, "login.concierge.pinniped.dev/v1alpha1", "authentication.concierge.tuna.io"))
	if code != http.StatusBadRequest || !strings.Contains(string(body), "expected login.concierge.tuna.io/v1alpha1") {
		t.Errorf("default apiVersion on the suffixed path: %d %s", code, body)
	}

	code, body = do(t, f.handler, http.MethodPost, path,
		suffixedTCR(token, "login.concierge.tuna.io/v1alpha1", "authentication.concierge.pinniped.dev"))
	var out loginv1alpha1.TokenCredentialRequest
	if code != http.StatusCreated || json.Unmarshal(body, &out) != nil || out.Status.Credential != nil || out.Status.Message == nil {
		t.Fatalf("default authenticator group: %d %s", code, body)
	}
	if n := len(f.results); n == 0 || !strings.Contains(f.results[n-1].Reason, "authentication.concierge.tuna.io") {
		t.Errorf("reason %+v", f.results)
	}

	req := httptest.NewRequest(http.MethodPost, "/apis/identity.concierge.tuna.io/v1alpha1/whoamirequests",
		strings.NewReader(`{"apiVersion":"identity.concierge.tuna.io/v1alpha1","kind":"WhoAmIRequest"}`))
	req = req.WithContext(request.WithUser(req.Context(), &user.DefaultInfo{Name: "bob"}))
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated || !strings.Contains(rec.Body.String(), `"apiVersion":"identity.concierge.tuna.io/v1alpha1"`) {
		t.Errorf("WhoAmIRequest under the suffix: %d %s", rec.Code, rec.Body)
	}
}
