package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WebhookAuthenticatorSpec points at a TokenReview webhook.
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.tls.certificateAuthorityData) || !has(self.tls.certificateAuthorityDataSource)",message="set at most one of tls.certificateAuthorityData and tls.certificateAuthorityDataSource"
type WebhookAuthenticatorSpec struct {
	// Endpoint is the https URL the agent POSTs TokenReviews to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^https://`
	Endpoint string `json:"endpoint"`

	// TLS configures how to verify the webhook's serving certificate.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`
}

// WebhookAuthenticatorStatus is the agent's view of the webhook.
type WebhookAuthenticatorStatus struct {
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

// Condition types specific to WebhookAuthenticator.
const (
	ConditionEndpointURLValid       = "EndpointURLValid"
	ConditionWebhookConnectionValid = "WebhookConnectionValid"
)

// WebhookAuthenticator tells the agent to ask a TokenReview webhook about tokens.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=pinniped;pinniped-authenticator;pinniped-authenticators
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.endpoint`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WebhookAuthenticator struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WebhookAuthenticatorSpec   `json:"spec"`
	Status WebhookAuthenticatorStatus `json:"status,omitempty"`
}

// WebhookAuthenticatorList is a list of WebhookAuthenticator.
//
// +kubebuilder:object:root=true
type WebhookAuthenticatorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []WebhookAuthenticator `json:"items"`
}
