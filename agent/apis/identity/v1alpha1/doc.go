// Package v1alpha1 is the identity.concierge.pinniped.dev/v1alpha1 API: the
// WhoAmIRequest that reflects back how the cluster sees the caller. Served by
// the agent as an aggregated API, never stored.
//
// +kubebuilder:object:generate=true
// +groupName=identity.concierge.pinniped.dev
package v1alpha1
