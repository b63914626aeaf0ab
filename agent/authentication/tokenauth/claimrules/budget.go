package claimrules

import (
	"context"
	"errors"
	"fmt"
	"sync"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/apis/apiserver"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	authenticationcel "k8s.io/apiserver/pkg/authentication/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// kube-apiserver bounds each CEL expression of structured authentication
// (celconfig.PerCallLimit, at run time) but neither how many there are nor
// what they cost together, so one authenticator's rules could cost many
// times that for every token, and the token exchange is anonymous. The
// agent bounds both, per JWTAuthenticator.
const (
	// MaxRules caps spec.claimValidationRules and spec.userValidationRules
	// each, as kube-apiserver caps its other lists of CEL conditions
	// (matchConditions) and of JWT authenticators.
	MaxRules = 64
	// CostBudget is what all of one authenticator's expressions may cost
	// together for one token: kube-apiserver's budget for one set of
	// match conditions (roughly a quarter of a second of CPU). Compile
	// refuses rules whose estimated cost exceeds it, each expression
	// counted at most at celconfig.PerCallLimit (evaluation stops it
	// there), so the sum bounds what a token can cost; evaluation refuses
	// a token whose rules' actual cost exceeds it all the same.
	CostBudget = celconfig.RuntimeCELCostBudgetMatchConditions
	// maxClaimsBytes bounds the size of anything an expression sees, for
	// the estimate: the exchange refuses tokens over 64 KiB
	// (exchange.MaxTokenBytes), whose claims are base64url, so at most
	// 48 KiB of JSON; no string, list or map in them is larger.
	maxClaimsBytes = 48 << 10
)

// errOverBudget is in the error of a token whose rules cost more than
// CostBudget.
var errOverBudget = errors.New("the claim rules cost more than their budget for one token")

// compiler builds the CEL environment on first use and shares it: it costs
// several MiB and a good part of a second, which an agent whose
// authenticators use claim names only never pays. It records each
// expression's estimated cost, and its programs spend the token's budget.
type compiler struct {
	estimates map[string]uint64 // by variable and expression
}

var sharedCompiler = sync.OnceValue(func() authenticationcel.Compiler {
	return authenticationcel.NewCompiler(environment.MustBaseEnvSet(celVersion))
})

// celVersion is the CEL environment claim rules compile in: the one the
// agent's libraries before Kubernetes 1.37's had (kube-apiserver's own
// default is its previous minor, so its rules survive a rollback of one).
// Moving it on makes rules valid that an agent rolled back refuses, which
// would break their authenticator mid-upgrade: move it only when no
// release an upgrade can come from has an older one.
var celVersion = version.MajorMinor(1, 33)

func (c *compiler) CompileClaimsExpression(e authenticationcel.ExpressionAccessor) (authenticationcel.CompilationResult, error) {
	res, err := sharedCompiler().CompileClaimsExpression(e)
	return c.budgeted("claims", e, res, err)
}

func (c *compiler) CompileUserExpression(e authenticationcel.ExpressionAccessor) (authenticationcel.CompilationResult, error) {
	res, err := sharedCompiler().CompileUserExpression(e)
	return c.budgeted("user", e, res, err)
}

func (c *compiler) budgeted(variable string, e authenticationcel.ExpressionAccessor, res authenticationcel.CompilationResult, err error) (authenticationcel.CompilationResult, error) {
	if err != nil {
		return res, err
	}
	est, err := checker.Cost(res.AST.NativeRep(), &library.CostEstimator{SizeEstimator: claimsSize{}}, checker.PresenceTestHasCost(false))
	if err != nil {
		return authenticationcel.CompilationResult{}, fmt.Errorf("estimate the expression's cost: %w", err)
	}
	if c.estimates == nil {
		c.estimates = map[string]uint64{}
	}
	c.estimates[variable+"\x00"+e.GetExpression()] = est.Max
	res.Program = budgetedProgram{res.Program}
	return res, nil
}

// claimsSize: nothing an expression sees is larger than the claims.
type claimsSize struct{}

func (claimsSize) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: maxClaimsBytes}
}

func (claimsSize) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// overBudget refuses rules too many or too costly for one token, naming
// the list that is too long, or the expression at which the estimated
// total passes CostBudget. It runs before the rules are compiled, for the
// counts, and after, for the costs (estimates nil).
func overBudget(cfg apiserver.JWTAuthenticator, estimates map[string]uint64) field.ErrorList {
	spec := field.NewPath("spec")
	if estimates == nil {
		var errs field.ErrorList
		if n := len(cfg.ClaimValidationRules); n > MaxRules {
			errs = append(errs, field.TooMany(spec.Child("claimValidationRules"), n, MaxRules))
		}
		if n := len(cfg.UserValidationRules); n > MaxRules {
			errs = append(errs, field.TooMany(spec.Child("userValidationRules"), n, MaxRules))
		}
		return errs
	}
	type expr struct {
		path     *field.Path
		variable string
		text     string
	}
	var all []expr
	for i, r := range cfg.ClaimValidationRules {
		all = append(all, expr{spec.Child("claimValidationRules").Index(i).Child("expression"), "claims", r.Expression})
	}
	m := cfg.ClaimMappings
	all = append(all,
		expr{spec.Child("claimMappings", "username", "expression"), "claims", m.Username.Expression},
		expr{spec.Child("claimMappings", "groups", "expression"), "claims", m.Groups.Expression},
		expr{spec.Child("claimMappings", "uid", "expression"), "claims", m.UID.Expression})
	for i, r := range cfg.UserValidationRules {
		all = append(all, expr{spec.Child("userValidationRules").Index(i).Child("expression"), "user", r.Expression})
	}
	var total uint64
	for _, e := range all {
		if e.text == "" {
			continue
		}
		total += min(estimates[e.variable+"\x00"+e.text], celconfig.PerCallLimit)
		if total > CostBudget {
			return field.ErrorList{field.Forbidden(e.path, fmt.Sprintf(
				"the claim rules' estimated cost for one token reaches %d with this expression, over the budget of %d for all of them together "+
					"(for claims of up to %d bytes, each expression counted at most at the per-expression limit of %d): "+
					"use fewer or simpler expressions (a claim rule instead of an expression, no loops over a list claim where a claim name will do)",
				total, CostBudget, maxClaimsBytes, celconfig.PerCallLimit))}
		}
	}
	return nil
}

// budgetKey carries the token's *budget in the context its rules are
// evaluated with.
type budgetKey struct{}

// budget is what is left of CostBudget for one token; one token's rules
// are evaluated one after the other, never concurrently.
type budget struct{ left int64 }

// budgetedProgram spends the token's budget on each evaluation: one that
// starts with nothing left is not run, and one that overspends refuses the
// token. Each evaluation is itself bounded by celconfig.PerCallLimit, so a
// token costs at most CostBudget plus that.
type budgetedProgram struct{ celgo.Program }

func (p budgetedProgram) ContextEval(ctx context.Context, input any) (ref.Val, *celgo.EvalDetails, error) {
	b, _ := ctx.Value(budgetKey{}).(*budget)
	if b != nil && b.left <= 0 {
		return nil, nil, errOverBudget
	}
	v, details, err := p.Program.ContextEval(ctx, input)
	if b != nil {
		if cost := details.ActualCost(); cost != nil {
			b.left -= int64(min(*cost, uint64(CostBudget)+1)) //nolint:gosec // bounded above
		}
		if b.left < 0 && err == nil {
			return nil, details, errOverBudget
		}
	}
	return v, details, err
}
