package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WhoAmIRequestSpec is empty: the caller's identity is the question.
type WhoAmIRequestSpec struct{}

// WhoAmIRequestStatus is how the cluster sees the caller.
type WhoAmIRequestStatus struct {
	KubernetesUserInfo KubernetesUserInfo `json:"kubernetesUserInfo"`
}

// KubernetesUserInfo is the authenticated user and the audiences the
// credential was valid for.
type KubernetesUserInfo struct {
	User UserInfo `json:"user"`
	// +optional
	Audiences []string `json:"audiences,omitempty"`
}

// UserInfo mirrors authentication.k8s.io UserInfo.
type UserInfo struct {
	Username string `json:"username"`
	// +optional
	UID string `json:"uid,omitempty"`
	// +optional
	Groups []string `json:"groups,omitempty"`
	// +optional
	Extra map[string]ExtraValue `json:"extra,omitempty"`
}

// ExtraValue is a named type so it round-trips the same way as in
// authentication.k8s.io.
type ExtraValue []string

// WhoAmIRequest reflects back the identity of whoever creates it. It is
// cluster-scoped and never stored.
//
// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=create
// +kubebuilder:object:root=true
type WhoAmIRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WhoAmIRequestSpec   `json:"spec,omitempty"`
	Status WhoAmIRequestStatus `json:"status,omitempty"`
}

// WhoAmIRequestList exists for discovery; listing always returns nothing.
//
// +kubebuilder:object:root=true
type WhoAmIRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []WhoAmIRequest `json:"items"`
}
