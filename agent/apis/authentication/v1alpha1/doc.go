// Package v1alpha1 is the authentication.concierge.pinniped.dev/v1alpha1 API:
// the JWTAuthenticator and WebhookAuthenticator custom resources that tell the
// agent which external tokens to trust.
//
// +kubebuilder:object:generate=true
// +groupName=authentication.concierge.pinniped.dev
package v1alpha1
