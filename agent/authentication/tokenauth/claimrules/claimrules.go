// Package claimrules makes the Kubernetes user from a verified token's
// claims the way kube-apiserver's structured authentication does
// (AuthenticationConfiguration jwt: claimValidationRules, claimMappings,
// userValidationRules). The checks and the CEL compilation are
// k8s.io/apiserver's own (validation.CompileAndValidateJWTAuthenticator and
// the authentication/cel mappers); this package only feeds them claims and
// reads their results, as the API server's OIDC authenticator does. That
// authenticator is not used whole because it verifies the token itself,
// strictly on exp (the agent allows for skewed clocks: tokentimes), and it
// links an egress-selector and gRPC stack the agent has no use for; a
// differential test holds this package to it.
package claimrules

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/apiserver"
	apiservervalidation "k8s.io/apiserver/pkg/apis/apiserver/validation"
	authenticationcel "k8s.io/apiserver/pkg/authentication/cel"
	authenticationtokenjwt "k8s.io/apiserver/pkg/authentication/token/jwt"
	"k8s.io/apiserver/pkg/authentication/user"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/lazy"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth"
)

// Rules are one JWTAuthenticator's compiled claim rules.
type Rules struct {
	cfg      apiserver.JWTAuthenticator
	mapper   authenticationcel.CELMapper
	required map[string]string
	usesCEL  bool
	// budget is CostBudget (tests lower it to reach the run-time check).
	budget int64
}

// Upstream Pinniped's defaults for spec.claims.
const (
	defaultUsernameClaim = "username"
	defaultGroupsClaim   = "groups"
)

// Model is the spec in Kubernetes' model: spec.claimMappings as written,
// or upstream's spec.claims as upstream Pinniped hands them to the same
// authenticator (claim names, no prefix).
func Model(spec authv1alpha1.JWTAuthenticatorSpec) apiserver.JWTAuthenticator {
	cfg := apiserver.JWTAuthenticator{
		Issuer: apiserver.Issuer{
			URL:                 spec.Issuer,
			Audiences:           append([]string{spec.Audience}, spec.Audiences...),
			AudienceMatchPolicy: apiserver.AudienceMatchPolicyType(spec.AudienceMatchPolicy),
		},
	}
	if len(cfg.Issuer.Audiences) > 1 && cfg.Issuer.AudienceMatchPolicy == "" {
		// kube-apiserver requires the policy be spelled out; its one value
		// is what more than one audience can only mean.
		cfg.Issuer.AudienceMatchPolicy = apiserver.AudienceMatchPolicyMatchAny
	}
	for _, r := range spec.ClaimValidationRules {
		cfg.ClaimValidationRules = append(cfg.ClaimValidationRules, apiserver.ClaimValidationRule(r))
	}
	for _, r := range spec.UserValidationRules {
		cfg.UserValidationRules = append(cfg.UserValidationRules, apiserver.UserValidationRule(r))
	}
	if m := spec.ClaimMappings; m != nil {
		cfg.ClaimMappings = apiserver.ClaimMappings{
			Username: apiserver.PrefixedClaimOrExpression(m.Username),
			Groups:   apiserver.PrefixedClaimOrExpression(m.Groups),
			UID:      apiserver.ClaimOrExpression(m.UID),
		}
		for _, e := range m.Extra {
			cfg.ClaimMappings.Extra = append(cfg.ClaimMappings.Extra, apiserver.ExtraMapping(e))
		}
		return cfg
	}
	none := ""
	cfg.ClaimMappings = apiserver.ClaimMappings{
		Username: apiserver.PrefixedClaimOrExpression{Claim: or(spec.Claims.Username, defaultUsernameClaim), Prefix: &none},
		Groups:   apiserver.PrefixedClaimOrExpression{Claim: or(spec.Claims.Groups, defaultGroupsClaim), Prefix: &none},
	}
	return cfg
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Compile checks the spec's claim rules with kube-apiserver's own
// validation and compiles its CEL expressions. The error names each field
// that is wrong, by its path in the JWTAuthenticator.
func Compile(spec authv1alpha1.JWTAuthenticatorSpec) (*Rules, error) {
	var errs field.ErrorList
	if spec.ClaimMappings != nil && (spec.Claims.Username != "" || spec.Claims.Groups != "") {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "claims"), "set claims (upstream Pinniped's form) or claimMappings (Kubernetes' form), not both"))
	}
	if spec.ClaimMappings != nil && len(spec.ClaimMappings.Extra) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "claimMappings", "extra"),
			"the agent's client certificates cannot carry extra values; map what RBAC needs into the username or groups"))
	}
	cfg := Model(spec)
	// Too many rules are refused before any is compiled: compiling costs too.
	if tooMany := overBudget(cfg, nil); len(tooMany) > 0 {
		return nil, append(errs, tooMany...).ToAggregate()
	}
	c := &compiler{}
	mapper, verrs := apiservervalidation.CompileAndValidateJWTAuthenticator(c, cfg, nil)
	for _, e := range verrs {
		e.Field = specPath(e.Field)
		errs = append(errs, e)
	}
	if len(errs) == 0 {
		errs = overBudget(cfg, c.estimates)
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	r := &Rules{cfg: cfg, mapper: mapper, required: map[string]string{}, budget: CostBudget}
	for _, v := range cfg.ClaimValidationRules {
		if v.Claim != "" {
			r.required[v.Claim] = v.RequiredValue
		}
	}
	r.usesCEL = mapper.Username != nil || mapper.Groups != nil || mapper.UID != nil ||
		mapper.Extra != nil || mapper.ClaimValidationRules != nil
	return r, nil
}

// specPath names a field of Kubernetes' JWTAuthenticator by its place in
// ours: issuer.url is spec.issuer, the claim rules keep their names.
func specPath(p string) string {
	switch {
	case p == "issuer.url":
		return "spec.issuer"
	case strings.HasPrefix(p, "issuer.audiences"):
		// Kubernetes' list is spec.audience followed by spec.audiences.
		var i int
		if _, err := fmt.Sscanf(strings.TrimPrefix(p, "issuer.audiences"), "[%d]", &i); err != nil {
			return "spec.audience, spec.audiences"
		}
		if i == 0 {
			return "spec.audience"
		}
		return fmt.Sprintf("spec.audiences[%d]", i-1)
	case p == "issuer.audienceMatchPolicy":
		return "spec.audienceMatchPolicy"
	}
	return "spec." + p
}

// User applies the rules to the claims of a token whose signature, issuer,
// audience and times are already verified.
func (r *Rules) User(ctx context.Context, claims map[string]json.RawMessage) (*user.DefaultInfo, error) {
	var claimsValue *lazy.MapValue
	if r.usesCEL {
		claimsValue = claimsToCEL(claims)
		ctx = context.WithValue(ctx, budgetKey{}, &budget{left: r.budget})
	}
	name, err := r.username(ctx, claims, claimsValue)
	if err != nil {
		return nil, err
	}
	u := &user.DefaultInfo{Name: name}
	if u.Groups, err = r.groups(ctx, claims, claimsValue); err != nil {
		return nil, err
	}
	if u.UID, err = r.uid(ctx, claims, claimsValue); err != nil {
		return nil, err
	}
	for claim, want := range r.required {
		raw, ok := claims[claim]
		if !ok {
			return nil, fmt.Errorf("required claim %q is missing", claim)
		}
		var got string
		if err := json.Unmarshal(raw, &got); err != nil {
			return nil, fmt.Errorf("required claim %q is not a string", claim)
		}
		if got != want {
			// The value is the person's (their domain, tenant, role):
			// the rule goes in the message, the value only in Detail.
			return nil, &tokenauth.RefusedError{By: fmt.Sprintf("the claim validation rule that claim %q be %q", claim, want), Detail: fmt.Sprintf("the token's %q is %q", claim, got)}
		}
	}
	if r.mapper.ClaimValidationRules != nil {
		results, err := r.mapper.ClaimValidationRules.EvalClaimMappings(ctx, claimsValue)
		if err := allTrue("claim validation rule", results, err); err != nil {
			return nil, err
		}
	}
	if r.mapper.UserValidationRules != nil {
		// As kube-apiserver, the rules see the token's credential ID (from
		// jti) in extra; the certificate never carries it.
		seen := *u
		if id := credentialID(claims); id != "" {
			seen.Extra = map[string][]string{user.CredentialIDKey: {id}}
		}
		results, err := r.mapper.UserValidationRules.EvalUser(ctx, userToCEL(&seen))
		if err := allTrue("user validation rule", results, err); err != nil {
			return nil, err
		}
	}
	return u, nil
}

func (r *Rules) username(ctx context.Context, claims map[string]json.RawMessage, cv *lazy.MapValue) (string, error) {
	if r.mapper.Username != nil {
		res, err := r.mapper.Username.EvalClaimMapping(ctx, cv)
		if err != nil {
			return "", evalRefusal("claimMappings.username.expression", err)
		}
		name, ok := res.EvalResult.Value().(string)
		if res.EvalResult.Type() != celgo.StringType || !ok {
			return "", errors.New("claimMappings.username.expression must return a string")
		}
		if name == "" {
			return "", errors.New("claimMappings.username.expression returned an empty username")
		}
		return name, nil
	}
	m := r.cfg.ClaimMappings.Username
	raw, ok := claims[m.Claim]
	if !ok {
		return "", fmt.Errorf("token has no %q claim to use as the username", m.Claim)
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return "", fmt.Errorf("claim %q (the username) must be a string", m.Claim)
	}
	if name == "" {
		// kube-apiserver takes it (and adds the prefix); no cluster
		// credential is ever issued for an empty name, so say so here.
		return "", fmt.Errorf("claim %q (the username) is empty", m.Claim)
	}
	// An unverified address is anyone's to claim.
	if m.Claim == "email" {
		if v, ok := claims["email_verified"]; ok {
			var verified bool
			if err := json.Unmarshal(v, &verified); err != nil || !verified {
				return "", errors.New("email is the username but email_verified is not true")
			}
		}
	}
	if m.Prefix != nil {
		name = *m.Prefix + name
	}
	return name, nil
}

func (r *Rules) groups(ctx context.Context, claims map[string]json.RawMessage, cv *lazy.MapValue) ([]string, error) {
	m := r.cfg.ClaimMappings.Groups
	if m.Claim != "" {
		raw, ok := claims[m.Claim]
		if !ok {
			if distributed(claims, m.Claim) {
				// kube-apiserver would fetch it; taking the user with no
				// groups instead could let a rule that denies a group pass.
				return nil, fmt.Errorf("the groups claim %q is a distributed claim (_claim_names: Entra ID sends one when a user has too many groups), which the agent does not fetch: "+
					"have the provider emit fewer groups (e.g. only groups assigned to the application)", m.Claim)
			}
			return nil, nil
		}
		groups, err := stringOrList(raw)
		if err != nil {
			return nil, fmt.Errorf("claim %q (the groups): %w", m.Claim, err)
		}
		if m.Prefix != nil && *m.Prefix != "" {
			for i := range groups {
				groups[i] = *m.Prefix + groups[i]
			}
		}
		return groups, nil
	}
	if r.mapper.Groups == nil {
		return nil, nil
	}
	res, err := r.mapper.Groups.EvalClaimMapping(ctx, cv)
	if err != nil {
		return nil, evalRefusal("claimMappings.groups.expression", err)
	}
	groups, err := stringList(res.EvalResult)
	if err != nil {
		return nil, fmt.Errorf("claimMappings.groups.expression: %w", err)
	}
	return groups, nil
}

func (r *Rules) uid(ctx context.Context, claims map[string]json.RawMessage, cv *lazy.MapValue) (string, error) {
	if c := r.cfg.ClaimMappings.UID.Claim; c != "" {
		raw, ok := claims[c]
		if !ok {
			return "", fmt.Errorf("token has no %q claim to use as the UID", c)
		}
		var uid string
		if err := json.Unmarshal(raw, &uid); err != nil {
			return "", fmt.Errorf("claim %q (the UID) must be a string", c)
		}
		return uid, nil
	}
	if r.mapper.UID == nil {
		return "", nil
	}
	res, err := r.mapper.UID.EvalClaimMapping(ctx, cv)
	if err != nil {
		return "", evalRefusal("claimMappings.uid.expression", err)
	}
	uid, ok := res.EvalResult.Value().(string)
	if res.EvalResult.Type() != celgo.StringType || !ok {
		return "", errors.New("claimMappings.uid.expression must return a string")
	}
	return uid, nil
}

// distributed reports whether the token names claim as a distributed
// claim (OpenID Connect Core 5.6.2).
func distributed(claims map[string]json.RawMessage, claim string) bool {
	var names map[string]json.RawMessage
	if err := json.Unmarshal(claims["_claim_names"], &names); err != nil {
		return false
	}
	_, ok := names[claim]
	return ok
}

// allTrue refuses at the first rule that did not hold (or when evaluating
// failed: evalErr), naming it and its message.
func allTrue(what string, results []authenticationcel.EvaluationResult, evalErr error) error {
	if evalErr != nil {
		return evalRefusal(what, evalErr)
	}
	for _, res := range results {
		ok, isBool := res.EvalResult.Value().(bool)
		if res.EvalResult.Type() != celgo.BoolType || !isBool {
			return fmt.Errorf("%s %q must return a bool", what, res.ExpressionAccessor.GetExpression())
		}
		if !ok {
			msg := "it returned false"
			switch c := res.ExpressionAccessor.(type) {
			case *authenticationcel.ClaimValidationCondition:
				msg = cmp.Or(c.Message, msg)
			case *authenticationcel.UserValidationCondition:
				msg = cmp.Or(c.Message, msg)
			}
			return fmt.Errorf("%s %q refused the token: %s", what, res.ExpressionAccessor.GetExpression(), msg)
		}
	}
	return nil
}

// evalRefusal is an expression that failed on a token's claims. CEL's own
// words may quote a claim's value (a failed conversion does), and values
// are the person's: the message names the expression (kube's mapper puts
// it before CEL's error), CEL's words go only in Detail, which the
// exchange logs when identities may be logged. Running out of the cost
// budget quotes nothing and stays in the message.
func evalRefusal(what string, err error) error {
	if errors.Is(err, errOverBudget) {
		return fmt.Errorf("%s: %w", what, err)
	}
	by := what + " (its expression failed to evaluate)"
	if inner := errors.Unwrap(err); inner != nil {
		if outer, ok := strings.CutSuffix(err.Error(), ": "+inner.Error()); ok && !strings.Contains(outer, inner.Error()) {
			by = what + " (" + outer + ")"
		}
	}
	return &tokenauth.RefusedError{By: by, Detail: err.Error()}
}

// stringOrList reads a claim that is a string or a list of strings.
func stringOrList(raw json.RawMessage) ([]string, error) {
	var many []string
	if err := json.Unmarshal(raw, &many); err == nil {
		return many, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, errors.New("must be a string or a list of strings")
	}
	return []string{one}, nil
}

// stringList reads an expression's result as Kubernetes does: a string or
// a list of strings, where "" and [] and null mean none and empty strings
// in a list are dropped.
func stringList(v ref.Val) ([]string, error) {
	errType := errors.New("must return a string or a list of strings")
	switch v.Type().TypeName() {
	case celgo.NullType.TypeName():
		return nil, nil
	case celgo.StringType.TypeName():
		s, _ := v.Value().(string)
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	case celgo.ListType(nil).TypeName():
		var out []string
		add := func(e any) error {
			s, ok := e.(string)
			if !ok {
				return errType
			}
			if s != "" {
				out = append(out, s)
			}
			return nil
		}
		switch list := v.Value().(type) {
		case []any:
			for _, e := range list {
				if err := add(e); err != nil {
					return nil, err
				}
			}
		case []ref.Val:
			for _, e := range list {
				if err := add(e.Value()); err != nil {
					return nil, err
				}
			}
		default:
			return nil, errType
		}
		return out, nil
	}
	return nil, errType
}

// claimsToCEL is the claims as the expressions see them: decoded on first
// use, with Kubernetes' escapes (__dot__ and friends) understood in keys at
// any depth.
func claimsToCEL(claims map[string]json.RawMessage) *lazy.MapValue {
	m := lazy.NewMapValue(types.NewObjectType("kubernetes.claims"))
	for name, raw := range claims {
		m.Append(name, func(*lazy.MapValue) ref.Val {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return types.NewErr("claim %q is not JSON: %v", name, err)
			}
			return toCEL(v)
		})
	}
	return m
}

func credentialID(claims map[string]json.RawMessage) string {
	var jti string
	if err := json.Unmarshal(claims["jti"], &jti); err != nil || jti == "" {
		return ""
	}
	return authenticationtokenjwt.CredentialIDForJTI(jti)
}

func userToCEL(u user.Info) *lazy.MapValue {
	m := lazy.NewMapValue(types.NewObjectType("kubernetes.UserInfo"))
	for name, v := range map[string]any{"username": u.GetName(), "uid": u.GetUID(), "groups": u.GetGroups(), "extra": u.GetExtra()} {
		m.Append(name, func(*lazy.MapValue) ref.Val { return toCEL(v) })
	}
	return m
}

func toCEL(v any) ref.Val { return unescaping(types.DefaultTypeAdapter.NativeToValue(v)) }

// unescaping wraps maps and lists so that keys written escaped in an
// expression find their claims however deep they are.
func unescaping(v ref.Val) ref.Val {
	switch t := v.(type) {
	case traits.Mapper:
		return escapedMap{t}
	case traits.Lister:
		return escapedList{t}
	}
	return v
}

type escapedMap struct{ traits.Mapper }

func (m escapedMap) Find(key ref.Val) (ref.Val, bool) {
	if s, ok := key.(types.String); ok {
		if name, ok := apiservercel.Unescape(string(s)); ok && name != string(s) {
			key = types.String(name)
		}
	}
	v, found := m.Mapper.Find(key)
	return unescaping(v), found
}

type escapedList struct{ traits.Lister }

func (l escapedList) Get(i ref.Val) ref.Val { return unescaping(l.Lister.Get(i)) }
