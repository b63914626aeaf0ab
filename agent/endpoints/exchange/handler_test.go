package exchange_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	identityv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/identity/v1alpha1"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt/jwttest"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/endpoints/exchange"
	"github.com/pinniped-kit/pinniped/agent/plumbing/observe"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

type fixture struct {
	handler *exchange.Handler
	iss     *jwttest.Issuer
	ca      *certauthority.CA
	reg     *tokenauth.Registry

	mu      sync.Mutex
	results []observe.Exchange
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{iss: jwttest.New(t), reg: tokenauth.NewRegistry()}
	a, err := jwt.New(context.Background(), jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: f.iss.URL, Audience: "cluster-a"}, CABundle: f.iss.CABundle, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	f.reg.Set(tokenauth.Key{Kind: "JWTAuthenticator", Name: "dex"}, a)
	f.ca, err = certauthority.New("test", time.Hour, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	f.handler = &exchange.Handler{
		Authenticators: f.reg,
		Credentials:    &clustercred.CA{CA: f.ca},
		Now:            func() time.Time { return now },
		Log:            slog.New(slog.DiscardHandler),
		Observe: func(r observe.Exchange) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.results = append(f.results, r)
		},
	}
	return f
}

func (f *fixture) token(t testing.TB, extra map[string]any) string {
	c := map[string]any{"iss": f.iss.URL, "aud": "cluster-a", "sub": "s", "exp": now.Add(time.Hour).Unix(),
		"username": "alice", "groups": []string{"devs"}}
	for k, v := range extra {
		c[k] = v
	}
	return f.iss.Sign(t, c)
}

func tcrBody(token, kind, name string) string {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "login.concierge.pinniped.dev/v1alpha1", "kind": "TokenCredentialRequest",
		"spec": map[string]any{"token": token, "authenticator": map[string]any{
			"apiGroup": "authentication.concierge.pinniped.dev", "kind": kind, "name": name}},
	})
	return string(b)
}

const tcrPath = "/apis/login.concierge.pinniped.dev/v1alpha1/tokencredentialrequests"

func do(t *testing.T, h http.Handler, method, path, body string) (code int, respBody []byte) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func TestExchangeSuccess(t *testing.T) {
	f := newFixture(t)
	token := f.token(t, nil)
	code, body := do(t, f.handler, http.MethodPost, tcrPath, tcrBody(token, "JWTAuthenticator", "dex"))
	if code != http.StatusCreated {
		t.Fatalf("status %d: %s", code, body)
	}
	if bytes.Contains(body, []byte(token)) {
		t.Fatal("response echoes the token")
	}
	var out loginv1alpha1.TokenCredentialRequest
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	cred := out.Status.Credential
	if cred == nil || out.Status.Message != nil {
		t.Fatalf("no credential: %s", body)
	}
	block, _ := pem.Decode([]byte(cred.ClientCertificateData))
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "alice" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "devs" {
		t.Fatalf("subject %v", cert.Subject)
	}
	if !cred.ExpirationTimestamp.Time.Equal(now.Add(clustercred.DefaultTTL)) {
		t.Fatalf("expiry %v", cred.ExpirationTimestamp)
	}
	if len(f.results) != 1 || !f.results[0].Success || f.results[0].Username != "alice" || f.results[0].TokenHash == "" {
		t.Fatalf("observed %+v", f.results)
	}
}

func TestExchangeFailuresSayOnlyAuthenticationFailed(t *testing.T) {
	f := newFixture(t)
	cases := map[string]string{
		"expired":               tcrBody(f.token(t, map[string]any{"exp": now.Add(-time.Hour).Unix()}), "JWTAuthenticator", "dex"),
		"wrong audience":        tcrBody(f.token(t, map[string]any{"aud": "other"}), "JWTAuthenticator", "dex"),
		"wrong issuer":          tcrBody(f.token(t, map[string]any{"iss": "https://elsewhere"}), "JWTAuthenticator", "dex"),
		"garbage":               tcrBody("garbage", "JWTAuthenticator", "dex"),
		"oversized":             tcrBody(strings.Repeat("a", exchange.MaxTokenBytes+1), "JWTAuthenticator", "dex"),
		"system username":       tcrBody(f.token(t, map[string]any{"username": "system:kube-controller-manager"}), "JWTAuthenticator", "dex"),
		"system:masters group":  tcrBody(f.token(t, map[string]any{"groups": []string{"devs", "system:masters"}}), "JWTAuthenticator", "dex"),
		"unknown authenticator": tcrBody(f.token(t, nil), "JWTAuthenticator", "nope"),
		"wrong kind":            tcrBody(f.token(t, nil), "Secret", "dex"),
		"wrong api group":       strings.Replace(tcrBody(f.token(t, nil), "JWTAuthenticator", "dex"), "authentication.concierge", "evil.concierge", 1),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			code, out := do(t, f.handler, http.MethodPost, tcrPath, body)
			if code != http.StatusCreated {
				t.Fatalf("status %d: %s", code, out)
			}
			var tcr loginv1alpha1.TokenCredentialRequest
			if err := json.Unmarshal(out, &tcr); err != nil {
				t.Fatal(err)
			}
			if tcr.Status.Credential != nil || tcr.Status.Message == nil || *tcr.Status.Message != exchange.FailedMessage {
				t.Fatalf("want only %q, got %s", exchange.FailedMessage, out)
			}
		})
	}
	for _, r := range f.results {
		if r.Success || r.Reason == "" {
			t.Errorf("result %+v should record why it failed", r)
		}
	}
}

func TestDeletedAuthenticatorStopsAtOnce(t *testing.T) {
	f := newFixture(t)
	body := tcrBody(f.token(t, nil), "JWTAuthenticator", "dex")
	if _, out := do(t, f.handler, http.MethodPost, tcrPath, body); !bytes.Contains(out, []byte("clientCertificateData")) {
		t.Fatalf("first exchange failed: %s", out)
	}
	f.reg.Delete(tokenauth.Key{Kind: "JWTAuthenticator", Name: "dex"})
	if _, out := do(t, f.handler, http.MethodPost, tcrPath, body); !bytes.Contains(out, []byte(exchange.FailedMessage)) {
		t.Fatalf("exchange after delete: %s", out)
	}
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name, method, path, body, contentType string
		want                                  int
	}{
		{"no token", http.MethodPost, tcrPath, tcrBody("", "JWTAuthenticator", "dex"), "application/json", 422},
		{"not json", http.MethodPost, tcrPath, "{", "application/json", 400},
		{"wrong kind", http.MethodPost, tcrPath, `{"kind":"Pod","apiVersion":"v1"}`, "application/json", 400},
		{"namespaced", http.MethodPost, tcrPath, `{"metadata":{"namespace":"x"},"spec":{"token":"t"}}`, "application/json", 400},
		{"protobuf", http.MethodPost, tcrPath, "x", "application/vnd.kubernetes.protobuf", 415},
		{"too large", http.MethodPost, tcrPath, strings.Repeat(" ", exchange.MaxBodyBytes+1), "application/json", 413},
		{"dry run", http.MethodPost, tcrPath + "?dryRun=All", tcrBody("t", "JWTAuthenticator", "dex"), "application/json", 400},
		{"delete", http.MethodDelete, tcrPath, "", "", 405},
		{"unknown path", http.MethodGet, "/apis/login.concierge.pinniped.dev/v1alpha1/secrets", "", "", 404},
		{"namespaced path", http.MethodPost, "/apis/login.concierge.pinniped.dev/v1alpha1/namespaces/x/tokencredentialrequests", "{}", "application/json", 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			f.handler.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			var st struct{ Kind, Status string }
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || st.Kind != "Status" || st.Status != "Failure" {
				t.Fatalf("not a Kubernetes Status: %s", rec.Body)
			}
		})
	}
}

func TestDiscoveryAndList(t *testing.T) {
	f := newFixture(t)
	for path, want := range map[string]string{
		"/apis":                              `"name":"login.concierge.pinniped.dev"`,
		"/apis/login.concierge.pinniped.dev": `"preferredVersion"`,
		"/apis/login.concierge.pinniped.dev/v1alpha1":    `"name":"tokencredentialrequests"`,
		"/apis/identity.concierge.pinniped.dev/v1alpha1": `"name":"whoamirequests"`,
		tcrPath: `"kind":"TokenCredentialRequestList","apiVersion":"login.concierge.pinniped.dev/v1alpha1","metadata":{},"items":[]`,
	} {
		code, body := do(t, f.handler, http.MethodGet, path, "")
		if code != 200 || !bytes.Contains(body, []byte(want)) {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
}

func TestWhoAmI(t *testing.T) {
	f := newFixture(t)
	req := httptest.NewRequest(http.MethodPost, "/apis/identity.concierge.pinniped.dev/v1alpha1/whoamirequests",
		strings.NewReader(`{"apiVersion":"identity.concierge.pinniped.dev/v1alpha1","kind":"WhoAmIRequest"}`))
	req = req.WithContext(request.WithUser(req.Context(), &user.DefaultInfo{
		Name: "bob", Groups: []string{"g1", "system:authenticated"}, Extra: map[string][]string{"k": {"v"}},
	}))
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	var out identityv1alpha1.WhoAmIRequest
	if rec.Code != 201 || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	u := out.Status.KubernetesUserInfo.User
	if u.Username != "bob" || len(u.Groups) != 2 || u.Extra["k"][0] != "v" {
		t.Fatalf("user %+v", u)
	}
}

func FuzzDecodeTokenCredentialRequest(f *testing.F) {
	fx := newFixture(f)
	f.Add(tcrBody("t", "JWTAuthenticator", "dex"))
	f.Add(`{"spec":{"token":"x","authenticator":{"apiGroup":null}}}`)
	f.Add(`{"kind":1}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, tcrPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		fx.handler.ServeHTTP(rec, req)
		switch rec.Code {
		case 201:
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("invalid JSON response: %s", rec.Body)
			}
		case 400, 413, 415, 422:
		default:
			t.Fatalf("unexpected status %d for %q", rec.Code, body)
		}
	})
}

func BenchmarkExchange(b *testing.B) {
	f := newFixture(b)
	body := tcrBody(f.token(b, nil), "JWTAuthenticator", "dex")
	f.handler.Observe = nil
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodPost, tcrPath, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			f.handler.ServeHTTP(rec, req)
			if rec.Code != 201 || !bytes.Contains(rec.Body.Bytes(), []byte("clientCertificateData")) {
				b.Fatalf("%d %s", rec.Code, rec.Body)
			}
		}
	})
}

// TestRefusedIdentitiesStayOutOfTheLog: a refused username or group is
// personal data; the log and the recorded reason name the rule, and the
// value only when the admin turned identity logging on.
func TestRefusedIdentitiesStayOutOfTheLog(t *testing.T) {
	for _, logIdentities := range []bool{false, true} {
		f := newFixture(t)
		var logged bytes.Buffer
		f.handler.Log = slog.New(slog.NewTextHandler(&logged, nil))
		f.handler.LogIdentities = logIdentities
		for _, claims := range []map[string]any{
			{"username": "system:kube-controller-manager"},
			{"username": "carol", "groups": []string{"devs", "system:masters"}},
			{"username": " system:kube-controller-manager"},
			{"username": "carol", "groups": []string{"devs", " system:masters"}},
		} {
			if code, out := do(t, f.handler, http.MethodPost, tcrPath, tcrBody(f.token(t, claims), "JWTAuthenticator", "dex")); code != http.StatusCreated || !bytes.Contains(out, []byte(exchange.FailedMessage)) {
				t.Fatalf("status %d: %s", code, out)
			}
		}
		var reasons strings.Builder
		for _, r := range f.results {
			reasons.WriteString(r.Reason + "\n")
		}
		for _, where := range []string{logged.String(), reasons.String()} {
			for _, rule := range []string{"reserved system: namespace", "would not reach the API server unchanged"} {
				if !strings.Contains(where, rule) {
					t.Errorf("identity logging %v: the rule %q is not named: %s", logIdentities, rule, where)
				}
			}
			for _, value := range []string{"system:kube-controller-manager", "system:masters"} {
				if strings.Contains(where, value) != logIdentities {
					t.Errorf("identity logging %v: %q in %q", logIdentities, value, where)
				}
			}
		}
	}
}

// TestRefusedClaimValuesStayOutOfTheLog: a token refused by a claim rule
// is logged by the rule, never by the claim's value (the person's domain,
// employee number): not from a required claim's mismatch, nor from CEL's
// error on a bad regular expression (which quotes it), unless the admin
// turned identity logging on.
func TestRefusedClaimValuesStayOutOfTheLog(t *testing.T) {
	for _, logIdentities := range []bool{false, true} {
		f := newFixture(t)
		a, err := jwt.New(context.Background(), jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: f.iss.URL, Audience: "cluster-a",
			ClaimValidationRules: []authv1alpha1.ClaimValidationRule{{Claim: "hd", RequiredValue: "example.com"}, {Expression: `!'x'.matches(claims.employee)`}},
		}, CABundle: f.iss.CABundle, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		f.reg.Set(tokenauth.Key{Kind: "JWTAuthenticator", Name: "rules"}, a)
		var logged bytes.Buffer
		f.handler.Log = slog.New(slog.NewTextHandler(&logged, nil))
		f.handler.LogIdentities = logIdentities
		for _, claims := range []map[string]any{
			{"hd": "hd-of-alice-7c2e", "employee": "1"},
			{"hd": "example.com", "employee": "employee-of-alice-3b9d("}, // not a regular expression
		} {
			if code, out := do(t, f.handler, http.MethodPost, tcrPath, tcrBody(f.token(t, claims), "JWTAuthenticator", "rules")); code != http.StatusCreated || !bytes.Contains(out, []byte(exchange.FailedMessage)) {
				t.Fatalf("status %d: %s", code, out)
			}
		}
		var reasons strings.Builder
		for _, r := range f.results {
			reasons.WriteString(r.Reason + "\n")
		}
		for _, where := range []string{logged.String(), reasons.String()} {
			for _, rule := range []string{`the claim validation rule that claim`, `!'x'.matches(claims.employee)`} {
				if !strings.Contains(where, rule) {
					t.Errorf("identity logging %v: the rule %s is not named: %s", logIdentities, rule, where)
				}
			}
			for _, value := range []string{"hd-of-alice-7c2e", "employee-of-alice-3b9d"} {
				if strings.Contains(where, value) != logIdentities {
					t.Errorf("identity logging %v: %q in %q", logIdentities, value, where)
				}
			}
		}
	}
}
