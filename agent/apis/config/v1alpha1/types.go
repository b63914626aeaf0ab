package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImpersonationProxyMode says whether the agent runs the impersonation proxy.
// +kubebuilder:validation:Enum=auto;enabled;disabled
type ImpersonationProxyMode string

const (
	// ImpersonationProxyModeAuto runs the proxy only when no node carries a
	// control-plane role label, i.e. when the cluster signing key is
	// probably out of reach (EKS, GKE, AKS).
	ImpersonationProxyModeAuto ImpersonationProxyMode = "auto"
	// ImpersonationProxyModeEnabled always runs the proxy.
	ImpersonationProxyModeEnabled ImpersonationProxyMode = "enabled"
	// ImpersonationProxyModeDisabled never runs the proxy.
	ImpersonationProxyModeDisabled ImpersonationProxyMode = "disabled"
)

// ImpersonationProxyServiceType is how the proxy is exposed.
// +kubebuilder:validation:Enum=LoadBalancer;ClusterIP;None
type ImpersonationProxyServiceType string

const (
	// ImpersonationProxyServiceTypeLoadBalancer exposes the proxy through a LoadBalancer Service.
	ImpersonationProxyServiceTypeLoadBalancer ImpersonationProxyServiceType = "LoadBalancer"
	// ImpersonationProxyServiceTypeClusterIP exposes the proxy through a ClusterIP Service.
	ImpersonationProxyServiceTypeClusterIP ImpersonationProxyServiceType = "ClusterIP"
	// ImpersonationProxyServiceTypeNone creates no Service; the admin
	// provides one and names it in externalEndpoint.
	ImpersonationProxyServiceTypeNone ImpersonationProxyServiceType = "None"
)

// ImpersonationProxyServiceSpec configures the proxy's Service.
type ImpersonationProxyServiceSpec struct {
	// Type of Service to create.
	// +kubebuilder:default=LoadBalancer
	// +optional
	Type ImpersonationProxyServiceType `json:"type,omitempty"`

	// LoadBalancerIP requests a specific address from the load balancer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +optional
	LoadBalancerIP string `json:"loadBalancerIP,omitempty"`

	// Annotations are copied onto the Service, e.g. to configure a cloud
	// load balancer's idle timeout.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ImpersonationProxyTLSSpec brings your own serving certificate for the proxy.
type ImpersonationProxyTLSSpec struct {
	// CertificateAuthorityData is the base64 PEM CA advertised to clients.
	// When empty, the Secret's ca.crt is advertised if present.
	// +optional
	CertificateAuthorityData string `json:"certificateAuthorityData,omitempty"`

	// SecretName is a kubernetes.io/tls Secret in the agent's namespace to
	// serve instead of a generated certificate. Rotations are picked up live.
	// +optional
	SecretName string `json:"secretName,omitempty"`
}

// ImpersonationProxySpec configures the impersonation proxy.
// +kubebuilder:validation:XValidation:rule="!has(self.service) || !has(self.service.type) || self.service.type != 'None' || (has(self.externalEndpoint) && size(self.externalEndpoint) > 0)",message="externalEndpoint is required when service.type is None"
type ImpersonationProxySpec struct {
	// Mode says whether to run the proxy.
	Mode ImpersonationProxyMode `json:"mode"`

	// Service configures how the proxy is exposed.
	// +kubebuilder:default:={"type": "LoadBalancer"}
	// +optional
	Service ImpersonationProxyServiceSpec `json:"service"`

	// ExternalEndpoint is the host[:port] clients use to reach the proxy,
	// when it is not the Service's own address.
	// +optional
	ExternalEndpoint string `json:"externalEndpoint,omitempty"`

	// TLS configures the proxy's serving certificate.
	// +optional
	TLS *ImpersonationProxyTLSSpec `json:"tls,omitempty"`
}

// CredentialIssuerSpec configures how credentials are issued.
type CredentialIssuerSpec struct {
	// ImpersonationProxy configures the impersonation proxy.
	// +optional
	ImpersonationProxy *ImpersonationProxySpec `json:"impersonationProxy,omitempty"`
}

// StrategyType names a way of issuing cluster credentials.
// +kubebuilder:validation:Enum=KubeClusterSigningCertificate;ImpersonationProxy;CertificateSigningRequest
type StrategyType string

const (
	// KubeClusterSigningCertificateStrategyType signs client certificates
	// with the cluster's own signing key, read from the controller manager's node.
	KubeClusterSigningCertificateStrategyType StrategyType = "KubeClusterSigningCertificate"
	// ImpersonationProxyStrategyType serves the proxy and signs certificates
	// that only the proxy trusts.
	ImpersonationProxyStrategyType StrategyType = "ImpersonationProxy"
	// CertificateSigningRequestStrategyType has the cluster sign client
	// certificates through the certificates.k8s.io API. Not in upstream
	// Pinniped; upstream clients ignore strategy types they do not know.
	CertificateSigningRequestStrategyType StrategyType = "CertificateSigningRequest"
)

// StrategyStatus is whether a strategy works.
// +kubebuilder:validation:Enum=Success;Error
type StrategyStatus string

const (
	// SuccessStrategyStatus means the strategy can issue credentials.
	SuccessStrategyStatus StrategyStatus = "Success"
	// ErrorStrategyStatus means it cannot; Reason and Message say why.
	ErrorStrategyStatus StrategyStatus = "Error"
)

// StrategyReason is a machine-readable reason for a strategy's status.
// +kubebuilder:validation:Enum=Listening;Pending;Disabled;ErrorDuringSetup;CouldNotFetchKey;CouldNotGetClusterInfo;FetchedKey;SigningRequestsApproved;CouldNotSignRequests
type StrategyReason string

// Reasons for a strategy's status. The first seven are upstream's.
const (
	ListeningStrategyReason               StrategyReason = "Listening"
	PendingStrategyReason                 StrategyReason = "Pending"
	DisabledStrategyReason                StrategyReason = "Disabled"
	ErrorDuringSetupStrategyReason        StrategyReason = "ErrorDuringSetup"
	CouldNotFetchKeyStrategyReason        StrategyReason = "CouldNotFetchKey"
	CouldNotGetClusterInfoStrategyReason  StrategyReason = "CouldNotGetClusterInfo"
	FetchedKeyStrategyReason              StrategyReason = "FetchedKey"
	SigningRequestsApprovedStrategyReason StrategyReason = "SigningRequestsApproved"
	CouldNotSignRequestsStrategyReason    StrategyReason = "CouldNotSignRequests"
)

// FrontendType is how clients reach a strategy.
// +kubebuilder:validation:Enum=TokenCredentialRequestAPI;ImpersonationProxy
type FrontendType string

const (
	// TokenCredentialRequestAPIFrontendType is the aggregated API on the
	// cluster's own API server.
	TokenCredentialRequestAPIFrontendType FrontendType = "TokenCredentialRequestAPI" //nolint:gosec // a type name, not a credential
	// ImpersonationProxyFrontendType is the impersonation proxy endpoint.
	ImpersonationProxyFrontendType FrontendType = "ImpersonationProxy"
)

// TokenCredentialRequestAPIInfo says where the aggregated API is.
type TokenCredentialRequestAPIInfo struct {
	// Server is the cluster's API server URL.
	// +kubebuilder:validation:Pattern=`^https://`
	Server string `json:"server"`

	// CertificateAuthorityData is the base64 PEM CA of Server.
	// +kubebuilder:validation:MinLength=1
	CertificateAuthorityData string `json:"certificateAuthorityData"`
}

// ImpersonationProxyInfo says where the impersonation proxy is.
type ImpersonationProxyInfo struct {
	// Endpoint is the proxy's https URL.
	// +kubebuilder:validation:Pattern=`^https://`
	Endpoint string `json:"endpoint"`

	// CertificateAuthorityData is the base64 PEM CA of Endpoint.
	// +kubebuilder:validation:MinLength=1
	CertificateAuthorityData string `json:"certificateAuthorityData"`
}

// CredentialIssuerFrontend tells clients how to use a strategy.
type CredentialIssuerFrontend struct {
	// Type of frontend.
	Type FrontendType `json:"type"`

	// TokenCredentialRequestAPIInfo is set when Type is TokenCredentialRequestAPI.
	// +optional
	TokenCredentialRequestAPIInfo *TokenCredentialRequestAPIInfo `json:"tokenCredentialRequestInfo,omitempty"`

	// ImpersonationProxyInfo is set when Type is ImpersonationProxy.
	// +optional
	ImpersonationProxyInfo *ImpersonationProxyInfo `json:"impersonationProxyInfo,omitempty"`
}

// CredentialIssuerStrategy is one way of issuing credentials and how it is doing.
type CredentialIssuerStrategy struct {
	Type   StrategyType   `json:"type"`
	Status StrategyStatus `json:"status"`
	Reason StrategyReason `json:"reason"`
	// Message explains Reason in words an admin can act on.
	Message        string      `json:"message"`
	LastUpdateTime metav1.Time `json:"lastUpdateTime"`
	// Frontend is set when clients can use this strategy.
	// +optional
	Frontend *CredentialIssuerFrontend `json:"frontend,omitempty"`
}

// CredentialIssuerKubeConfigInfo is upstream's deprecated predecessor of
// frontend.tokenCredentialRequestInfo, kept so old clients still parse.
type CredentialIssuerKubeConfigInfo struct {
	// +kubebuilder:validation:Pattern=`^https://`
	Server string `json:"server"`
	// +kubebuilder:validation:MinLength=1
	CertificateAuthorityData string `json:"certificateAuthorityData"`
}

// CredentialIssuerStatus lists every strategy the agent tried.
type CredentialIssuerStatus struct {
	// +optional
	Strategies []CredentialIssuerStrategy `json:"strategies,omitempty"`

	// Deprecated: use strategies[].frontend.
	// +optional
	KubeConfigInfo *CredentialIssuerKubeConfigInfo `json:"kubeConfigInfo,omitempty"`
}

// CredentialIssuer configures credential issuing and reports which
// strategies work; `pinniped get kubeconfig` reads it to find the frontend.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=pinniped
// +kubebuilder:printcolumn:name="ProxyMode",type=string,JSONPath=`.spec.impersonationProxy.mode`
// +kubebuilder:printcolumn:name="DefaultStrategy",type=string,JSONPath=`.status.strategies[0].type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CredentialIssuer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CredentialIssuerSpec   `json:"spec"`
	Status CredentialIssuerStatus `json:"status,omitempty"`
}

// CredentialIssuerList is a list of CredentialIssuer.
//
// +kubebuilder:object:root=true
type CredentialIssuerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []CredentialIssuer `json:"items"`
}
