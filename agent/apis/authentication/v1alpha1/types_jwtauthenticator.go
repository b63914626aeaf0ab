package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JWTAuthenticatorSpec configures how to validate JWTs from one OIDC issuer.
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.tls.certificateAuthorityData) || !has(self.tls.certificateAuthorityDataSource)",message="set at most one of tls.certificateAuthorityData and tls.certificateAuthorityDataSource"
type JWTAuthenticatorSpec struct {
	// Issuer is the OIDC issuer URL. It must be https: tokens from a
	// plain-http issuer could be forged by anyone on the network path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^https://`
	Issuer string `json:"issuer"`

	// Audience is the required "aud" claim. Use a value unique to this
	// cluster so a token minted for one cluster cannot be replayed on another.
	// +kubebuilder:validation:MinLength=1
	Audience string `json:"audience"`

	// Claims maps token claims to the Kubernetes username and groups.
	// +optional
	Claims JWTTokenClaims `json:"claims"`

	// TLS configures how to verify the issuer's serving certificate.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`
}

// JWTTokenClaims names the claims that carry the user's identity.
type JWTTokenClaims struct {
	// Groups is the claim holding the groups, as an array or a single string.
	// Defaults to "groups".
	// +optional
	Groups string `json:"groups"`

	// Username is the claim holding the username. Defaults to "username".
	// +optional
	Username string `json:"username"`
}

// JWTAuthenticatorStatus is the agent's view of the authenticator.
type JWTAuthenticatorStatus struct {
	// Conditions say what is working and, when not, what to fix.
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Phase summarises the conditions.
	// +kubebuilder:default=Pending
	// +optional
	Phase Phase `json:"phase,omitempty"`
}

// Condition types specific to JWTAuthenticator.
const (
	ConditionIssuerURLValid    = "IssuerURLValid"
	ConditionDiscoveryURLValid = "DiscoveryURLValid"
	ConditionJWKSURLValid      = "JWKSURLValid"
	ConditionJWKSFetchValid    = "JWKSFetchValid"
)

// JWTAuthenticator tells the agent to trust JWTs from an OIDC issuer.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=pinniped;pinniped-authenticator;pinniped-authenticators
// +kubebuilder:printcolumn:name="Issuer",type=string,JSONPath=`.spec.issuer`
// +kubebuilder:printcolumn:name="Audience",type=string,JSONPath=`.spec.audience`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type JWTAuthenticator struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   JWTAuthenticatorSpec   `json:"spec"`
	Status JWTAuthenticatorStatus `json:"status,omitempty"`
}

// JWTAuthenticatorList is a list of JWTAuthenticator.
//
// +kubebuilder:object:root=true
type JWTAuthenticatorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []JWTAuthenticator `json:"items"`
}
