package testbed

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// writeKubeconfig writes a kubeconfig with the certificates embedded, so that copies of it
// (and the kcm static pod, which sees it under another path) work.
func writeKubeconfig(cfg Config, path, user, certName string) error {
	ca, err := os.ReadFile(cfg.ClusterCAFile())
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(filepath.Join(cfg.PKIDir(), certName+".crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(filepath.Join(cfg.PKIDir(), certName+".key"))
	if err != nil {
		return err
	}
	b64 := base64.StdEncoding.EncodeToString
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority-data: %[3]s
users:
- name: %[4]s
  user:
    client-certificate-data: %[5]s
    client-key-data: %[6]s
contexts:
- name: %[4]s@%[1]s
  context:
    cluster: %[1]s
    user: %[4]s
current-context: %[4]s@%[1]s
`, "pinniped-e2e-"+cfg.Name, cfg.APIServerURL(), b64(ca), user, b64(crt), b64(key))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(kc), 0o600) //nolint:gosec // G703: path is under the bed's own state dir
}

func (b *Bed) kubeconfig(name string) string {
	return filepath.Join(b.cfg.StateDir, "kubeconfig", name+".kubeconfig")
}

// writeConfigs writes the kubeconfigs and every daemon's configuration file.
// It is long because each file's text stands here whole, beside the reasons
// for its settings, so that one place shows how the bed is configured.
func (b *Bed) writeConfigs() error {
	cfg := b.cfg
	for _, kc := range []struct{ file, user, cert string }{
		{"admin", "kubernetes-admin", "admin"},
		{"controller-manager", "system:kube-controller-manager", "controller-manager"},
		{"scheduler", "system:kube-scheduler", "scheduler"},
		{"kube-proxy", "system:kube-proxy", "kube-proxy"},
		{"kubelet", "system:node:" + cfg.NodeName(), "kubelet"},
	} {
		if err := writeKubeconfig(cfg, b.kubeconfig(kc.file), kc.user, kc.cert); err != nil {
			return fmt.Errorf("write %s kubeconfig: %w", kc.file, err)
		}
	}

	pki := cfg.PKIDir()
	files := map[string]string{}

	// A fresh secret per bed for the test Supervisor's client at Dex.
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	supervisorSecret := hex.EncodeToString(secret)
	files["pki/supervisor-dex-client.secret"] = supervisorSecret

	// containerd: CRI only, own root/state/socket, cgroupfs, a locally built pause image.
	// restrict_oom_score_adj: without it every sandbox fails, because runc cannot raise
	// oom_score_adj on this VM (no CAP_SYS_RESOURCE).
	files["containerd/config.toml"] = fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
`, cfg.path("containerd", "root"), cfg.path("containerd", "state"), cfg.ContainerdSocket(),
		cfg.ContainerdSocket()+".ttrpc", cfg.path("containerd", "opt"), PauseImage, cfg.path("cni", "net.d"))

	// Pods on their own bridge; the bridge is the pods' gateway into the namespace's own
	// stack, where kube-proxy's DNAT rules and the node IP live. No masquerading and no
	// forwarding are needed: nothing leaves the namespace.
	files["cni/net.d/10-pinniped-e2e.conflist"] = fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "pinniped-e2e-%[1]s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %[2]q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %[3]q,
        "ranges": [[{"subnet": %[4]q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, cfg.Name, podBridge, cfg.path("cni", "ipam"), cfg.PodCIDR)

	// kubelet: settings that make it work on this VM (cgroup v1, cgroupfs, no
	// CAP_SYS_RESOURCE, no DNS) and keep it from collecting our locally imported images.
	files["kubelet/config.yaml"] = fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
cgroupsPerQOS: true
oomScoreAdj: 0
resolvConf: ""
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
containerRuntimeEndpoint: unix://%[2]s
staticPodPath: %[3]s
podLogsDir: %[6]s
address: %[4]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %[5]s/kubelet-server.crt
tlsPrivateKeyFile: %[5]s/kubelet-server.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[5]s/ca.crt
authorization:
  mode: Webhook
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
`, cfg.CgroupRoot(), cfg.ContainerdSocket(), cfg.StaticPodDir(), cfg.NodeIP, pki, cfg.path("pod-logs"))

	// kube-proxy: iptables mode; conntrack settings 0 so it touches no (global) sysctls.
	files["kube-proxy/config.yaml"] = fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: %[1]s
clusterCIDR: %[2]s
oomScoreAdj: 0
clientConnection:
  kubeconfig: %[3]s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
`, cfg.NodeName(), cfg.PodCIDR, b.kubeconfig("kube-proxy"))

	dex := map[string]any{
		"issuer":        cfg.DexIssuer(),
		"listen":        fmt.Sprintf("%s:%d", cfg.NodeIP, cfg.DexPort),
		"tlsCert":       filepath.Join(pki, "dex.crt"),
		"tlsKey":        filepath.Join(pki, "dex.key"),
		"etcdEndpoints": []string{fmt.Sprintf("http://127.0.0.1:%d", cfg.EtcdPort)},
		"etcdNamespace": "dex/",
		"users":         DexUsers,
		"clients": []map[string]any{
			{"id": DexClientID, "name": "pinniped CLI", "public": true},
			// The test Supervisor logs people in at Dex as a confidential client.
			{"id": SupervisorDexClientID, "name": "test Supervisor", "secret": supervisorSecret, "redirectURIs": []string{cfg.SupervisorIssuer() + "/callback"}},
			{"id": SupervisorLDAPDexClientID, "name": "test Supervisor (LDAP)", "public": true},
		},
	}
	raw, err := json.MarshalIndent(dex, "", "  ")
	if err != nil {
		return err
	}
	files["dex/config.json"] = string(raw)

	users := make([]map[string]string, 0, len(OIDCOPUsers))
	for _, u := range OIDCOPUsers {
		users = append(users, map[string]string{"id": u.ID, "username": u.Username, "password": u.Password, "email": u.Email})
	}
	raw, err = json.MarshalIndent(map[string]any{
		"issuer":  cfg.OIDCOPIssuer(),
		"listen":  fmt.Sprintf("%s:%d", cfg.NodeIP, cfg.OIDCOPPort),
		"tlsCert": filepath.Join(pki, "oidcop.crt"),
		"tlsKey":  filepath.Join(pki, "oidcop.key"),
		"users":   users,
		// A loopback redirect URI matches on any port (RFC 8252 7.3), as a CLI needs.
		"clients": []map[string]any{{"id": OIDCOPClientID, "redirectURIs": []string{"http://127.0.0.1/callback"}}},
	}, "", "  ")
	if err != nil {
		return err
	}
	files["oidcop/config.json"] = string(raw)

	if cfg.Profile == ProfileKubeadm {
		files["manifests/kube-controller-manager.yaml"] = b.kcmStaticPod()
	}

	// Audit only SelfSubjectReviews (kubectl auth whoami) and GET /version (a read anyone
	// may make, which the impersonation proxy sends upstream over HTTP/1.1, where a
	// SelfSubjectReview's create goes over HTTP/2): tests read the API server's own record
	// of who asked and from where (sourceIPs), e.g. to prove that a proxy did not pass on a
	// forged X-Forwarded-For. Everything else is left out to keep the log small.
	files["apiserver/audit-policy.yaml"] = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: authentication.k8s.io
    resources: ["selfsubjectreviews"]
- level: Metadata
  nonResourceURLs: ["/version"]
- level: None
`

	// kube-apiserver's own JWT authenticator for DirectIssuer, with the
	// claim rules a test gives the agent's JWTAuthenticator too: what the
	// API server decides for such a token is the oracle of what must
	// reach it through the agent (TestIdentityArrivesUnchanged).
	bedCA, err := os.ReadFile(cfg.TestbedCAFile())
	if err != nil {
		return err
	}
	// Structured authentication is GA, apiserver.config.k8s.io/v1, from
	// Kubernetes 1.34; v1beta1 before.
	authnAPI := "v1"
	if cfg.KubeMinorNumber() < 34 {
		authnAPI = "v1beta1"
	}
	// See AnonymousHealthOnly. (The field is beta, on by default, from
	// 1.32; GA in 1.34.)
	anonymous := ""
	if cfg.AnonymousHealthOnly() {
		anonymous = `anonymous:
  enabled: true
  conditions:
  - path: /livez
  - path: /readyz
  - path: /healthz
`
	}
	files["apiserver/authentication-config.yaml"] = fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/%s
kind: AuthenticationConfiguration
%sjwt:
- issuer:
    url: %s
    audiences: [%s]
    certificateAuthority: %q
  claimMappings:
%s`, authnAPI, anonymous, cfg.DirectIssuer(), DirectAudience, string(bedCA), indent(DirectClaimMappings, "    "))

	for name, content := range files {
		p := filepath.Join(cfg.StateDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// kcmArgs are kube-controller-manager's flags, with pki and kubeconfig paths as the process
// sees them (host paths for the managed profile, kubeadm's paths inside the static pod).
func (b *Bed) kcmArgs(pki, kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=10257",
		"--leader-elect=false",
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + pki + "/sa.key",
		"--root-ca-file=" + pki + "/ca.crt",
		"--cluster-signing-cert-file=" + pki + "/ca.crt",
		"--cluster-signing-key-file=" + pki + "/ca.key",
		"--cluster-name=pinniped-e2e-" + b.cfg.Name,
		"--service-cluster-ip-range=" + b.cfg.ServiceCIDR,
	}
}

// kcmStaticPod is kube-controller-manager the way kubeadm runs it: a static pod in
// kube-system labelled component=kube-controller-manager, with the cluster signing key
// mounted by hostPath at /etc/kubernetes/pki.
func (b *Bed) kcmStaticPod() string {
	args := append([]string{"/kube-controller-manager"}, b.kcmArgs("/etc/kubernetes/pki", "/etc/kubernetes/controller-manager.conf")...)
	var cmd strings.Builder
	for _, a := range args {
		fmt.Fprintf(&cmd, "    - %q\n", a)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: kube-controller-manager
  namespace: kube-system
  labels:
    component: kube-controller-manager
    tier: control-plane
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
  - name: kube-controller-manager
    image: %[1]s
    imagePullPolicy: Never
    command:
%[2]s    volumeMounts:
    - name: k8s-certs
      mountPath: /etc/kubernetes/pki
      readOnly: true
    - name: kubeconfig
      mountPath: /etc/kubernetes/controller-manager.conf
      readOnly: true
  volumes:
  - name: k8s-certs
    hostPath:
      path: %[3]s
      type: Directory
  - name: kubeconfig
    hostPath:
      path: %[4]s
      type: File
`, b.kcmImage, cmd.String(), b.cfg.PKIDir(), b.kubeconfig("controller-manager"))
}

// DirectClaimMappings are the claim rules of kube-apiserver's authenticator
// for DirectIssuer, in the form both kube-apiserver's configuration and the
// agent's JWTAuthenticator take: the username, groups and UID straight
// from claims of those names, nothing added. No extra: the agent refuses
// extra mappings (its certificates cannot carry them).
const DirectClaimMappings = `username: {claim: username, prefix: ""}
groups: {claim: groups, prefix: ""}
uid: {expression: 'has(claims.uid) ? claims.uid : ""'}
`

func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+by) + "\n"
}
