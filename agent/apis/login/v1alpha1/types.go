package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TokenCredentialRequestSpec is what the caller sends: an external token and
// the authenticator that should judge it.
type TokenCredentialRequestSpec struct {
	// Token is the bearer token from the external identity provider.
	// The agent never logs or stores it.
	Token string `json:"token,omitempty"`

	// Authenticator names the JWTAuthenticator or WebhookAuthenticator
	// (apiGroup authentication.concierge.pinniped.dev) to validate Token with.
	Authenticator corev1.TypedLocalObjectReference `json:"authenticator"`
}

// TokenCredentialRequestStatus holds either a credential or a message, never both.
type TokenCredentialRequestStatus struct {
	// Credential is the issued cluster credential, set on success.
	// +optional
	Credential *ClusterCredential `json:"credential,omitempty"`

	// Message is set when no credential was issued. It is deliberately
	// vague ("authentication failed") so it tells an attacker nothing.
	// +optional
	Message *string `json:"message,omitempty"`
}

// ClusterCredential is a short-lived credential for the cluster, in the same
// shape as client.authentication.k8s.io ExecCredentialStatus.
type ClusterCredential struct {
	// ExpirationTimestamp is when the credential stops working.
	ExpirationTimestamp metav1.Time `json:"expirationTimestamp,omitempty"`

	// Token is a bearer token for the cluster, if the agent issued one.
	Token string `json:"token,omitempty"`

	// ClientCertificateData is a PEM client certificate for the cluster.
	ClientCertificateData string `json:"clientCertificateData,omitempty"`

	// ClientKeyData is the PEM private key of ClientCertificateData.
	ClientKeyData string `json:"clientKeyData,omitempty"`
}

// TokenCredentialRequest trades an external token for a short-lived cluster
// credential. It is cluster-scoped and only ever created, never stored.
//
// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=create
// +kubebuilder:object:root=true
type TokenCredentialRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TokenCredentialRequestSpec   `json:"spec,omitempty"`
	Status TokenCredentialRequestStatus `json:"status,omitempty"`
}

// TokenCredentialRequestList exists because Kubernetes discovery and kubectl
// expect a list kind; listing always returns an empty list.
//
// +kubebuilder:object:root=true
type TokenCredentialRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []TokenCredentialRequest `json:"items"`
}
