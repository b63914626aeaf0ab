// Package v1alpha1 is the config.concierge.pinniped.dev/v1alpha1 API: the
// CredentialIssuer custom resource, whose spec configures the impersonation
// proxy and whose status tells clients which frontend to use.
//
// +kubebuilder:object:generate=true
// +groupName=config.concierge.pinniped.dev
package v1alpha1
