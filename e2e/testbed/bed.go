package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Bed is a test bed that is up (or being brought up or down).
type Bed struct {
	cfg      Config
	kcmImage string
	exited   map[string]chan struct{}
	log      io.Writer
}

// Config returns the bed's configuration.
func (b *Bed) Config() Config { return b.cfg }

func (b *Bed) logf(format string, args ...any) {
	if b.log != nil {
		fmt.Fprintf(b.log, "testbed: "+format+"\n", args...)
	}
}

func (b *Bed) configFile() string { return filepath.Join(b.cfg.StateDir, "bed.json") }

// the daemons, in start order; Down stops them in reverse.
var daemons = []string{"etcd", "kube-apiserver", "containerd", "dex", "supervisor", "oidcop", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", roleLB}

// Load returns the bed described by the state directory, if one is up there.
func Load(stateDir string) (*Bed, error) {
	raw, err := os.ReadFile(filepath.Join(stateDir, "bed.json"))
	if err != nil {
		return nil, err
	}
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s/bed.json: %w", stateDir, err)
	}
	return &Bed{cfg: cfg, exited: map[string]chan struct{}{}}, nil
}

// Healthy reports whether every daemon of the bed still runs.
func (b *Bed) Healthy() error {
	var dead []string
	for _, d := range daemons {
		if d == "kube-controller-manager" && b.cfg.Profile == ProfileKubeadm {
			continue
		}
		if !b.running(d) {
			dead = append(dead, d)
		}
	}
	if len(dead) > 0 {
		return fmt.Errorf("test bed %q: not running: %s (logs in %s)", b.cfg.Name, strings.Join(dead, ", "), b.cfg.LogDir())
	}
	return nil
}

// Up brings a bed up. It must run inside the bed's network namespace (see EnsureNetNS and
// Reexec), as root. On failure the partial bed is left for inspection; call Down.
func Up(ctx context.Context, cfg Config, log io.Writer) (*Bed, error) {
	start := time.Now()
	b, err := prepare(cfg, log)
	if err != nil {
		return nil, err
	}
	cfg = b.cfg
	b.logf("certificates, configs and network ready (%s)", since(start))
	images := b.loadImages()
	if err := b.startControlPlane(ctx, start); err != nil {
		return nil, err
	}
	if err := b.importImages(ctx, images, start); err != nil {
		return nil, err
	}
	cs, err := b.waitAPIServer(ctx, start)
	if err != nil {
		return nil, err
	}
	if err := b.startNode(ctx, cs, start); err != nil {
		return nil, err
	}
	if cfg.Profile == ProfileKubeadm {
		if err := kubeadmObjects(ctx, cs, cfg); err != nil {
			return nil, err
		}
	}
	if err := b.waitControllers(ctx, cs, start); err != nil {
		return nil, err
	}
	if err := b.waitIdentityProviders(ctx); err != nil {
		return nil, err
	}
	if err := b.writeEnv(); err != nil {
		return nil, err
	}
	if err := b.Healthy(); err != nil {
		return nil, err
	}
	b.logf("up in %s", since(start))
	return b, nil
}

// prepare checks the host and the toolchain, and writes what the daemons
// read: the state directories, certificates, configuration files, the
// network and the cgroup root.
func prepare(cfg Config, log io.Writer) (*Bed, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckHost(); err != nil {
		return nil, err
	}
	if !InNetNS(cfg) {
		return nil, fmt.Errorf("testbed.Up must run inside network namespace %s (nsenter --net=%s)", cfg.NetNS(), cfg.NetNSPath())
	}
	for _, bin := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl", "dex", "supervisor", "oidcop", "pause"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("test bed binary %s missing in %s: run e2e/scripts/build-tools.sh (or set %s)", bin, cfg.BinDir, EnvBinDir)
		}
	}
	if _, err := os.Stat(cfg.StateDir); err == nil {
		return nil, fmt.Errorf("state directory %s exists: a bed named %q is up or was not torn down; run `testbed down` first", cfg.StateDir, cfg.Name)
	}
	// Resolve the toolchain symlink so a later rebuild does not change a running bed.
	if bd, err := filepath.EvalSymlinks(cfg.BinDir); err == nil {
		cfg.BinDir = bd
	}
	v, err := cfg.readKubeVersion()
	if err != nil {
		return nil, err
	}
	cfg.KubeVersion = v
	b := &Bed{cfg: cfg, exited: map[string]chan struct{}{}, log: log}
	for _, d := range []string{cfg.StateDir, cfg.LogDir(), cfg.PIDDir(), cfg.StaticPodDir(), cfg.KubeletRootDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	raw, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(b.configFile(), raw, 0o600); err != nil {
		return nil, err
	}
	if err := recordHostState(cfg); err != nil {
		return nil, err
	}
	if err := makePKI(cfg); err != nil {
		return nil, fmt.Errorf("generate certificates: %w", err)
	}
	if cfg.Profile == ProfileKubeadm {
		ref, err := ImageRef("localhost/pinniped-e2e/kube-controller-manager", filepath.Join(cfg.BinDir, "kube-controller-manager"))
		if err != nil {
			return nil, err
		}
		b.kcmImage = ref
	}
	if err := b.writeConfigs(); err != nil {
		return nil, err
	}
	if err := setupNetwork(cfg); err != nil {
		return nil, err
	}
	if err := makeCgroupRoot(cfg); err != nil {
		return nil, err
	}
	return b, nil
}

// images are the container images the bed imports once containerd runs.
type images struct {
	wg    sync.WaitGroup
	paths []string
	err   error
}

// loadImages makes the image tarballs (cached by content, so this costs
// only on the first run) while etcd and kube-apiserver start.
func (b *Bed) loadImages() *images {
	cfg := b.cfg
	im := &images{}
	im.wg.Add(1)
	go func() {
		defer im.wg.Done()
		p, err := CachedImage(filepath.Join(cfg.BinDir, "pause"), PauseImage)
		if err != nil {
			im.err = err
			return
		}
		im.paths = append(im.paths, p)
		if b.kcmImage != "" {
			p, err := CachedImage(filepath.Join(cfg.BinDir, "kube-controller-manager"), b.kcmImage)
			if err != nil {
				im.err = err
				return
			}
			im.paths = append(im.paths, p)
		}
	}()
	return im
}

// startControlPlane starts etcd, containerd, kube-apiserver and the bed's
// identity providers (Dex, the test Supervisor, the second OpenID provider).
func (b *Bed) startControlPlane(ctx context.Context, start time.Time) error {
	cfg := b.cfg
	bin := func(n string) string { return filepath.Join(cfg.BinDir, n) }
	pki := cfg.PKIDir()
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", cfg.EtcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", cfg.EtcdPort+1)
	if err := b.start("etcd", nil, bin("etcd"),
		"--name=node", "--data-dir="+cfg.path("etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=node="+peerURL, "--log-level=warn",
		// A test bed does not need durable writes; fsync dominates apiserver latency on a VM.
		"--unsafe-no-fsync=true"); err != nil {
		return err
	}
	if err := b.start("containerd", nil, "containerd", "--config="+cfg.path("containerd", "config.toml")); err != nil {
		return err
	}
	if err := b.waitFor(ctx, "etcd health", "etcd", 30*time.Second, httpOK(http.DefaultClient, etcdURL+"/health")); err != nil {
		return err
	}
	b.logf("etcd ready (%s)", since(start))

	if err := b.start("kube-apiserver", nil, bin("kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--advertise-address="+cfg.NodeIP,
		"--bind-address=0.0.0.0", // inside the bed's namespace only
		fmt.Sprintf("--secure-port=%d", cfg.APIServerPort),
		"--service-cluster-ip-range="+cfg.ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--client-ca-file="+pki+"/ca.crt",
		"--tls-cert-file="+pki+"/apiserver.crt", "--tls-private-key-file="+pki+"/apiserver.key",
		"--kubelet-client-certificate="+pki+"/apiserver-kubelet-client.crt", "--kubelet-client-key="+pki+"/apiserver-kubelet-client.key",
		"--service-account-key-file="+pki+"/sa.pub", "--service-account-signing-key-file="+pki+"/sa.key",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		// The aggregation layer: kube-apiserver proxies to aggregated APIs with the
		// front-proxy client certificate and X-Remote-* headers.
		"--requestheader-client-ca-file="+pki+"/front-proxy-ca.crt",
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+pki+"/front-proxy-client.crt", "--proxy-client-key-file="+pki+"/front-proxy-client.key",
		"--enable-aggregator-routing=false",
		// There is no DNS in the bed: reach kubelet (logs, exec) by its IP.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--profiling=false",
		"--audit-policy-file="+cfg.path("apiserver", "audit-policy.yaml"),
		"--audit-log-path="+cfg.AuditLog(), "--audit-log-maxsize=50",
		"--authentication-config="+cfg.path("apiserver", "authentication-config.yaml"),
	); err != nil {
		return err
	}
	if err := b.start("dex", nil, bin("dex"), cfg.path("dex", "config.json")); err != nil {
		return err
	}
	if err := b.start("supervisor", nil, bin("supervisor"),
		"--listen", fmt.Sprintf("%s:%d", cfg.NodeIP, cfg.SupervisorPort), "--issuer", cfg.SupervisorIssuer(),
		"--tls-cert", filepath.Join(cfg.PKIDir(), "supervisor.crt"), "--tls-key", filepath.Join(cfg.PKIDir(), "supervisor.key"),
		"--upstream-issuer", cfg.DexIssuer(), "--upstream-ca", cfg.TestbedCAFile(),
		"--upstream-client-id", SupervisorDexClientID, "--upstream-client-secret-file", cfg.SupervisorSecretFile(),
		"--upstream-password-client-id", SupervisorLDAPDexClientID); err != nil {
		return err
	}
	if err := b.start("oidcop", nil, bin("oidcop"), cfg.path("oidcop", "config.json")); err != nil {
		return err
	}
	return nil
}

// importImages waits for containerd and the image tarballs, and imports them.
func (b *Bed) importImages(ctx context.Context, im *images, start time.Time) error {
	cfg := b.cfg
	if err := b.waitFor(ctx, "containerd socket", "containerd", 30*time.Second, fileExists(cfg.ContainerdSocket())); err != nil {
		return err
	}
	im.wg.Wait()
	if im.err != nil {
		return im.err
	}
	for _, img := range im.paths {
		if err := ImportImage(cfg.ContainerdSocket(), img); err != nil {
			return fmt.Errorf("%w (containerd log: %s)", err, cfg.LogFile("containerd"))
		}
	}
	b.logf("containerd ready, images imported (%s)", since(start))
	return nil
}

// waitAPIServer waits for kube-apiserver to be ready, and returns an admin
// client of it.
func (b *Bed) waitAPIServer(ctx context.Context, start time.Time) (*kubernetes.Clientset, error) {
	cfg := b.cfg
	adminCfg, err := clientcmd.BuildConfigFromFlags("", cfg.AdminKubeconfig())
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		return nil, err
	}
	if err := b.waitFor(ctx, "kube-apiserver /readyz", "kube-apiserver", 60*time.Second, func(ctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	b.logf("kube-apiserver ready (%s)", since(start))
	return cs, nil
}

// startNode starts what runs the node (kube-controller-manager on the
// managed profile, the scheduler, kubelet, kube-proxy, the load balancer
// controller) and waits for the node to be Ready.
func (b *Bed) startNode(ctx context.Context, cs *kubernetes.Clientset, start time.Time) error {
	cfg := b.cfg
	bin := func(n string) string { return filepath.Join(cfg.BinDir, n) }
	pki := cfg.PKIDir()
	// Save the global sysctls kubelet is about to change, for Down to restore.
	if err := saveSysctls(cfg); err != nil {
		return err
	}
	if cfg.Profile == ProfileManaged {
		if err := b.start("kube-controller-manager", nil, bin("kube-controller-manager"), b.kcmArgs(pki, b.kubeconfig("controller-manager"))...); err != nil {
			return err
		}
	}
	if err := b.start("kube-scheduler", nil, bin("kube-scheduler"),
		"--kubeconfig="+b.kubeconfig("scheduler"),
		"--authentication-kubeconfig="+b.kubeconfig("scheduler"),
		"--authorization-kubeconfig="+b.kubeconfig("scheduler"),
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=10259"); err != nil {
		return err
	}
	if err := b.start("kubelet", nil, bin("kubelet"),
		"--config="+cfg.path("kubelet", "config.yaml"),
		"--kubeconfig="+b.kubeconfig("kubelet"),
		"--root-dir="+cfg.KubeletRootDir(),
		"--cert-dir="+cfg.path("kubelet", "pki"),
		"--node-ip="+cfg.NodeIP,
		"--hostname-override="+cfg.NodeName()); err != nil {
		return err
	}
	if err := b.start("kube-proxy", nil, bin("kube-proxy"), "--config="+cfg.path("kube-proxy", "config.yaml")); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := b.start(roleLB, []string{envRole + "=" + roleLB, envKubeconfig + "=" + cfg.AdminKubeconfig(), envLBRange + "=" + cfg.LBRange}, self); err != nil {
		return err
	}

	if err := b.waitFor(ctx, "node "+cfg.NodeName()+" Ready", "kubelet", 90*time.Second, func(ctx context.Context) error {
		n, err := cs.CoreV1().Nodes().Get(ctx, cfg.NodeName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errors.New("node not Ready yet")
	}); err != nil {
		return err
	}
	b.logf("node %s Ready (%s)", cfg.NodeName(), since(start))
	return nil
}

// waitControllers waits for kube-controller-manager's work (pods cannot
// start without it) and the scheduler.
func (b *Bed) waitControllers(ctx context.Context, cs *kubernetes.Clientset, start time.Time) error {
	cfg := b.cfg
	// kube-controller-manager works when the default ServiceAccount and the root CA
	// ConfigMap exist: pods cannot start before that.
	kcmDaemon := "kube-controller-manager"
	kcmLog := cfg.LogFile(kcmDaemon)
	if cfg.Profile == ProfileKubeadm {
		kcmDaemon = "kubelet"
		kcmLog = cfg.LogFile("kubelet") + " and " + cfg.path("pod-logs") + "/kube-system_kube-controller-manager-*"
	}
	if err := b.waitFor(ctx, "kube-controller-manager (default ServiceAccount, kube-root-ca.crt)", kcmDaemon, 90*time.Second, func(ctx context.Context) error {
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("%w (read %s)", err, kcmLog)
	}
	b.logf("kube-controller-manager working (%s)", since(start))

	// The scheduler's /healthz; its serving certificate is self-signed, and like kubelet's
	// probes this is only a liveness check on loopback, so it is not verified.
	probe := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	if err := b.waitFor(ctx, "kube-scheduler /healthz", "kube-scheduler", 30*time.Second, httpOK(probe, "https://127.0.0.1:10259/healthz")); err != nil {
		return err
	}
	return nil
}

// waitIdentityProviders waits for Dex, the test Supervisor and the second
// OpenID provider to answer discovery.
func (b *Bed) waitIdentityProviders(ctx context.Context) error {
	cfg := b.cfg
	dexClient, err := b.DexHTTPClient()
	if err != nil {
		return err
	}
	if err := b.waitFor(ctx, "Dex discovery", "dex", 30*time.Second, httpOK(dexClient, cfg.DexIssuer()+"/.well-known/openid-configuration")); err != nil {
		return err
	}
	if err := b.waitFor(ctx, "test Supervisor discovery", "supervisor", 30*time.Second, httpOK(dexClient, cfg.SupervisorIssuer()+"/.well-known/openid-configuration")); err != nil {
		return err
	}
	if err := b.waitFor(ctx, "second OpenID provider (oidcop) discovery", "oidcop", 30*time.Second, httpOK(dexClient, cfg.OIDCOPIssuer()+"/.well-known/openid-configuration")); err != nil {
		return err
	}
	return nil
}

func since(t time.Time) string { return time.Since(t).Round(10 * time.Millisecond).String() }

func httpOK(c *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

func fileExists(p string) func(context.Context) error {
	return func(context.Context) error { _, err := os.Stat(p); return err }
}

// DexHTTPClient is an HTTP client that trusts the bed's CA (Dex's serving certificate).
func (b *Bed) DexHTTPClient() (*http.Client, error) {
	pem, err := os.ReadFile(b.cfg.TestbedCAFile())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificates in %s", b.cfg.TestbedCAFile())
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}

// RESTConfig is the admin's client configuration (usable inside the bed's namespace).
func (b *Bed) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", b.cfg.AdminKubeconfig())
}

// writeEnv writes env.sh, which a shell can source to use the bed.
func (b *Bed) writeEnv() error {
	c := b.cfg
	env := fmt.Sprintf(`# Source this inside the bed's network namespace (see: testbed shell).
export PATH=%q:"$PATH"
export KUBECONFIG=%q
export PINNIPED_E2E_NAME=%q
export PINNIPED_E2E_STATE_DIR=%q
export PINNIPED_E2E_DEX_ISSUER=%q
export PINNIPED_E2E_DEX_CA=%q
export PINNIPED_E2E_DEX_CLIENT_ID=%q
export PINNIPED_E2E_SUPERVISOR_ISSUER=%q
export PINNIPED_E2E_OIDCOP_ISSUER=%q
export PINNIPED_E2E_OIDCOP_CLIENT_ID=%q
`, c.BinDir, c.AdminKubeconfig(), c.Name, c.StateDir, c.DexIssuer(), c.TestbedCAFile(), DexClientID, c.SupervisorIssuer(), c.OIDCOPIssuer(), OIDCOPClientID)
	return os.WriteFile(filepath.Join(c.StateDir, "env.sh"), []byte(env), 0o600)
}

// Down tears the bed down: pods first (so CNI DEL runs), then every daemon by PID, leftover
// shims and container processes, mounts, cgroups, sysctls, the state directory and the
// network namespace. It is safe to call on a partial or already torn down bed. When the
// namespace still exists, Down must run inside it (the API server is only reachable there).
func Down(ctx context.Context, cfg Config, log io.Writer) error {
	b := &Bed{cfg: cfg, exited: map[string]chan struct{}{}, log: log}
	if loaded, err := Load(cfg.StateDir); err == nil {
		b.cfg = loaded.cfg
		cfg = loaded.cfg
	}
	start := time.Now()
	var errs []error
	if _, err := os.Stat(cfg.StateDir); err == nil {
		if b.running("kube-apiserver") && b.running("kubelet") {
			b.deletePods(ctx)
		}
		for i := len(daemons) - 1; i >= 0; i-- {
			d := daemons[i]
			grace := 5 * time.Second
			if d == "etcd" || d == "kube-apiserver" {
				grace = 10 * time.Second
			}
			b.stop(d, grace)
		}
		killStragglers(cfg)
		errs = append(errs, unmountUnder(cfg.StateDir))
		errs = append(errs, removeCgroupRoot(cfg))
		errs = append(errs, restoreHostState(cfg))
		if err := os.RemoveAll(cfg.StateDir); err != nil {
			// A mount we could not detach keeps files busy; say which.
			errs = append(errs, fmt.Errorf("remove %s: %w", cfg.StateDir, err))
		}
	}
	errs = append(errs, deleteNetNS(cfg))
	b.logf("down in %s", since(start))
	return errors.Join(errs...)
}

// deletePods removes the kcm static pod and force-deletes every pod, then waits (bounded)
// until kubelet has stopped them all, so that CNI DEL runs and pod network namespaces,
// veths and IPAM leases go away before kubelet does.
func (b *Bed) deletePods(ctx context.Context) {
	_ = os.Remove(filepath.Join(b.cfg.StaticPodDir(), "kube-controller-manager.yaml"))
	// Stop controllers first so that nothing recreates the pods we delete.
	b.stop("kube-controller-manager", 5*time.Second)
	b.stop("kube-scheduler", 5*time.Second)
	if InNetNS(b.cfg) {
		b.deletePodsWithClient(ctx)
	} else {
		// From outside, the API server is reachable only through the namespace.
		cmd := NetNSCommand(b.cfg, filepath.Join(b.cfg.BinDir, "kubectl"), "--kubeconfig="+b.cfg.AdminKubeconfig(),
			"delete", "pods", "--all", "--all-namespaces", "--force", "--grace-period=0", "--wait=false", "--request-timeout=10s")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.logf("delete pods: %v: %s", err, out)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if n := runningTasks(b.cfg); n == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.logf("pods still running after 30s; stopping kubelet anyway")
}

func (b *Bed) deletePodsWithClient(ctx context.Context) {
	rc, err := b.RESTConfig()
	if err != nil {
		return
	}
	rc.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return
	}
	zero := int64(0)
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, ns := range nss.Items {
		err := cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			b.logf("delete pods in %s: %v", ns.Name, err)
		}
	}
}
