package claimrules

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
)

// TestCostBudgetIsKeptAtRunTime: with less budget left than the rules
// actually cost, the token is refused; with enough, it is admitted.
func TestCostBudgetIsKeptAtRunTime(t *testing.T) {
	r, err := Compile(authv1alpha1.JWTAuthenticatorSpec{Issuer: "https://issuer.example.com", Audience: "a",
		ClaimMappings: &authv1alpha1.ClaimMappings{Username: authv1alpha1.PrefixedClaimOrExpression{Expression: `claims.sub`}},
		ClaimValidationRules: []authv1alpha1.ClaimValidationRule{
			{Expression: `dyn(claims.groups).all(g, dyn(g).startsWith('team-'))`},
			{Expression: `claims.sub != ''`},
		}})
	if err != nil {
		t.Fatal(err)
	}
	groups := make([]string, 200)
	for i := range groups {
		groups[i] = "team-x"
	}
	raw, _ := json.Marshal(groups)
	claims := map[string]json.RawMessage{"sub": json.RawMessage(`"u1"`), "groups": raw}
	if _, err := r.User(context.Background(), claims); err != nil {
		t.Fatalf("within budget: %v", err)
	}
	r.budget = 100 // less than the loop over 200 groups costs
	if _, err := r.User(context.Background(), claims); !errors.Is(err, errOverBudget) {
		t.Fatalf("over budget: %v, want errOverBudget", err)
	}
}
