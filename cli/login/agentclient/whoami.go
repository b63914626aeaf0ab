package agentclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	identityv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/identity/v1alpha1"
)

var selfSubjectReviewGVR = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}

// WhoAmIResult is what WhoAmI learned: the WhoAmIRequest as the agent
// answered it (or as made from Kubernetes' SelfSubjectReview, on a cluster
// without the agent), and where.
type WhoAmIResult struct {
	Cluster, Server string
	Request         identityv1alpha1.WhoAmIRequest
	Source          string
}

// WhoAmI asks the cluster who dyn's user is, as `pinniped whoami` does:
// the agent's WhoAmIRequest under suffix, else Kubernetes'
// SelfSubjectReview. Cluster and Server of the result are left for the
// caller.
func WhoAmI(ctx context.Context, dyn dynamic.Interface, suffix string) (*WhoAmIResult, error) {
	c := dynamicCreator{dyn: dyn}
	gv := schema.GroupVersion{Group: groupsuffix.Group(groupsuffix.Identity, suffix), Version: groupsuffix.Version}
	obj, err := c.create(ctx, gv.WithResource("whoamirequests"), map[string]any{
		"apiVersion": gv.String(), "kind": "WhoAmIRequest", "spec": map[string]any{}})
	if err == nil {
		r := &WhoAmIResult{Source: "WhoAmIRequest (pinniped agent)"}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &r.Request); err != nil {
			return nil, fmt.Errorf("the agent's WhoAmIRequest answer is unreadable: %w", err)
		}
		r.Request.APIVersion, r.Request.Kind = gv.String(), "WhoAmIRequest"
		return r, nil
	}
	if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) && !isNoMatch(err) {
		return nil, fmt.Errorf("ask the cluster who you are: %w", err)
	}
	obj, err2 := c.create(ctx, selfSubjectReviewGVR, map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
	if err2 != nil {
		return nil, fmt.Errorf("ask the cluster who you are (is the pinniped agent installed and ready, with API group suffix %s?): %w", suffix, errors.Join(err, err2))
	}
	var review authenticationv1.SelfSubjectReview
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &review); err != nil {
		return nil, fmt.Errorf("the SelfSubjectReview answer is unreadable: %w", err)
	}
	u := review.Status.UserInfo
	r := &WhoAmIResult{Source: "SelfSubjectReview (Kubernetes)"}
	r.Request.APIVersion, r.Request.Kind = gv.String(), "WhoAmIRequest"
	r.Request.Status.KubernetesUserInfo.User = identityv1alpha1.UserInfo{Username: u.Username, UID: u.UID, Groups: u.Groups}
	for k, v := range u.Extra {
		if r.Request.Status.KubernetesUserInfo.User.Extra == nil {
			r.Request.Status.KubernetesUserInfo.User.Extra = map[string]identityv1alpha1.ExtraValue{}
		}
		r.Request.Status.KubernetesUserInfo.User.Extra[k] = identityv1alpha1.ExtraValue(v)
	}
	return r, nil
}

func isNoMatch(err error) bool {
	return strings.Contains(err.Error(), "could not find the requested resource")
}

type dynamicCreator struct{ dyn dynamic.Interface }

func (d dynamicCreator) create(ctx context.Context, gvr schema.GroupVersionResource, obj map[string]any) (map[string]any, error) {
	u, err := d.dyn.Resource(gvr).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return u.Object, nil
}
