package claimrules_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/apiserver/pkg/authentication/user"
	kubeoidc "k8s.io/apiserver/plugin/pkg/authenticator/token/oidc"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/claimrules"
)

const issuer = "https://issuer.example.com"

func ptr(s string) *string { return &s }

type ruleCase struct {
	name   string
	spec   authv1alpha1.JWTAuthenticatorSpec
	claims map[string]any
	// want is the user, or nil when the token must be refused.
	want *user.DefaultInfo
}

func spec(m *authv1alpha1.ClaimMappings, mutate ...func(*authv1alpha1.JWTAuthenticatorSpec)) authv1alpha1.JWTAuthenticatorSpec {
	s := authv1alpha1.JWTAuthenticatorSpec{Issuer: issuer, Audience: "cluster-a", ClaimMappings: m}
	for _, f := range mutate {
		f(&s)
	}
	return s
}

func cases() []ruleCase {
	byUsername := &authv1alpha1.ClaimMappings{Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "username", Prefix: ptr("")}}
	withGroupsExpr := func(expr string) *authv1alpha1.ClaimMappings {
		return &authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "username", Prefix: ptr("")},
			Groups:   authv1alpha1.PrefixedClaimOrExpression{Expression: expr},
		}
	}
	return []ruleCase{
		{name: "upstream claims, defaults", spec: spec(nil),
			claims: map[string]any{"username": "alice", "groups": []string{"devs", "ops"}},
			want:   &user.DefaultInfo{Name: "alice", Groups: []string{"devs", "ops"}}},
		{name: "upstream claims, one group as a string", spec: spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) { s.Claims = authv1alpha1.JWTTokenClaims{Groups: "role"} }),
			claims: map[string]any{"username": "alice", "role": "admin"},
			want:   &user.DefaultInfo{Name: "alice", Groups: []string{"admin"}}},
		{name: "upstream claims, no groups claim", spec: spec(nil),
			claims: map[string]any{"username": "alice"}, want: &user.DefaultInfo{Name: "alice"}},
		{name: "upstream claims, groups not strings", spec: spec(nil),
			claims: map[string]any{"username": "alice", "groups": []int{1}}},
		{name: "upstream claims, no username claim", spec: spec(nil), claims: map[string]any{"sub": "x"}},
		{name: "email verified", spec: spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) { s.Claims.Username = "email" }),
			claims: map[string]any{"email": "a@example.com", "email_verified": true},
			want:   &user.DefaultInfo{Name: "a@example.com"}},
		{name: "email not verified", spec: spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) { s.Claims.Username = "email" }),
			claims: map[string]any{"email": "a@example.com", "email_verified": false}},
		{name: "prefixes", spec: spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "sub", Prefix: ptr("corp:")},
			Groups:   authv1alpha1.PrefixedClaimOrExpression{Claim: "groups", Prefix: ptr("corp:")},
		}), claims: map[string]any{"sub": "123", "groups": []string{"a", "b"}},
			want: &user.DefaultInfo{Name: "corp:123", Groups: []string{"corp:a", "corp:b"}}},
		{name: "username expression", spec: spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Expression: `claims.sub + "@" + claims.tenant`},
		}), claims: map[string]any{"sub": "bob", "tenant": "t1"}, want: &user.DefaultInfo{Name: "bob@t1"}},
		{name: "username expression not a string", spec: spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Expression: `claims.n`},
		}), claims: map[string]any{"n": 3}},
		{name: "nested groups (Keycloak's realm_access.roles)", spec: spec(withGroupsExpr(`claims.realm_access.roles`)),
			claims: map[string]any{"username": "alice", "realm_access": map[string]any{"roles": []string{"admin", "", "dev"}}},
			want:   &user.DefaultInfo{Name: "alice", Groups: []string{"admin", "dev"}}},
		{name: "groups made with map over a nested claim (as the e2e test on Dex)", spec: spec(withGroupsExpr(`dyn(claims.groups).map(g, claims.fed.connector_id + "/" + g)`)),
			claims: map[string]any{"username": "alice", "groups": []string{"a", "b"}, "fed": map[string]any{"connector_id": "local"}},
			want:   &user.DefaultInfo{Name: "alice", Groups: []string{"local/a", "local/b"}}},
		{name: "groups expression, a string", spec: spec(withGroupsExpr(`claims.team`)),
			claims: map[string]any{"username": "alice", "team": "red"},
			want:   &user.DefaultInfo{Name: "alice", Groups: []string{"red"}}},
		{name: "groups expression, absent with has()", spec: spec(withGroupsExpr(`has(claims.roles) ? claims.roles : []`)),
			claims: map[string]any{"username": "alice"}, want: &user.DefaultInfo{Name: "alice"}},
		{name: "groups expression, not strings", spec: spec(withGroupsExpr(`[1, 2]`)),
			claims: map[string]any{"username": "alice"}},
		{name: "escaped claim name", spec: spec(withGroupsExpr(`claims.corp__dot__groups`)),
			claims: map[string]any{"username": "alice", "corp.groups": []string{"g"}},
			want:   &user.DefaultInfo{Name: "alice", Groups: []string{"g"}}},
		{name: "uid claim (Entra's oid)", spec: spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "username", Prefix: ptr("")},
			UID:      authv1alpha1.ClaimOrExpression{Claim: "oid"},
		}), claims: map[string]any{"username": "alice", "oid": "0000-1"}, want: &user.DefaultInfo{Name: "alice", UID: "0000-1"}},
		{name: "uid claim missing", spec: spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "username", Prefix: ptr("")},
			UID:      authv1alpha1.ClaimOrExpression{Claim: "oid"},
		}), claims: map[string]any{"username": "alice"}},
		{name: "uid expression, nested", spec: spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "username", Prefix: ptr("")},
			UID:      authv1alpha1.ClaimOrExpression{Expression: `claims.fed.user_id`},
		}), claims: map[string]any{"username": "alice", "fed": map[string]any{"user_id": "u-7"}}, want: &user.DefaultInfo{Name: "alice", UID: "u-7"}},
		{name: "required claim holds", spec: spec(byUsername, func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.ClaimValidationRules = []authv1alpha1.ClaimValidationRule{{Claim: "hd", RequiredValue: "example.com"}}
		}), claims: map[string]any{"username": "alice", "hd": "example.com"}, want: &user.DefaultInfo{Name: "alice"}},
		{name: "required claim differs", spec: spec(byUsername, func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.ClaimValidationRules = []authv1alpha1.ClaimValidationRule{{Claim: "hd", RequiredValue: "example.com"}}
		}), claims: map[string]any{"username": "alice", "hd": "evil.com"}},
		{name: "required claim missing", spec: spec(byUsername, func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.ClaimValidationRules = []authv1alpha1.ClaimValidationRule{{Claim: "hd", RequiredValue: "example.com"}}
		}), claims: map[string]any{"username": "alice"}},
		{name: "validation expression holds", spec: spec(byUsername, func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.ClaimValidationRules = []authv1alpha1.ClaimValidationRule{{Expression: `claims.username.endsWith("@example.com")`, Message: "not ours"}}
		}), claims: map[string]any{"username": "a@example.com"}, want: &user.DefaultInfo{Name: "a@example.com"}},
		{name: "validation expression refuses", spec: spec(byUsername, func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.ClaimValidationRules = []authv1alpha1.ClaimValidationRule{{Expression: `claims.username.endsWith("@example.com")`, Message: "not ours"}}
		}), claims: map[string]any{"username": "a@evil.com"}},
		{name: "user validation refuses", spec: spec(withGroupsExpr(`claims.groups`), func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.UserValidationRules = []authv1alpha1.UserValidationRule{{Expression: `!("admins" in user.groups)`, Message: "no admins here"}}
		}), claims: map[string]any{"username": "alice", "groups": "admins"}},
		{name: "user validation sees the credential ID", spec: spec(byUsername, func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.UserValidationRules = []authv1alpha1.UserValidationRule{{Expression: `!("authentication.kubernetes.io/credential-id" in user.extra)`}}
		}), claims: map[string]any{"username": "alice", "jti": "j-1"}},
		{name: "user validation without a jti", spec: spec(byUsername, func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.UserValidationRules = []authv1alpha1.UserValidationRule{{Expression: `!("authentication.kubernetes.io/credential-id" in user.extra)`}}
		}), claims: map[string]any{"username": "alice"}, want: &user.DefaultInfo{Name: "alice"}},
		{name: "distributed groups claim (Entra's overage)", spec: spec(nil),
			claims: map[string]any{"username": "alice", "_claim_names": map[string]any{"groups": "src1"},
				"_claim_sources": map[string]any{"src1": map[string]any{"endpoint": "https://127.0.0.1:1/groups"}}}},
		{name: "user validation holds", spec: spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "username", Prefix: ptr("")},
			Groups:   authv1alpha1.PrefixedClaimOrExpression{Claim: "groups", Prefix: ptr("")},
		}, func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.UserValidationRules = []authv1alpha1.UserValidationRule{{Expression: `!("admins" in user.groups)`}}
		}), claims: map[string]any{"username": "alice", "groups": "devs"}, want: &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}}},
	}
}

func TestRules(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			got, err := ours(t, c)
			checkUser(t, "", got, err, c.want)
		})
	}
}

// TestSameAsKubeAPIServer runs every case through kube-apiserver's own OIDC
// authenticator too, so this package cannot drift from what it holds the
// same configuration to mean.
func TestSameAsKubeAPIServer(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			kube, err := kubeoidc.New(ctx, kubeoidc.Options{
				JWTAuthenticator:     claimrules.Model(c.spec),
				KeySet:               keySet{&key.PublicKey},
				SupportedSigningAlgs: []string{"ES256"},
			})
			if err != nil {
				t.Fatalf("kube-apiserver's authenticator refuses the configuration: %v", err)
			}
			claims := map[string]any{"iss": issuer, "aud": "cluster-a", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
			for k, v := range c.claims {
				claims[k] = v
			}
			payload, _ := json.Marshal(claims)
			jws, err := signer.Sign(payload)
			if err != nil {
				t.Fatal(err)
			}
			token, _ := jws.CompactSerialize()
			resp, ok, err := kube.AuthenticateToken(ctx, token)
			var u user.Info
			if ok && err == nil {
				u = resp.User
			} else if err == nil {
				err = fmt.Errorf("not authenticated")
			}
			checkUser(t, "kube-apiserver: ", u, err, c.want)
		})
	}
}

func ours(t *testing.T, c ruleCase) (user.Info, error) {
	t.Helper()
	r, err := claimrules.Compile(c.spec)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	raw := map[string]json.RawMessage{}
	for k, v := range c.claims {
		raw[k], _ = json.Marshal(v)
	}
	u, err := r.User(context.Background(), raw)
	if err != nil {
		return nil, err
	}
	return u, nil
}

func checkUser(t *testing.T, who string, got user.Info, err error, want *user.DefaultInfo) {
	t.Helper()
	if want == nil {
		if err == nil {
			t.Fatalf("%saccepted as %+v, want refused", who, got)
		}
		return
	}
	if err != nil {
		t.Fatalf("%srefused: %v", who, err)
	}
	if got.GetName() != want.Name || got.GetUID() != want.UID || !slices.Equal(got.GetGroups(), want.Groups) {
		t.Fatalf("%suser %q uid %q groups %q; want %q %q %q", who, got.GetName(), got.GetUID(), got.GetGroups(), want.Name, want.UID, want.Groups)
	}
}

type keySet struct{ pub *ecdsa.PublicKey }

func (k keySet) VerifySignature(_ context.Context, token string) ([]byte, error) {
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, err
	}
	return jws.Verify(k.pub)
}

// An empty username claim is refused here and taken by kube-apiserver; no
// credential could be issued for it anyway.
func TestEmptyUsernameRefused(t *testing.T) {
	_, err := ours(t, ruleCase{spec: spec(nil), claims: map[string]any{"username": ""}})
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("got %v", err)
	}
}

func TestCompileErrorsNameTheField(t *testing.T) {
	for want, s := range map[string]authv1alpha1.JWTAuthenticatorSpec{
		"spec.claimMappings.username.expression": spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Expression: `claims.sub +`}}),
		"spec.claimMappings.groups.expression": spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "sub", Prefix: ptr("")},
			Groups:   authv1alpha1.PrefixedClaimOrExpression{Expression: `claims.nope(`}}),
		"spec.claimMappings.username.prefix": spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "sub"}}),
		"spec.claimMappings.username": spec(&authv1alpha1.ClaimMappings{}),
		// kube-apiserver's rule: an unverified address is anyone's.
		"spec.claimMappings.username.expression: Invalid value: \"claims.email\": claims.email_verified": spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Expression: `claims.email`}}),
		"spec.claimValidationRules[0].expression": spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.ClaimValidationRules = []authv1alpha1.ClaimValidationRule{{Expression: `claims.hd`}}
		}),
		"spec.userValidationRules[0].expression": spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.UserValidationRules = []authv1alpha1.UserValidationRule{{Expression: `user.nope`}}
		}),
		"spec.claimMappings.extra": spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "sub", Prefix: ptr("")},
			Extra:    []authv1alpha1.ExtraMapping{{Key: "example.com/team", ValueExpression: `claims.team`}}}),
		"spec.claims": spec(&authv1alpha1.ClaimMappings{
			Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "sub", Prefix: ptr("")}},
			func(s *authv1alpha1.JWTAuthenticatorSpec) { s.Claims.Username = "email" }),
		"spec.audiences[1]": spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) { s.Audiences = []string{"b", ""} }),
		"spec.audienceMatchPolicy": spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) {
			s.Audiences, s.AudienceMatchPolicy = []string{"b"}, "MatchAll"
		}),
	} {
		_, err := claimrules.Compile(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error naming %s, got %v", want, err)
		}
	}
}

// costlyRules are n distinct claim validation rules, each estimated at
// least at the per-expression limit (a regular expression on each element
// of a list claim).
func costlyRules(n int) []authv1alpha1.ClaimValidationRule {
	var rules []authv1alpha1.ClaimValidationRule
	for i := range n {
		rules = append(rules, authv1alpha1.ClaimValidationRule{Expression: fmt.Sprintf(`dyn(claims.groups).all(g, dyn(g).matches('^team-%d-'))`, i)})
	}
	return rules
}

// TestCostBudgetIsKeptAtCompile: rules whose estimated costs together pass
// the per-token budget are refused, naming the expression that passes it;
// two of them are within it.
func TestCostBudgetIsKeptAtCompile(t *testing.T) {
	if _, err := claimrules.Compile(spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) { s.ClaimValidationRules = costlyRules(2) })); err != nil {
		t.Fatalf("two costly rules: %v", err)
	}
	_, err := claimrules.Compile(spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) { s.ClaimValidationRules = costlyRules(20) }))
	if err == nil || !strings.Contains(err.Error(), "spec.claimValidationRules[2].expression: Forbidden") || !strings.Contains(err.Error(), "budget") {
		t.Fatalf("twenty costly rules: %v; want spec.claimValidationRules[2].expression refused for the budget", err)
	}
}

// TestRuleCountIsCapped: more rules than MaxRules in either list are
// refused, naming the list, before any is compiled.
func TestRuleCountIsCapped(t *testing.T) {
	var claimRules []authv1alpha1.ClaimValidationRule
	var userRules []authv1alpha1.UserValidationRule
	for i := range claimrules.MaxRules + 1 {
		claimRules = append(claimRules, authv1alpha1.ClaimValidationRule{Claim: fmt.Sprintf("c%d", i), RequiredValue: "v"})
		userRules = append(userRules, authv1alpha1.UserValidationRule{Expression: fmt.Sprintf(`user.username != 'u%d'`, i)})
	}
	for want, s := range map[string]authv1alpha1.JWTAuthenticatorSpec{
		"spec.claimValidationRules: Too many: 65": spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) { s.ClaimValidationRules = claimRules }),
		"spec.userValidationRules: Too many: 65":  spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) { s.UserValidationRules = userRules }),
	} {
		if _, err := claimrules.Compile(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
	if _, err := claimrules.Compile(spec(nil, func(s *authv1alpha1.JWTAuthenticatorSpec) {
		s.ClaimValidationRules, s.UserValidationRules = claimRules[:claimrules.MaxRules], userRules[:claimrules.MaxRules]
	})); err != nil {
		t.Errorf("%d rules of each kind: %v", claimrules.MaxRules, err)
	}
}

// TestUsualRulesStayWithinBudget: the e2e suite's rules on Dex, and more of
// the kind, compile and still admit a token.
func TestUsualRulesStayWithinBudget(t *testing.T) {
	s := spec(&authv1alpha1.ClaimMappings{
		Username: authv1alpha1.PrefixedClaimOrExpression{Claim: "email", Prefix: ptr("rules:")},
		Groups:   authv1alpha1.PrefixedClaimOrExpression{Expression: `dyn(claims.groups).map(g, claims.federated_claims.connector_id + "/" + g)`},
		UID:      authv1alpha1.ClaimOrExpression{Expression: `claims.federated_claims.user_id`},
	}, func(s *authv1alpha1.JWTAuthenticatorSpec) {
		s.ClaimValidationRules = []authv1alpha1.ClaimValidationRule{
			{Expression: `!("viewers" in claims.groups)`, Message: "viewers may not use this cluster"},
			{Expression: `claims.email_verified == true`},
			{Expression: `claims.hd == 'example.com'`},
			{Claim: "tenant", RequiredValue: "t1"},
		}
		s.UserValidationRules = []authv1alpha1.UserValidationRule{{Expression: `!user.username.startsWith('system:')`}}
	})
	got, err := ours(t, ruleCase{spec: s, claims: map[string]any{"email": "a@example.com", "email_verified": true, "hd": "example.com", "tenant": "t1",
		"groups": []string{"devs"}, "federated_claims": map[string]any{"connector_id": "ldap", "user_id": "u1"}}})
	checkUser(t, "", got, err, &user.DefaultInfo{Name: "rules:a@example.com", UID: "u1", Groups: []string{"ldap/devs"}})
}
