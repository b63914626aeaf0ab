// Package testbed brings up and tears down the pinniped end-to-end test bed: a real
// single-node Kubernetes cluster (etcd, kube-apiserver with the aggregation layer,
// kube-controller-manager, kube-scheduler, containerd + runc, kubelet, kube-proxy, bridge
// CNI), Dex and a second OpenID provider (e2e/tools/oidcop) over HTTPS and a minimal LoadBalancer provider, all inside a private network
// namespace so that nothing on the host (links, routes, iptables) is touched.
//
// Everything a bed owns lives in its state directory; processes are recorded there by PID
// so that Down can stop exactly them, even from another process.
package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Profiles select where kube-controller-manager runs.
const (
	// ProfileKubeadm runs kube-controller-manager as a static pod in kube-system
	// (label component=kube-controller-manager, signing key by hostPath) on a node with the
	// control-plane role label, like kubeadm and kind clusters.
	ProfileKubeadm = "kubeadm"
	// ProfileManaged runs kube-controller-manager as a host process and labels nothing as
	// control plane, like EKS/GKE/AKS where the control plane is out of reach.
	ProfileManaged = "managed"
)

// Config describes one test bed. Beds with different names can run side by side: each has
// its own network namespace, state directory, cgroup root and containerd.
type Config struct {
	Name     string // short name; netns is "pinniped-<name>", node is "<name>-node"
	Profile  string // ProfileKubeadm or ProfileManaged
	StateDir string // everything the bed owns; removed by Down
	BinDir   string // etcd, kube-*, dex, pause (see e2e/scripts/build-tools.sh)
	// KubeMinor is the Kubernetes minor asked for ("1.35"), empty for the
	// default toolchain's; KubeVersion is the release the toolchain in
	// BinDir is (v1.35.4), read from its kube-apiserver when the bed comes
	// up. What differs between versions (configuration API versions,
	// flags) follows KubeVersion.
	KubeMinor   string `json:",omitempty"`
	KubeVersion string `json:",omitempty"`

	NodeIP      string // on a port-less bridge inside the netns; not loopback (kubelet rejects it)
	ServiceCIDR string
	PodCIDR     string
	LBRange     string // CIDR that LoadBalancer ingress IPs are taken from

	APIServerPort int
	EtcdPort      int
	DexPort       int
	// SupervisorPort is the test Supervisor's (e2e/tools/supervisor).
	SupervisorPort int
	// OIDCOPPort is the second OpenID provider's (e2e/tools/oidcop), the one with token
	// revocation.
	OIDCOPPort int
	// DirectIssuerPort is where a test serves DirectIssuer (see there).
	DirectIssuerPort int
}

// Env variable names read by ConfigFromEnv.
const (
	EnvName     = "PINNIPED_E2E_NAME"
	EnvProfile  = "PINNIPED_E2E_PROFILE"
	EnvStateDir = "PINNIPED_E2E_STATE_DIR"
	EnvBinDir   = "PINNIPED_E2E_BIN_DIR"
	EnvCache    = "PINNIPED_E2E_CACHE"
	// EnvKubeVersion picks the Kubernetes minor ("1.35"): the toolchain
	// e2e/scripts/build-tools.sh built for it, unless EnvBinDir names one.
	EnvKubeVersion = "PINNIPED_E2E_KUBE_VERSION"
)

// DefaultCacheDir is where build-tools.sh puts binaries and where image tarballs are cached.
func DefaultCacheDir() string {
	if c := os.Getenv(EnvCache); c != "" {
		return c
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "pinniped-e2e")
}

// ConfigFromEnv returns the default configuration, overridden by PINNIPED_E2E_* variables.
func ConfigFromEnv() Config {
	c := Config{
		Name:             getenv(EnvName, "e2e"),
		Profile:          getenv(EnvProfile, ProfileKubeadm),
		KubeMinor:        strings.TrimPrefix(os.Getenv(EnvKubeVersion), "v"),
		NodeIP:           "10.99.0.1",
		ServiceCIDR:      "10.96.0.0/16",
		PodCIDR:          "10.244.0.0/24",
		LBRange:          "10.99.1.0/28",
		APIServerPort:    6443,
		EtcdPort:         2379,
		DexPort:          5556,
		SupervisorPort:   5557,
		OIDCOPPort:       5558,
		DirectIssuerPort: 5559,
	}
	c.StateDir = getenv(EnvStateDir, filepath.Join("/var/lib/pinniped-e2e", c.Name))
	c.BinDir = getenv(EnvBinDir, ToolchainDir(c.KubeMinor))
	for env, p := range map[string]*int{"PINNIPED_E2E_APISERVER_PORT": &c.APIServerPort, "PINNIPED_E2E_ETCD_PORT": &c.EtcdPort, "PINNIPED_E2E_DEX_PORT": &c.DexPort, "PINNIPED_E2E_SUPERVISOR_PORT": &c.SupervisorPort, "PINNIPED_E2E_OIDCOP_PORT": &c.OIDCOPPort, "PINNIPED_E2E_DIRECT_ISSUER_PORT": &c.DirectIssuerPort} {
		if v, err := strconv.Atoi(os.Getenv(env)); err == nil && v > 0 {
			*p = v
		}
	}
	if v := os.Getenv("PINNIPED_E2E_NODE_IP"); v != "" {
		c.NodeIP = v
	}
	return c
}

// ToolchainDir is where e2e/scripts/build-tools.sh links the toolchain of
// a Kubernetes minor ("1.35"), or of the default one for "".
func ToolchainDir(minor string) string {
	name := "current"
	if minor != "" {
		name += "-" + minor
	}
	return filepath.Join(DefaultCacheDir(), "bin", name)
}

var minorRE = regexp.MustCompile(`^1\.[0-9]+$`)

// kubeVersionRE reads `kube-apiserver --version`: "Kubernetes v1.37.2".
var kubeVersionRE = regexp.MustCompile(`^Kubernetes (v1\.([0-9]+)\.[0-9]+\S*)\s*$`)

// KubeMinorNumber is KubeVersion's minor (37 for v1.37.2), 0 when unknown.
func (c Config) KubeMinorNumber() int {
	m := kubeVersionRE.FindStringSubmatch("Kubernetes " + c.KubeVersion)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[2])
	return n
}

// AnonymousHealthOnly reports whether the bed's kube-apiserver allows
// anonymous requests only to health endpoints: the managed profile follows
// GKE, which does so from 1.35 (EKS from 1.32); kubeadm keeps
// kube-apiserver's default, anonymous requests allowed. There, nobody
// without a credential reaches the TokenCredentialRequest API, and the
// exchange works only through the impersonation proxy.
func (c Config) AnonymousHealthOnly() bool {
	return c.Profile == ProfileManaged && c.KubeMinorNumber() >= 35
}

// readKubeVersion asks the toolchain's kube-apiserver which release it is,
// and checks it is the minor asked for.
func (c Config) readKubeVersion() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kube-apiserver"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("kube-apiserver --version in %s: %w", c.BinDir, err)
	}
	m := kubeVersionRE.FindStringSubmatch(string(out))
	if m == nil {
		return "", fmt.Errorf("kube-apiserver in %s says %q, not a Kubernetes release: rebuild the toolchain (e2e/scripts/build-tools.sh)", c.BinDir, strings.TrimSpace(string(out)))
	}
	if c.KubeMinor != "" && !strings.HasPrefix(m[1], "v"+c.KubeMinor+".") {
		return "", fmt.Errorf("the toolchain in %s is Kubernetes %s, not %s: run PINNIPED_E2E_KUBE_VERSION=%s e2e/scripts/build-tools.sh", c.BinDir, m[1], c.KubeMinor, c.KubeMinor)
	}
	return m[1], nil
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,14}$`)

// Validate reports configuration mistakes before anything is started.
func (c Config) Validate() error {
	if !nameRE.MatchString(c.Name) {
		return fmt.Errorf("test bed name %q must match %s (it names a netns, a node and a cgroup)", c.Name, nameRE)
	}
	if c.Profile != ProfileKubeadm && c.Profile != ProfileManaged {
		return fmt.Errorf("profile %q: want %q or %q", c.Profile, ProfileKubeadm, ProfileManaged)
	}
	if c.KubeMinor != "" && !minorRE.MatchString(c.KubeMinor) {
		return fmt.Errorf("kubernetes version %q: want a minor such as 1.35 (%s)", c.KubeMinor, EnvKubeVersion)
	}
	if !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("state dir %q must be absolute", c.StateDir)
	}
	return nil
}

// NetNS is the name of the bed's network namespace (/run/netns/<NetNS>).
func (c Config) NetNS() string { return "pinniped-" + c.Name }

// NetNSPath is the bind-mounted namespace file that nsenter --net= takes.
func (c Config) NetNSPath() string { return filepath.Join("/run/netns", c.NetNS()) }

// NodeName is the Kubernetes node name.
func (c Config) NodeName() string { return c.Name + "-node" }

// CgroupRoot is the kubelet's cgroup root, so two beds' kubelets never see each other's pods.
func (c Config) CgroupRoot() string { return "/pinniped-e2e-" + c.Name }

// Paths inside the state directory.
func (c Config) path(p ...string) string { return filepath.Join(append([]string{c.StateDir}, p...)...) }

func (c Config) PKIDir() string             { return c.path("pki") }
func (c Config) LogDir() string             { return c.path("logs") }
func (c Config) PIDDir() string             { return c.path("pids") }
func (c Config) AdminKubeconfig() string    { return c.path("kubeconfig", "admin.kubeconfig") }
func (c Config) ContainerdSocket() string   { return c.path("containerd", "containerd.sock") }
func (c Config) StaticPodDir() string       { return c.path("manifests") }
func (c Config) KubeletRootDir() string     { return c.path("kubelet") }
func (c Config) TestbedCAFile() string      { return c.path("pki", "testbed-ca.crt") }
func (c Config) ClusterCAFile() string      { return c.path("pki", "ca.crt") }
func (c Config) LogFile(name string) string { return c.path("logs", name+".log") }

// AuditLog is kube-apiserver's audit log (JSON lines; SelfSubjectReviews only).
func (c Config) AuditLog() string { return c.path("logs", "kube-apiserver-audit.log") }

// APIServerURL is the URL of kube-apiserver as seen from inside the netns and from pods.
func (c Config) APIServerURL() string {
	return fmt.Sprintf("https://%s:%d", c.NodeIP, c.APIServerPort)
}

// SupervisorIssuer is the test Supervisor's issuer URL.
func (c Config) SupervisorIssuer() string {
	return fmt.Sprintf("https://%s:%d", c.NodeIP, c.SupervisorPort)
}

// SupervisorSecretFile holds the test Supervisor's client secret at Dex.
func (c Config) SupervisorSecretFile() string { return c.path("pki", "supervisor-dex-client.secret") }

// DexIssuer is Dex's issuer URL (no path: device flow needs that in this Dex version).
func (c Config) DexIssuer() string { return fmt.Sprintf("https://%s:%d", c.NodeIP, c.DexPort) }

// OIDCOPIssuer is the issuer URL of the bed's second OpenID provider (e2e/tools/oidcop):
// unlike Dex it revokes tokens (RFC 7009) and ends browser sessions (RP-initiated logout).
func (c Config) OIDCOPIssuer() string { return fmt.Sprintf("https://%s:%d", c.NodeIP, c.OIDCOPPort) }

// DirectIssuer is an issuer kube-apiserver itself trusts, through its
// structured authentication configuration (DirectAudience, claims named in
// authenticationConfig), so a test can compare what kube-apiserver decides
// for a token with what reaches it through the agent. No daemon serves it:
// a test that needs it serves its discovery and keys there, with the
// testbed CA's Dex certificate (DirectIssuerTLS), and kube-apiserver,
// which retries every 10 s until it can, picks them up. Tokens of other
// issuers never reach its authenticator.
func (c Config) DirectIssuer() string {
	return fmt.Sprintf("https://%s:%d", c.NodeIP, c.DirectIssuerPort)
}

// DirectIssuerTLS is the certificate and key DirectIssuer is served with
// (Dex's: the testbed CA's, for the node address).
func (c Config) DirectIssuerTLS() (certFile, keyFile string) {
	return c.path("pki", "dex.crt"), c.path("pki", "dex.key")
}

// DirectAudience is the audience kube-apiserver accepts DirectIssuer's tokens for.
const DirectAudience = "pinniped-direct"
