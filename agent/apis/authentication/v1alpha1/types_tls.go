package v1alpha1

// TLSSpec says which certificate authorities to trust when the agent talks
// to an identity provider or webhook. Without it the system roots are used.
type TLSSpec struct {
	// CertificateAuthorityData is a base64-encoded PEM bundle.
	// +optional
	CertificateAuthorityData string `json:"certificateAuthorityData,omitempty"`

	// CertificateAuthorityDataSource reads the bundle from a Secret or
	// ConfigMap in the agent's namespace instead, so it can rotate without
	// editing the authenticator. Mutually exclusive with CertificateAuthorityData.
	// +optional
	CertificateAuthorityDataSource *CABundleSource `json:"certificateAuthorityDataSource,omitempty"`
}

// CABundleSource points at a key of a Secret or ConfigMap holding a PEM bundle.
type CABundleSource struct {
	// Kind is Secret or ConfigMap.
	// +kubebuilder:validation:Enum=Secret;ConfigMap
	Kind string `json:"kind"`

	// Name of the Secret or ConfigMap in the agent's namespace.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Key within the Secret or ConfigMap whose value is the PEM bundle.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// Phase is the one-word summary of an authenticator's conditions.
// +kubebuilder:validation:Enum=Pending;Ready;Error
type Phase string

const (
	// PhasePending means the agent has not finished checking the authenticator.
	PhasePending Phase = "Pending"
	// PhaseReady means the authenticator is validating tokens.
	PhaseReady Phase = "Ready"
	// PhaseError means a condition is false; the conditions say what to fix.
	PhaseError Phase = "Error"
)

// Condition types shared by both authenticator kinds.
const (
	ConditionReady                 = "Ready"
	ConditionAuthenticatorValid    = "AuthenticatorValid"
	ConditionTLSConfigurationValid = "TLSConfigurationValid"
)
