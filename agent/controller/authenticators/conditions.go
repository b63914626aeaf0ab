package authenticators

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/tokentimes"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt"
)

// steps lists each kind's conditions in the order they are checked; a
// failure makes its own condition False and the later ones Unknown.
var steps = map[string][]string{
	kindJWT: jwt.Steps,
	kindWebhook: {
		authv1alpha1.ConditionTLSConfigurationValid,
		authv1alpha1.ConditionEndpointURLValid,
		authv1alpha1.ConditionAuthenticatorValid,
		authv1alpha1.ConditionWebhookConnectionValid,
	},
}

// setConditions writes the conditions for the outcome err of building the
// authenticator; ready is the Ready condition's message when it worked.
func setConditions(conds *[]metav1.Condition, phase *authv1alpha1.Phase, kind string, generation int64, err error, now time.Time, ready string) {
	failed := ""
	if se, ok := err.(*jwt.StepError); ok { //nolint:errorlint // build returns *StepError unwrapped
		failed = se.Condition
	} else if err != nil {
		failed = authv1alpha1.ConditionAuthenticatorValid
	}
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(conds, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
	reached := false
	for _, t := range steps[kind] {
		switch {
		case reached:
			set(t, metav1.ConditionUnknown, "UnableToValidate", "not checked because an earlier check failed")
		case t == failed:
			reached = true
			set(t, metav1.ConditionFalse, "Invalid", err.Error())
		default:
			set(t, metav1.ConditionTrue, "Success", "ok")
		}
	}
	if kind == kindJWT {
		// JWT has no separate AuthenticatorValid step; it is the sum of the others.
		if failed == "" {
			set(authv1alpha1.ConditionAuthenticatorValid, metav1.ConditionTrue, "Success", "authenticator initialized")
		} else {
			set(authv1alpha1.ConditionAuthenticatorValid, metav1.ConditionUnknown, "UnableToValidate", "not checked because an earlier check failed")
		}
	}
	if failed == "" {
		set(authv1alpha1.ConditionReady, metav1.ConditionTrue, "Success", ready)
		*phase = authv1alpha1.PhaseReady
		return
	}
	set(authv1alpha1.ConditionReady, metav1.ConditionFalse, "NotReady", "the "+failed+" condition is not true: "+err.Error())
	*phase = authv1alpha1.PhaseError
}

// conditionsChanged ignores LastTransitionTime, which SetStatusCondition
// keeps stable for unchanged conditions anyway.
func conditionsChanged(before, after []metav1.Condition) bool {
	if len(before) != len(after) {
		return true
	}
	for _, a := range after {
		b := meta.FindStatusCondition(before, a.Type)
		if b == nil || b.Status != a.Status || b.Reason != a.Reason || b.Message != a.Message || b.ObservedGeneration != a.ObservedGeneration {
			return true
		}
	}
	return false
}

// readyMessage is the Ready condition's message for a working
// authenticator. A JWTAuthenticator's states the clock skew in force (the
// spec's, clamped as the agent applies it), since that decides how long
// after exp a token is still taken.
func readyMessage(spec any) string {
	const ready = "the authenticator is validating tokens"
	s, ok := spec.(authv1alpha1.JWTAuthenticatorSpec)
	if !ok {
		return ready
	}
	skew := jwt.AllowedClockSkew(s)
	msg := fmt.Sprintf("%s; allowedClockSkew %s: until %s after its exp, and none whose nbf or iat is more than %s ahead", ready, skew, skew, tokentimes.NotBeforeLeeway+skew)
	if skew == 0 {
		msg = ready + "; allowedClockSkew 0s: none after its exp, and none whose nbf or iat is more than " + tokentimes.NotBeforeLeeway.String() + " ahead (kube-apiserver's rules, and iat, which it does not check)"
	}
	// A negative value is clamped to 0 too: compare the stored value, not
	// the clamped one, with 0.
	if s.AllowedClockSkew != nil && s.AllowedClockSkew.Duration != skew {
		msg += fmt.Sprintf(" (spec.allowedClockSkew %s is outside 0s to %s)", s.AllowedClockSkew.Duration, tokentimes.MaxClockSkew)
	}
	return msg
}
