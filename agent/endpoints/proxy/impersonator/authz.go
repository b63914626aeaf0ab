package impersonator

import (
	"context"
	"fmt"
	"sort"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// SARAuthorizer allows a nested impersonation only if the real user may
// "impersonate" every requested attribute, asked of the API server with
// SubjectAccessReviews: the same checks kube-apiserver itself makes for
// kubectl --as, so RBAC stays the single source of truth.
type SARAuthorizer struct {
	Reviews authorizationv1client.SubjectAccessReviewInterface
}

// CanImpersonate implements Authorizer.
func (a *SARAuthorizer) CanImpersonate(ctx context.Context, real user.Info, want *Request) (bool, string, error) {
	var checks []authorizationv1.ResourceAttributes
	if ns, name, err := serviceaccount.SplitUsername(want.User); err == nil {
		checks = append(checks, authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: ns, Name: name})
	} else {
		checks = append(checks, authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users", Name: want.User})
	}
	for _, g := range want.Groups {
		checks = append(checks, authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "groups", Name: g})
	}
	if want.UID != "" {
		checks = append(checks, authorizationv1.ResourceAttributes{Verb: "impersonate", Group: "authentication.k8s.io", Resource: "uids", Name: want.UID})
	}
	keys := make([]string, 0, len(want.Extra))
	for k := range want.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range want.Extra[k] {
			checks = append(checks, authorizationv1.ResourceAttributes{Verb: "impersonate", Group: "authentication.k8s.io", Resource: "userextras", Subresource: k, Name: v})
		}
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range real.GetExtra() {
		extra[k] = v
	}
	for _, attrs := range checks {
		sar, err := a.Reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: real.GetName(), UID: real.GetUID(), Groups: real.GetGroups(), Extra: extra, ResourceAttributes: &attrs,
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
		}
		if !sar.Status.Allowed {
			what := attrs.Resource + " " + attrs.Name
			if attrs.Subresource != "" {
				what = "extra " + attrs.Subresource + "=" + attrs.Name
			}
			return false, "not allowed to impersonate " + what, nil
		}
	}
	return true, "", nil
}
