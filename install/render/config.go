// Package render builds every Kubernetes object the pinniped agent needs,
// from a few settings. It only produces objects; applying them is another
// package's job, so the same output serves `pinniped install` and
// `pinniped install -o yaml` for GitOps.
package render

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/pinniped-kit/pinniped/agent/apis/credentialttl"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/apis/helperpod"
	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
	"github.com/pinniped-kit/pinniped/agent/apis/objectnames"
	"github.com/pinniped-kit/pinniped/agent/apis/proxycredential"
)

// Config says what to render.
type Config struct {
	Namespace string
	Image     string
	// ImagePullPolicy is IfNotPresent unless set.
	ImagePullPolicy string
	Replicas        int32
	Version         string // recorded in labels

	// Optional JWTAuthenticator.
	OIDCIssuer   string
	OIDCAudience string
	OIDCCABundle []byte // PEM
	// Optional WebhookAuthenticator.
	WebhookEndpoint string
	WebhookCABundle []byte // PEM
	// AuthenticatorName names the rendered authenticator.
	AuthenticatorName string
	UsernameClaim     string
	GroupsClaim       string

	CPURequest    string
	MemoryRequest string
	MemoryLimit   string

	// CredentialTTL is the agent's --credential-ttl: the lifetime of the
	// client certificates it issues. Zero keeps the agent's default
	// (credentialttl.Default) and renders no flag.
	CredentialTTL time.Duration
	// ProxyCredential is the agent's --proxy-credential (package
	// proxycredential); empty keeps the agent's default and renders no flag.
	ProxyCredential string
	// ProxyAudit is the agent's --proxy-audit (all, changes, none); empty
	// keeps the agent's default (all).
	ProxyAudit string
	// NoKubeCertAgent keeps the agent from ever reading the cluster
	// signing key: no helper pod beside kube-controller-manager, and none
	// of the permissions it needs. Clients use the CSR API or the
	// impersonation proxy instead.
	NoKubeCertAgent bool
	// KubeCertAgentPod is who the helper pod runs as and its Deployment's
	// strategy (the agent's --kube-cert-agent-* flags); the zero value
	// renders no flag.
	KubeCertAgentPod helperpod.Settings
	// GroupSuffix is upstream's api_group_suffix: the agent's API groups
	// become <prefix>.concierge.<GroupSuffix>. Empty (or pinniped.dev) is
	// the default, rendered exactly as before suffixes existed. Under
	// another suffix every cluster-wide name gets the suffix too (Names),
	// so the install can run beside one with the default.
	GroupSuffix string
}

// Names of the fixed objects (agent/apis/objectnames, shared with the
// agent's flag defaults). Upstream clients look some of them up by these
// names (the APIServices, the CredentialIssuer).
const (
	AppName                 = objectnames.Agent
	ServiceName             = objectnames.APIService
	CredentialIssuerName    = objectnames.CredentialIssuer
	LeaseName               = objectnames.Lease
	ProxyServiceAccountName = objectnames.ProxyServiceAccount
	KubeCertAgentName       = objectnames.KubeCertAgent
	// FindControllerManagerName is the kube-system Role (and RoleBinding)
	// that lets the agent find kube-controller-manager; under a suffix it
	// is Name(suffix, FindControllerManagerName).
	FindControllerManagerName = AppName + "-find-controller-manager"
	// PartOfLabel marks every object install creates, and nothing else, so
	// uninstall can find them.
	PartOfLabel = "app.kubernetes.io/part-of"
	PartOfValue = "pinniped"
	// SuffixLabel marks every object of an install with a non-default API
	// group suffix (its value is SuffixLabelValue), so that uninstalling one
	// install never selects another's objects. A default install carries no
	// such label: its objects look exactly as they did before suffixes.
	SuffixLabel = "pinniped.dev/api-group-suffix"
)

// DefaultImageRepository holds release images of the agent.
const DefaultImageRepository = "ghcr.io/pinniped-kit/pinniped-agent"

// DefaultImage is the agent image of a release: the CLI's version, "latest"
// for a development build; with "-fips" for a CLI of the FIPS flavour, so
// that it installs the agent of its own flavour. The Helm chart's default
// is the ordinary image of its appVersion (docs/fips.md says how to take
// the other).
func DefaultImage(version string, fips bool) string {
	tag := version
	if tag == "" || tag == "dev" || strings.Contains(tag, "dirty") {
		tag = "latest"
	}
	if fips {
		tag += "-fips"
	}
	return DefaultImageRepository + ":" + strings.TrimPrefix(tag, "v")
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Namespace == "" {
		c.Namespace = "pinniped"
	}
	if c.Replicas == 0 {
		c.Replicas = 2
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = "IfNotPresent"
	}
	if c.AuthenticatorName == "" {
		c.AuthenticatorName = "default"
	}
	if c.CPURequest == "" {
		c.CPURequest = "50m"
	}
	if c.MemoryRequest == "" {
		c.MemoryRequest = "64Mi"
	}
	if c.MemoryLimit == "" {
		c.MemoryLimit = "256Mi"
	}
}

// Validate says what is wrong with the settings, all at once.
func (c *Config) Validate() error {
	var errs []error
	for _, msg := range validation.IsDNS1123Label(c.Namespace) {
		errs = append(errs, fmt.Errorf("namespace %q: %s", c.Namespace, msg))
	}
	// Uninstall tells an install's objects in its own namespace apart by
	// the namespace, and other installs keep objects in these two.
	if c.Namespace == "kube-system" || c.Namespace == "kube-public" {
		errs = append(errs, fmt.Errorf("namespace %q is shared with the cluster (and with other installs' bindings): install the agent into a namespace of its own", c.Namespace))
	}
	if c.Image == "" {
		errs = append(errs, errors.New("an agent image is required (--image)"))
	}
	if c.Replicas < 1 {
		errs = append(errs, fmt.Errorf("replicas must be at least 1, not %d", c.Replicas))
	}
	switch c.ImagePullPolicy {
	case "Always", "IfNotPresent", "Never":
	default:
		errs = append(errs, fmt.Errorf("image pull policy %q must be Always, IfNotPresent or Never", c.ImagePullPolicy))
	}
	if c.OIDCIssuer != "" && c.WebhookEndpoint != "" {
		errs = append(errs, errors.New("choose one authenticator: --oidc-issuer or --webhook-endpoint, not both"))
	}
	if c.OIDCIssuer != "" {
		if err := httpsurl.Check("--oidc-issuer", c.OIDCIssuer); err != nil {
			errs = append(errs, err)
		}
		if c.OIDCAudience == "" {
			errs = append(errs, errors.New("--oidc-audience is required with --oidc-issuer: use a value unique to this cluster"))
		}
	} else if c.OIDCAudience != "" || len(c.OIDCCABundle) > 0 {
		errs = append(errs, errors.New("--oidc-audience and --oidc-ca-bundle need --oidc-issuer"))
	}
	if c.WebhookEndpoint != "" {
		if err := httpsurl.Check("--webhook-endpoint", c.WebhookEndpoint); err != nil {
			errs = append(errs, err)
		}
	} else if len(c.WebhookCABundle) > 0 {
		errs = append(errs, errors.New("--webhook-ca-bundle needs --webhook-endpoint"))
	}
	if c.OIDCIssuer != "" || c.WebhookEndpoint != "" {
		for _, msg := range validation.IsDNS1123Subdomain(c.AuthenticatorName) {
			errs = append(errs, fmt.Errorf("authenticator name %q: %s", c.AuthenticatorName, msg))
		}
	}
	if c.GroupSuffix != "" {
		if err := groupsuffix.Validate(c.GroupSuffix); err != nil {
			errs = append(errs, fmt.Errorf("--api-group-suffix: %w", err))
		}
	}
	if c.CredentialTTL != 0 {
		if err := credentialttl.Check(c.CredentialTTL); err != nil {
			errs = append(errs, fmt.Errorf("--credential-ttl: %w", err))
		}
	}
	if c.ProxyCredential != "" {
		if err := proxycredential.Check(c.ProxyCredential); err != nil {
			errs = append(errs, fmt.Errorf("--proxy-credential: %w", err))
		}
	}
	if err := c.KubeCertAgentPod.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.NoKubeCertAgent && !c.KubeCertAgentPod.IsDefault() {
		errs = append(errs, fmt.Errorf("--%s, --%s and --%s set up the helper pod that --kube-cert-agent=false turns off: drop them, or the false",
			helperpod.FlagRunAsUser, helperpod.FlagRunAsGroup, helperpod.FlagStrategy))
	}
	switch c.ProxyAudit {
	case "", "all", "changes", "none":
	default:
		errs = append(errs, fmt.Errorf("--proxy-audit %q: use all, changes or none", c.ProxyAudit))
	}
	for flag, q := range map[string]string{"cpu request": c.CPURequest, "memory request": c.MemoryRequest, "memory limit": c.MemoryLimit} {
		if _, err := resource.ParseQuantity(q); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", flag, q, err))
		}
	}
	return errors.Join(errs...)
}

func b64(pem []byte) string {
	if len(pem) == 0 {
		return ""
	}
	return base64.StdEncoding.EncodeToString(pem)
}

func labels(c *Config, component string) map[string]string {
	l := map[string]string{
		PartOfLabel:                    PartOfValue,
		"app.kubernetes.io/managed-by": "pinniped-install",
	}
	if component != "" {
		l["app.kubernetes.io/name"] = AppName
		l["app.kubernetes.io/component"] = component
	}
	if c.Version != "" {
		l["app.kubernetes.io/version"] = sanitizeLabel(c.Version)
	}
	if !groupsuffix.IsDefault(c.GroupSuffix) {
		l[SuffixLabel] = SuffixLabelValue(c.GroupSuffix)
	}
	return l
}

// SuffixLabelValue is the SuffixLabel value of an install with suffix: the
// suffix itself when it fits a label value (63 characters), else a hash of
// it (a suffix may be far longer, and selection needs only equality).
func SuffixLabelValue(suffix string) string {
	if len(suffix) <= 63 {
		return suffix
	}
	sum := sha256.Sum256([]byte(suffix))
	return "sha256-" + hex.EncodeToString(sum[:16])
}

// InstallSelector selects the objects of the install with suffix, and of
// no other: the default install's objects are the ones without
// SuffixLabel, which also matches what installs from before suffixes made.
func InstallSelector(suffix string) string {
	if groupsuffix.IsDefault(suffix) {
		return PartOfLabel + "=" + PartOfValue + ",!" + SuffixLabel
	}
	return PartOfLabel + "=" + PartOfValue + "," + SuffixLabel + "=" + SuffixLabelValue(suffix)
}

// Name is the name of one of the install's objects that two installs
// would otherwise share: cluster-scoped objects, and those it puts in
// kube-system and kube-public. The default install keeps the names it has
// always had (upgrades apply over them); another suffix appends itself, which
// is unique because one suffix's API groups can be served by one install
// only. Names in the agent's own namespace need no suffix.
func Name(suffix, base string) string {
	if groupsuffix.IsDefault(suffix) {
		return base
	}
	return base + "-" + suffix
}

// sanitizeLabel turns a version like "v1.2.3-snapshot+abc" into a valid label value.
func sanitizeLabel(v string) string {
	v = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, v)
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "-_.")
}
