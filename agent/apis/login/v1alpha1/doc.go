// Package v1alpha1 is the login.concierge.pinniped.dev/v1alpha1 API: the
// TokenCredentialRequest that trades an external token for a short-lived
// cluster credential. It is served by the agent as an aggregated API, never
// stored, so it has no CRD.
//
// +kubebuilder:object:generate=true
// +groupName=login.concierge.pinniped.dev
package v1alpha1
