// Package objectnames holds the names and ports of the objects an
// installation is made of, as the installer renders them and the agent
// expects them by default (its flags). One definition for both, so a
// manifest and the agent it runs can never disagree. Upstream clients look
// some of these up by name (the APIServices' Service, the CredentialIssuer):
// the values are part of the wire.
package objectnames

const (
	// Agent names the agent's Deployment, ServiceAccount and RBAC, and is
	// its pods' app.kubernetes.io/name.
	Agent = "pinniped-agent"
	// APIService is the Service in front of the aggregated API; the serving
	// certificate is for <APIService>.<namespace>.svc.
	APIService = "pinniped-agent-api"
	// ServingSecret holds the aggregated API's CA and serving certificate.
	ServingSecret = "pinniped-agent-api-tls" //nolint:gosec // a Secret's name, not a secret
	// CredentialIssuer is the CredentialIssuer whose status the agent keeps.
	CredentialIssuer = "pinniped-config" //nolint:gosec // G101: an object's name, not a credential
	// Lease elects the replica that writes statuses.
	Lease = "pinniped-agent-leader"
	// ProxyServiceAccount may only impersonate: the impersonation proxy
	// forwards with its short-lived tokens.
	ProxyServiceAccount = "pinniped-agent-proxy"
	// KubeCertAgent is the helper Deployment the agent runs beside
	// kube-controller-manager to read the cluster signing key.
	KubeCertAgent = "pinniped-kube-cert-agent"
)

// The agent container's ports.
const (
	// APIPort serves the aggregated API (TLS).
	APIPort = 10250
	// ProxyPort serves the impersonation proxy (TLS) where it is enabled.
	ProxyPort = 8444
	// HealthPort serves /healthz, /readyz and /metrics (plain HTTP).
	HealthPort = 8080
)
