package jwt_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/fips140"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl/redirect/redirecttest"
	"github.com/pinniped-kit/pinniped/agent/apis/tokentimes"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/claimrules"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt/jwttest"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newAuth(t *testing.T, iss *jwttest.Issuer, mutate func(*jwt.Config)) *jwt.Authenticator {
	t.Helper()
	cfg := jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL, Audience: "cluster-a"}, CABundle: iss.CABundle, Now: func() time.Time { return now }}
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := jwt.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func claims(iss *jwttest.Issuer, extra map[string]any) map[string]any {
	c := map[string]any{
		"iss": iss.URL, "aud": "cluster-a", "sub": "u1",
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(),
		"username": "alice", "groups": []string{"devs", "ops"},
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

func TestValidToken(t *testing.T) {
	iss := jwttest.New(t)
	a := newAuth(t, iss, nil)
	resp, ok, err := a.AuthenticateToken(context.Background(), iss.Sign(t, claims(iss, nil)))
	if err != nil || !ok {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	if resp.User.GetName() != "alice" || !slices.Equal(resp.User.GetGroups(), []string{"devs", "ops"}) {
		t.Fatalf("user %+v", resp.User)
	}
}

func TestClaimMappings(t *testing.T) {
	iss := jwttest.New(t)
	a := newAuth(t, iss, func(c *jwt.Config) { c.Spec.Claims = authv1alpha1.JWTTokenClaims{Username: "email", Groups: "roles"} })

	resp, _, err := a.AuthenticateToken(context.Background(), iss.Sign(t, claims(iss, map[string]any{
		"email": "a@example.com", "email_verified": true, "roles": "admin",
	})))
	if err != nil || resp.User.GetName() != "a@example.com" || !slices.Equal(resp.User.GetGroups(), []string{"admin"}) {
		t.Fatalf("string groups: %+v %v", resp, err)
	}

	_, _, err = a.AuthenticateToken(context.Background(), iss.Sign(t, claims(iss, map[string]any{
		"email": "a@example.com", "email_verified": false,
	})))
	if err == nil || !strings.Contains(err.Error(), "email_verified") {
		t.Fatalf("unverified email must be refused, got %v", err)
	}

	_, _, err = a.AuthenticateToken(context.Background(), iss.Sign(t, claims(iss, map[string]any{
		"email": "a@example.com", "roles": map[string]any{"x": 1},
	})))
	if err == nil {
		t.Fatal("groups claim of the wrong type must be refused")
	}
}

func TestRejections(t *testing.T) {
	iss := jwttest.New(t)
	a := newAuth(t, iss, nil)
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	cases := map[string]string{
		"expired":        iss.Sign(t, claims(iss, map[string]any{"exp": now.Add(-time.Second).Unix()})),
		"no exp":         iss.Sign(t, claims(iss, map[string]any{"exp": nil})),
		"wrong audience": iss.Sign(t, claims(iss, map[string]any{"aud": "cluster-b"})),
		"wrong issuer":   iss.Sign(t, claims(iss, map[string]any{"iss": "https://evil.example.com"})),
		"no username":    iss.Sign(t, claims(iss, map[string]any{"username": nil})),
		"empty username": iss.Sign(t, claims(iss, map[string]any{"username": ""})),
		"unknown key":    jwttest.SignWith(t, stranger, "key-1", claims(iss, nil)),
		"garbage":        "not.a.jwt",
		"empty":          "",
		"unsigned":       "eyJhbGciOiJub25lIn0." + strings.Repeat("e30", 1) + ".",
	}
	for name, token := range cases {
		t.Run(name, func(t *testing.T) {
			resp, ok, err := a.AuthenticateToken(context.Background(), token)
			if err == nil || ok || resp != nil {
				t.Fatalf("token accepted: ok=%v resp=%+v", ok, resp)
			}
		})
	}
}

// TestExpiredRefusedWithoutSkew: with spec.allowedClockSkew unset, the
// rules are kube-apiserver's: a token 1 s past its exp is refused, whatever
// its lifetime and with or without iat, and so is one whose nbf is more
// than a minute ahead; so is one whose iat is (kube-apiserver does not
// check iat). The error (which the agent logs) names the
// rule and the skew, never a claim's value.
func TestExpiredRefusedWithoutSkew(t *testing.T) {
	iss := jwttest.New(t)
	a := newAuth(t, iss, nil)
	for name, c := range map[string]struct {
		extra map[string]any
		rule  string
	}{
		"10-minute token 1 s past exp":      {map[string]any{"iat": now.Add(-10*time.Minute - time.Second).Unix(), "exp": now.Add(-time.Second).Unix()}, "exp is past"},
		"1 s past exp, no iat":              {map[string]any{"iat": nil, "exp": now.Add(-time.Second).Unix()}, "exp is past"},
		"2-minute token 1 s past exp":       {map[string]any{"iat": now.Add(-2*time.Minute - time.Second).Unix(), "exp": now.Add(-time.Second).Unix()}, "exp is past"},
		"nbf 61 s ahead":                    {map[string]any{"nbf": now.Add(61 * time.Second).Unix()}, "nbf is ahead"},
		"fractional nbf just over 1m ahead": {map[string]any{"nbf": float64(now.Add(time.Minute).Unix()) + 0.5}, "nbf is ahead"},
		"iat 61 s ahead":                    {map[string]any{"iat": now.Add(61 * time.Second).Unix()}, "iat is ahead"},
	} {
		t.Run(name, func(t *testing.T) {
			cl := claims(iss, c.extra)
			_, ok, err := a.AuthenticateToken(context.Background(), iss.Sign(t, cl))
			if err == nil || ok {
				t.Fatalf("accepted: ok=%v err=%v", ok, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.rule) || !strings.Contains(msg, "spec.allowedClockSkew is 0s") {
				t.Errorf("the error does not name the rule %q and the skew: %s", c.rule, msg)
			}
			// As a date, and as the raw seconds a claim carries.
			values := []string{"alice", "2026", "T10:", "T09:", strconv.FormatInt(now.Unix(), 10)}
			for _, v := range cl {
				switch v := v.(type) {
				case int64:
					values = append(values, strconv.FormatInt(v, 10))
				case float64:
					values = append(values, strconv.FormatInt(int64(v), 10))
				}
			}
			for _, v := range values {
				if strings.Contains(msg, v) {
					t.Errorf("the error carries a claim's value (%q): %s", v, msg)
				}
			}
		})
	}
	for name, extra := range map[string]map[string]any{
		"exp now":              {"exp": now.Unix()},
		"nbf and iat 1m ahead": {"iat": now.Add(time.Minute).Unix(), "nbf": now.Add(time.Minute).Unix()},
	} {
		if _, _, err := a.AuthenticateToken(context.Background(), iss.Sign(t, claims(iss, extra))); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// clock is a test's clock, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestClockSkew plays an issuer whose clock is 2 minutes ahead of or
// behind the agent's, issuing a Pinniped Supervisor's 2-minute cluster-scoped
// ID tokens, which reach the agent up to 30 s later (a login's retries while
// an agent replica restarts). With spec.allowedClockSkew at its cap each is
// accepted; a token beyond it is not, and a larger value in the spec (past
// the CRD) counts as the cap.
func TestClockSkew(t *testing.T) {
	iss := jwttest.New(t)
	for _, set := range []time.Duration{tokentimes.MaxClockSkew, time.Hour} {
		t.Run("allowedClockSkew "+set.String(), func(t *testing.T) {
			a := newAuth(t, iss, func(c *jwt.Config) { c.Spec.AllowedClockSkew = &metav1.Duration{Duration: set} })
			const life, transit = 2 * time.Minute, 30 * time.Second
			for _, skew := range []time.Duration{2 * time.Minute, -2 * time.Minute, 0} {
				for _, late := range []time.Duration{0, transit} {
					issued := now.Add(skew).Add(-late) // the issuer's clock when it signed
					c := claims(iss, map[string]any{"iat": issued.Unix(), "nbf": issued.Unix(), "exp": issued.Add(life).Unix()})
					if _, _, err := a.AuthenticateToken(context.Background(), iss.Sign(t, c)); err != nil {
						t.Errorf("issuer %+v, arrives %v later: refused: %v", skew, late, err)
					}
				}
			}
			const most = tokentimes.MaxClockSkew
			for name, extra := range map[string]map[string]any{
				"expired beyond the skew":        {"exp": now.Add(-most - time.Second).Unix()},
				"iat beyond 1m and the skew":     {"iat": now.Add(time.Minute + most + time.Second).Unix()},
				"nbf beyond 1m and the skew":     {"nbf": now.Add(time.Minute + most + time.Second).Unix()},
				"nbf not a number":               {"nbf": "soon"},
				"fractional nbf beyond the skew": {"nbf": float64(now.Add(time.Minute+most).Unix()) + 0.5},
			} {
				if _, ok, err := a.AuthenticateToken(context.Background(), iss.Sign(t, claims(iss, extra))); err == nil || ok {
					t.Errorf("%s: accepted: ok=%v err=%v", name, ok, err)
				}
			}
			// The edges themselves are in.
			for name, extra := range map[string]map[string]any{
				"iat and nbf 1m and the skew ahead": {"iat": now.Add(time.Minute + most).Unix(), "nbf": now.Add(time.Minute + most).Unix(), "exp": now.Add(time.Hour).Unix()},
				"the skew past exp":                 {"iat": now.Add(-most - 10*time.Minute).Unix(), "exp": now.Add(-most).Unix()},
			} {
				if _, _, err := a.AuthenticateToken(context.Background(), iss.Sign(t, claims(iss, extra))); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		})
	}
}

// TestKeyRotation checks that keys are cached, and refetched when a token
// names a key id the agent has not seen, once KeyRefetchInterval has
// passed since the last fetch.
func TestKeyRotation(t *testing.T) {
	iss := jwttest.New(t)
	clk := &clock{t: now}
	a := newAuth(t, iss, func(c *jwt.Config) { c.Now = clk.Now })
	if n := iss.JWKSFetches.Load(); n != 1 {
		t.Fatalf("New fetched the keys %d times, want 1 (its probe)", n)
	}
	for range 3 {
		if _, _, err := a.AuthenticateToken(context.Background(), iss.Sign(t, claims(iss, nil))); err != nil {
			t.Fatal(err)
		}
	}
	if n := iss.JWKSFetches.Load(); n != 1 {
		t.Fatalf("keys fetched %d times for the probe and 3 tokens, want 1 (the probe's keys serve the tokens)", n)
	}
	iss.Rotate(t)
	rotated := iss.Sign(t, claims(iss, nil))
	clk.Add(time.Second)
	if _, _, err := a.AuthenticateToken(context.Background(), rotated); err == nil {
		t.Fatal("a token signed by a new key was accepted before the keys could be refetched")
	}
	if n := iss.JWKSFetches.Load(); n != 1 {
		t.Fatalf("keys fetched %d times within %s of the last fetch, want no refetch", n, jwt.KeyRefetchInterval)
	}
	clk.Add(jwt.KeyRefetchInterval - time.Second)
	// go-oidc's RemoteKeySet hands a caller the result of a fetch that has
	// finished but not yet cleared itself (a window of microseconds after
	// the refused try above), so the first try may see the old keys. A
	// login retried a moment later must succeed.
	var err error
	for try := 0; try < 50; try++ {
		if _, _, err = a.AuthenticateToken(context.Background(), rotated); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("token signed with a rotated key, %s after the last fetch: %v", jwt.KeyRefetchInterval, err)
	}
	if n := iss.JWKSFetches.Load(); n != 2 {
		t.Fatalf("keys fetched %d times, want one refetch after rotation", n)
	}
}

// TestForgedTokensFetchKeysOnce: tokens the issuer never signed, naming a
// key id it does not have or one it has, cost the issuer no request while
// its keys were fetched less than KeyRefetchInterval ago.
func TestForgedTokensFetchKeysOnce(t *testing.T) {
	iss := jwttest.New(t)
	clk := &clock{t: now}
	a := newAuth(t, iss, func(c *jwt.Config) { c.Now = clk.Now })
	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		kid := fmt.Sprintf("forged-%d", i)
		if i%5 == 0 {
			kid = "key-1" // the issuer's own key id, another signature
		}
		if _, _, err := a.AuthenticateToken(context.Background(), jwttest.SignWith(t, forger, kid, claims(iss, nil))); err == nil {
			t.Fatalf("forged token %d accepted", i)
		}
		clk.Add(100 * time.Millisecond) // 5 s in all: still within the window
	}
	if n := iss.JWKSFetches.Load(); n != 1 {
		t.Fatalf("the issuer's keys were fetched %d times for New and 50 forged tokens, want 1", n)
	}
	if _, _, err := a.AuthenticateToken(context.Background(), iss.Sign(t, claims(iss, nil))); err != nil {
		t.Fatalf("a genuine token after the forged ones: %v", err)
	}
	clk.Add(jwt.KeyRefetchInterval)
	forged := make([]string, 50)
	for i := range forged {
		forged[i] = jwttest.SignWith(t, forger, fmt.Sprintf("again-%d", i), claims(iss, nil))
	}
	var wg sync.WaitGroup
	for _, tok := range forged {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = a.AuthenticateToken(context.Background(), tok)
		}()
	}
	wg.Wait()
	if n := iss.JWKSFetches.Load(); n != 2 {
		t.Fatalf("keys fetched %d times after 50 concurrent forged tokens in a new window, want 2", n)
	}
}

func TestConfigErrors(t *testing.T) {
	iss := jwttest.New(t)
	ctx := context.Background()
	if _, err := jwt.New(ctx, jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: "http://" + strings.TrimPrefix(iss.URL, "https://"), Audience: "a"}}); !errors.Is(err, httpsurl.ErrNotHTTPS) {
		t.Errorf("http issuer: %v", err)
	}
	if _, err := jwt.New(ctx, jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL, Audience: "a"}}); err == nil || !strings.Contains(err.Error(), "discovery") {
		t.Errorf("untrusted CA should fail discovery: %v", err)
	}
	if _, err := jwt.New(ctx, jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL, Audience: "a"}, CABundle: []byte("nope")}); err == nil {
		t.Errorf("bad CA bundle accepted")
	}
	if _, err := jwt.New(ctx, jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL + "/other", Audience: "a"}, CABundle: iss.CABundle}); err == nil {
		t.Errorf("issuer mismatch in discovery accepted")
	}
	if _, err := jwt.New(ctx, jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL}, CABundle: iss.CABundle}); err == nil {
		t.Errorf("empty audience accepted")
	}
}

func BenchmarkAuthenticateToken(b *testing.B) {
	iss := jwttest.New(b)
	a, err := jwt.New(context.Background(), jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL, Audience: "cluster-a"}, CABundle: iss.CABundle, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	token := iss.Sign(b, claims(iss, nil))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := a.AuthenticateToken(context.Background(), token); err != nil {
			b.Fatal(err)
		}
	}
}

func TestStepErrorsNameTheCondition(t *testing.T) {
	iss := jwttest.New(t)
	ctx := context.Background()
	cases := map[string]jwt.Config{
		jwt.CondTLSConfigurationValid: {Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL, Audience: "a"}, CABundle: []byte("junk")},
		jwt.CondIssuerURLValid:        {Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: "http://x", Audience: "a"}},
		jwt.CondDiscoveryURLValid:     {Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL + "/nope", Audience: "a"}, CABundle: iss.CABundle},
	}
	for want, cfg := range cases {
		_, err := jwt.New(ctx, cfg)
		var step *jwt.StepError
		if !errors.As(err, &step) || step.Condition != want {
			t.Errorf("want a %s failure, got %v", want, err)
		}
	}
}

// With spec.audiences a token for any of them is taken (kube-apiserver's
// MatchAny), and one for none of them is not.
func TestAnyOfSeveralAudiences(t *testing.T) {
	iss := jwttest.New(t)
	a := newAuth(t, iss, func(c *jwt.Config) { c.Spec.Audiences = []string{"cluster-b"} })
	for aud, ok := range map[string]bool{"cluster-a": true, "cluster-b": true, "cluster-c": false} {
		_, got, err := a.AuthenticateToken(context.Background(), iss.Sign(t, claims(iss, map[string]any{"aud": aud})))
		if got != ok {
			t.Errorf("aud %s: accepted %v (%v), want %v", aud, got, err, ok)
		}
	}
	_, got, _ := a.AuthenticateToken(context.Background(), iss.Sign(t, claims(iss, map[string]any{"aud": []string{"x", "cluster-b"}})))
	if !got {
		t.Error("a token with cluster-b among its audiences was refused")
	}
}

func TestClaimRulesErrorNamesTheCondition(t *testing.T) {
	iss := jwttest.New(t)
	_, err := jwt.New(context.Background(), jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{
		Issuer: iss.URL, Audience: "a",
		ClaimMappings: &authv1alpha1.ClaimMappings{Username: authv1alpha1.PrefixedClaimOrExpression{Expression: "claims.sub +"}},
	}, CABundle: iss.CABundle})
	var step *jwt.StepError
	if !errors.As(err, &step) || step.Condition != jwt.CondClaimRulesValid || !strings.Contains(err.Error(), "spec.claimMappings.username.expression") {
		t.Fatalf("got %v", err)
	}
}

// TestHTTPClientRedirects: discovery and JWKS fetches follow redirects only
// to https, and never resend a body to another origin.
func TestHTTPClientRedirects(t *testing.T) {
	redirecttest.Check(t, jwt.HTTPClient)
}

// TestClaimRulesOverBudgetNameTheField: rules over the per-token cost
// budget, or too many of them, fail ClaimRulesValid naming the field.
func TestClaimRulesOverBudgetNameTheField(t *testing.T) {
	iss := jwttest.New(t)
	var costly, many []authv1alpha1.ClaimValidationRule
	for i := range 20 {
		costly = append(costly, authv1alpha1.ClaimValidationRule{Expression: fmt.Sprintf(`dyn(claims.groups).all(g, dyn(g).matches('^team-%d-'))`, i)})
	}
	for i := range claimrules.MaxRules + 1 {
		many = append(many, authv1alpha1.ClaimValidationRule{Claim: fmt.Sprintf("c%d", i), RequiredValue: "v"})
	}
	for want, rules := range map[string][]authv1alpha1.ClaimValidationRule{
		"spec.claimValidationRules[2].expression: Forbidden": costly,
		"spec.claimValidationRules: Too many":                many,
	} {
		_, err := jwt.New(context.Background(), jwt.Config{Spec: authv1alpha1.JWTAuthenticatorSpec{
			Issuer: iss.URL, Audience: "a", ClaimValidationRules: rules,
		}, CABundle: iss.CABundle})
		var step *jwt.StepError
		if !errors.As(err, &step) || step.Condition != jwt.CondClaimRulesValid || !strings.Contains(err.Error(), want) {
			t.Errorf("want %s in ClaimRulesValid, got %v", want, err)
		}
	}
}

// TestRS256: a token signed with an RSA key verifies, at the size kubeadm
// and most identity providers use and at 1024 bits, which only FIPS
// 140-only mode refuses: there, with the reason (make e2e-fips shows that
// refusal on the bed too).
func TestRS256(t *testing.T) {
	iss := jwttest.New(t)
	signers := map[int]func(map[string]any) string{}
	for _, bits := range []int{2048, 1024} {
		_, signers[bits] = iss.AddRS256(t, bits)
	}
	a := newAuth(t, iss, nil)
	for bits, sign := range signers {
		_, ok, err := a.AuthenticateToken(context.Background(), sign(claims(iss, nil)))
		refused := fips140.Enforced() && bits < 2048
		switch {
		case refused && (ok || err == nil || !strings.Contains(err.Error(), "RSA of 1024 bits")):
			t.Errorf("RS256 with %d bits under fips140=only: ok=%v err=%v, want refused with the reason", bits, ok, err)
		case !refused && (err != nil || !ok):
			t.Errorf("RS256 with %d bits: ok=%v err=%v", bits, ok, err)
		}
	}
}
