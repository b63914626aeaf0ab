// Package strategy is the vocabulary of credential strategies: how one is
// probed (Prober), what a working one reports (Working), how a probe names
// its failure (ReasonError, ErrPending), and the CredentialIssuer resource
// whose status reports them all. The strategies (the cluster signing key,
// CSRs, the impersonation proxy) speak it, and the CredentialIssuer
// controller, which only the leader runs, writes what they say; neither
// depends on the other.
package strategy

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/runtime/schema"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
)

// Resource is the CredentialIssuer resource under an API group suffix
// ("" means the default).
func Resource(suffix string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: groupsuffix.Group(groupsuffix.Config, suffix), Version: groupsuffix.Version, Resource: "credentialissuers"}
}

// Prober checks one strategy.
type Prober struct {
	Type configv1alpha1.StrategyType
	// Probe returns nil error when the strategy can issue credentials. A
	// non-nil Working says which frontend clients should use and how to
	// describe it; nil means the aggregated TokenCredentialRequest API.
	Probe func(ctx context.Context) (*Working, error)
	// Success and Failure are the reasons reported either way.
	Success, Failure configv1alpha1.StrategyReason
	// Hint is appended to failure messages: what an admin can do.
	Hint string
}

// Working is a strategy that works, in the words and with the frontend the
// status should show.
type Working struct {
	Message  string
	Frontend *configv1alpha1.CredentialIssuerFrontend
}

// ReasonError lets a probe report a specific reason (e.g. Disabled) instead
// of the prober's generic Failure.
type ReasonError struct {
	Reason configv1alpha1.StrategyReason
	Err    error
}

func (e *ReasonError) Error() string { return e.Err.Error() }
func (e *ReasonError) Unwrap() error { return e.Err }

// ErrPending is what a probe returns while its strategy is still being set
// up; the status then says Pending, and `get kubeconfig` waits for it.
var ErrPending = errors.New("pending")
