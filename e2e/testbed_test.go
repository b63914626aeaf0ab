//go:build e2e

package e2e

// Tests of the test bed itself: each proves one capability that product tests rely on, on
// the real cluster.

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zalando/go-keyring"
	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

const testImageRepo = "localhost/pinniped-e2e/testserver"

// KubectlApply applies a manifest and registers its deletion at the end of the test.
func KubectlApply(t *testing.T, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	Kubectl(t, "apply", "-f", f)
	t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "--ignore-not-found", "--wait=false", "-f", f) })
}

// Namespace creates a namespace for one test and deletes it afterwards.
func Namespace(t *testing.T) string {
	t.Helper()
	name := "e2e-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ctx := context.Background()
	if _, err := Client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Client(t).CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// Pods need the namespace's default ServiceAccount, which kcm creates.
	Eventually(t, 30*time.Second, "default ServiceAccount in "+name, func(ctx context.Context) error {
		_, err := Client(t).CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	return name
}

func TestNodeReady(t *testing.T) {
	cfg := Bed.Config()
	n, err := Client(t).CoreV1().Nodes().Get(context.Background(), cfg.NodeName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		t.Fatalf("node %s is not Ready: %+v", n.Name, n.Status.Conditions)
	}
	// The bed runs the toolchain's release, the one asked for
	// (PINNIPED_E2E_KUBE_VERSION) or the newest.
	if got, want := n.Status.NodeInfo.KubeletVersion, cfg.KubeVersion; got != want || want == "" {
		t.Errorf("kubelet version %q, want the toolchain's %q", got, want)
	}
	if v, err := Client(t).Discovery().ServerVersion(); err != nil || v.GitVersion != cfg.KubeVersion {
		t.Errorf("API server version %+v (%v), want %s", v, err, cfg.KubeVersion)
	}
	// The profile decides whether the control plane is visible as on kubeadm clusters.
	_, hasRole := n.Labels["node-role.kubernetes.io/control-plane"]
	pods, err := Client(t).CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "component=kube-controller-manager"})
	if err != nil {
		t.Fatal(err)
	}
	switch cfg.Profile {
	case testbed.ProfileKubeadm:
		if !hasRole {
			t.Error("kubeadm profile: node lacks the control-plane role label")
		}
		if len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
			t.Fatalf("kubeadm profile: want one Running kube-controller-manager pod in kube-system, got %d", len(pods.Items))
		}
		if !slices.ContainsFunc(pods.Items[0].Spec.Containers[0].Command, func(s string) bool { return strings.HasPrefix(s, "--cluster-signing-key-file=") }) {
			t.Error("kcm static pod has no --cluster-signing-key-file flag")
		}
	case testbed.ProfileManaged:
		if hasRole {
			t.Error("managed profile: node has a control-plane role label")
		}
		if len(pods.Items) != 0 {
			t.Errorf("managed profile: want no kube-controller-manager pod, got %d", len(pods.Items))
		}
	}
}

func TestCRDsEstablished(t *testing.T) {
	dir := filepath.Join(RepoRoot(t), "install", "crds")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Fatalf("no CRD manifests in %s: the product's CRDs must be there to be tested", dir)
	}
	for _, f := range files {
		// CRDs this test creates are deleted afterwards, so that later tests (e.g. of
		// `pinniped install`) start from a cluster without them.
		for _, n := range strings.Fields(Kubectl(t, "apply", "--server-side", "--dry-run=server", "-f", f, "-o", "name")) {
			if strings.TrimSpace(Kubectl(t, "get", n, "--ignore-not-found", "-o", "name")) == "" {
				t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "--ignore-not-found", n) })
			}
		}
		names := strings.Fields(Kubectl(t, "apply", "--server-side", "-f", f, "-o", "name"))
		if len(names) == 0 {
			t.Errorf("%s: applied nothing", f)
		}
		for _, n := range names {
			if !strings.HasPrefix(n, "customresourcedefinition.") {
				t.Errorf("%s contains %s, not a CRD", f, n)
				continue
			}
			Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", n)
			t.Logf("%s: %s Established", filepath.Base(f), n)
		}
	}
}

func TestPodFromLocalImage(t *testing.T) {
	ns := Namespace(t)
	image := ImportImage(t, "./e2e/internal/testserver", testImageRepo)
	KubectlApply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: %s}
spec:
  containers:
  - name: hello
    image: %s
    imagePullPolicy: Never
    args: [hello]
`, ns, image))
	Eventually(t, 60*time.Second, "pod hello Running with its greeting logged", func(ctx context.Context) error {
		p, err := Client(t).CoreV1().Pods(ns).Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s, statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		logs, err := Client(t).CoreV1().Pods(ns).GetLogs("hello", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(string(logs), "hello from the pinniped e2e test image") {
			return fmt.Errorf("logs so far: %q", logs)
		}
		return nil
	})
}

// TestPodsReachDexAndAPIServer: the agent fetches the issuer's JWKS and talks to the API
// server from inside a pod, so both must be reachable from the pod network over TLS.
func TestPodsReachDexAndAPIServer(t *testing.T) {
	ns := Namespace(t)
	image := ImportImage(t, "./e2e/internal/testserver", testImageRepo)
	ca, err := os.ReadFile(Bed.Config().TestbedCAFile())
	if err != nil {
		t.Fatal(err)
	}
	KubectlApply(t, fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: dex-ca, namespace: %[1]s}
data: {ca.crt: %[2]q}
---
apiVersion: v1
kind: Pod
metadata: {name: reach, namespace: %[1]s}
spec:
  restartPolicy: Never
  containers:
  - name: dex
    image: %[3]s
    imagePullPolicy: Never
    args: [get, --ca=/dex-ca/ca.crt, "%[4]s/.well-known/openid-configuration"]
    volumeMounts: [{name: dex-ca, mountPath: /dex-ca}]
  - name: apiserver
    image: %[3]s
    imagePullPolicy: Never
    args: [get, --ca=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt, kubernetes]
  volumes: [{name: dex-ca, configMap: {name: dex-ca}}]
`, ns, string(ca), image, Bed.Config().DexIssuer()))
	Eventually(t, 60*time.Second, "pod reaching Dex and the API server Succeeded", func(ctx context.Context) error {
		p, err := Client(t).CoreV1().Pods(ns).Get(ctx, "reach", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodFailed {
			for _, c := range []string{"dex", "apiserver"} {
				logs, _ := Client(t).CoreV1().Pods(ns).GetLogs("reach", &corev1.PodLogOptions{Container: c}).DoRaw(ctx)
				t.Logf("%s: %s", c, logs)
			}
			t.Fatal("a pod could not reach Dex or the API server (logs above)")
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
}

// newServingCert makes a CA and a serving certificate for a Service's in-cluster DNS name.
func newServingCert(t *testing.T, dnsName string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caPEM, certPEM, keyPEM, err := testbed.NewServingCert(dnsName)
	if err != nil {
		t.Fatal(err)
	}
	return caPEM, certPEM, keyPEM
}

func TestAggregatedAPIServiceAvailable(t *testing.T) {
	ns := Namespace(t)
	image := ImportImage(t, "./e2e/internal/testserver", testImageRepo)
	group := "e2e.pinniped.dev"
	svcDNS := "aggregated." + ns + ".svc"
	ca, crt, key := newServingCert(t, svcDNS)
	KubectlApply(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: serving, namespace: %[1]s}
type: kubernetes.io/tls
data:
  tls.crt: %[2]s
  tls.key: %[3]s
---
apiVersion: v1
kind: Pod
metadata: {name: aggregated, namespace: %[1]s, labels: {app: aggregated}}
spec:
  containers:
  - name: server
    image: %[4]s
    imagePullPolicy: Never
    args: [serve, --cert=/certs/tls.crt, --key=/certs/tls.key, --group=%[5]s, --version=v1alpha1]
    volumeMounts: [{name: certs, mountPath: /certs, readOnly: true}]
  volumes: [{name: certs, secret: {secretName: serving}}]
---
apiVersion: v1
kind: Service
metadata: {name: aggregated, namespace: %[1]s}
spec:
  selector: {app: aggregated}
  ports: [{port: 443, targetPort: 8443}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1alpha1.%[5]s}
spec:
  group: %[5]s
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 10
  caBundle: %[6]s
  service: {name: aggregated, namespace: %[1]s, port: 443}
`, ns, b64(crt), b64(key), image, group, b64(ca)))
	Kubectl(t, "wait", "--for=condition=Available", "--timeout=90s", "apiservice/v1alpha1."+group)

	// The request really went through the aggregator: the backend saw the front-proxy
	// client certificate and the caller's identity in X-Remote-* headers.
	var who struct {
		User         string   `json:"user"`
		Groups       []string `json:"groups"`
		ClientCertCN string   `json:"clientCertCN"`
	}
	raw := Kubectl(t, "get", "--raw", "/apis/"+group+"/v1alpha1/whoami")
	if err := json.Unmarshal([]byte(raw), &who); err != nil {
		t.Fatalf("whoami: %v: %q", err, raw)
	}
	if who.User != "kubernetes-admin" || !slices.Contains(who.Groups, "system:masters") || who.ClientCertCN != "front-proxy-client" {
		t.Fatalf("backend saw %+v; want user kubernetes-admin in system:masters via front-proxy-client", who)
	}
}

// TestAggregatedAPIServiceOnHostProcess: an aggregated API served by a plain process (as a
// developer would run the agent with --kubeconfig), not a pod.
func TestAggregatedAPIServiceOnHostProcess(t *testing.T) {
	ns := Namespace(t)
	group := "local.e2e.pinniped.dev"
	port := FreePort(t)
	svcDNS := "local-" + strings.ReplaceAll(group, ".", "-") + "." + ns + ".svc"
	ca, crt, key := newServingCert(t, svcDNS)
	dir := t.TempDir()
	for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := BuildStatic(t, "./e2e/internal/testserver")
	StartProcess(t, bin, "serve", "--cert="+filepath.Join(dir, "tls.crt"), "--key="+filepath.Join(dir, "tls.key"),
		"--group="+group, "--version=v1alpha1", fmt.Sprintf("--addr=127.0.0.1:%d", port))
	if got := LocalAPIService(t, ns, group, "v1alpha1", port, ca); got != svcDNS {
		t.Fatalf("service DNS name %q, want %q", got, svcDNS)
	}
	Kubectl(t, "wait", "--for=condition=Available", "--timeout=60s", "apiservice/v1alpha1."+group)
	raw := Kubectl(t, "get", "--raw", "/apis/"+group+"/v1alpha1/whoami")
	if !strings.Contains(raw, `"user":"kubernetes-admin"`) || !strings.Contains(raw, `"clientCertCN":"front-proxy-client"`) {
		t.Fatalf("whoami through the aggregator: %s", raw)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestCSRSigned(t *testing.T) {
	ctx := context.Background()
	key, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := keyutil.ParsePrivateKeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	csrPEM, err := cert.MakeCSR(signer, &pkix.Name{CommonName: "e2e-user", Organization: []string{"e2e-group"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("e2e-csr-%d", time.Now().UnixNano())
	expiry := int32(600)
	csrs := Client(t).CertificatesV1().CertificateSigningRequests()
	csr, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           csrPEM,
			SignerName:        certificatesv1.KubeAPIServerClientSignerName,
			ExpirationSeconds: &expiry,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = csrs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "E2E", Message: "approved by the e2e test",
	})
	if _, err := csrs.UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var issued []byte
	Eventually(t, 30*time.Second, "CSR "+name+" signed", func(ctx context.Context) error {
		c, err := csrs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(c.Status.Certificate) == 0 {
			return fmt.Errorf("no certificate yet; conditions %+v", c.Status.Conditions)
		}
		issued = c.Status.Certificate
		return nil
	})
	blk, _ := pem.Decode(issued)
	if blk == nil {
		t.Fatalf("status.certificate is not PEM: %q", issued)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject.CommonName != "e2e-user" {
		t.Errorf("CN %q", c.Subject.CommonName)
	}
	// kcm honours expirationSeconds: NotAfter is 600 s from issuance (NotBefore is backdated).
	if left := time.Until(c.NotAfter); left > 600*time.Second || left < 500*time.Second {
		t.Errorf("certificate valid for another %s, want about 10m (NotBefore %s, NotAfter %s)", left, c.NotBefore, c.NotAfter)
	}
	// And it is a client certificate the API server accepts.
	admin := RESTConfig(t)
	rc := &rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData, CAFile: admin.CAFile, CertData: issued, KeyData: key}}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ssr, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with the signed certificate: %v", err)
	}
	if u := ssr.Status.UserInfo; u.Username != "e2e-user" || !slices.Contains(u.Groups, "e2e-group") {
		t.Errorf("API server sees the signed certificate as %+v, want e2e-user in e2e-group", u)
	}
}

func TestDexPasswordLogin(t *testing.T) {
	ctx := context.Background()
	user := testbed.DexUsers[0]
	start := time.Now()
	tok := PasswordLogin(t, ctx, user)
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatal("no id_token in the token response")
	}
	idt := VerifyIDToken(t, ctx, raw)
	var claims struct {
		Email  string   `json:"email"`
		Groups []string `json:"groups"`
	}
	if err := idt.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	if claims.Email != user.Email || !slices.Equal(claims.Groups, user.Groups) {
		t.Errorf("claims %+v, want email %s groups %v", claims, user.Email, user.Groups)
	}
	t.Logf("password grant + verification in %s", time.Since(start).Round(time.Millisecond))

	// Refresh works (this Dex version deadlocks on refresh with memory/sqlite storage; the
	// bed uses etcd) and gives a new, valid ID token.
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token (offline_access)")
	}
	_, conf := DexOAuth2(t, ctx, "")
	rctx, cancel := context.WithTimeout(DexContext(t, ctx), 10*time.Second)
	defer cancel()
	expired := *tok
	expired.Expiry = time.Now().Add(-time.Minute)
	refreshed, err := conf.TokenSource(rctx, &expired).Token()
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	raw2, _ := refreshed.Extra("id_token").(string)
	if raw2 == "" || raw2 == raw {
		t.Fatal("refresh gave no new ID token")
	}
	VerifyIDToken(t, ctx, raw2)

	// A wrong password is refused.
	if _, err := conf.PasswordCredentialsToken(DexContext(t, ctx), user.Email, "wrong"); err == nil {
		t.Error("Dex accepted a wrong password")
	}
}

func TestDexBrowserLogin(t *testing.T) {
	ctx := context.Background()
	user := testbed.DexUsers[1]
	start := time.Now()
	tok := BrowserLogin(t, ctx, user)
	raw, _ := tok.Extra("id_token").(string)
	idt := VerifyIDToken(t, ctx, raw)
	var claims struct {
		Email string `json:"email"`
	}
	if err := idt.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	if claims.Email != user.Email {
		t.Errorf("email %q, want %q", claims.Email, user.Email)
	}
	t.Logf("browser login in %s", time.Since(start).Round(time.Millisecond))
}

func TestDexDeviceFlow(t *testing.T) {
	ctx := context.Background()
	user := testbed.DexUsers[0]
	start := time.Now()
	wantTokenOf(t, ctx, DeviceLogin(t, ctx, user), user)
	t.Logf("device flow in %s", time.Since(start).Round(time.Millisecond))
}

// wantTokenOf checks that tok holds a valid ID token of Dex's for user.
func wantTokenOf(t *testing.T, ctx context.Context, tok *oauth2.Token, user testbed.DexUser) {
	t.Helper()
	raw, _ := tok.Extra("id_token").(string)
	var claims struct {
		Email string `json:"email"`
	}
	if err := VerifyIDToken(t, ctx, raw).Claims(&claims); err != nil {
		t.Fatal(err)
	}
	if claims.Email != user.Email {
		t.Errorf("email %q, want %q", claims.Email, user.Email)
	}
}

// TestDexProxy: `testbed dex-proxy`, run where a person's browser is (outside the bed's
// network namespace: where the tests were started), serves the bed's Dex there; a device login is finished
// through it, from that namespace, and every page Dex sends the browser to stays on the
// proxy (Dex's redirects to its own address rewritten).
func TestDexProxy(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := Bed.Config()
	outsidePath := os.Getenv(envOutsideNetNS)
	outside, err := os.Open(outsidePath)
	if err != nil {
		t.Fatalf("the namespace the tests were started in (%s): %v", envOutsideNetNS, err)
	}
	defer func() { _ = outside.Close() }()
	if _, err := testbed.NewDexProxy(ctx, cfg, "0.0.0.0:0"); err == nil {
		t.Error("dex-proxy listened on every address, want loopback only")
	}

	bin := filepath.Join(t.TempDir(), "testbed")
	Run(t, nil, "go", "build", "-C", RepoRoot(t), "-o", bin, "./e2e/cmd/testbed")
	proxy := exec.CommandContext(ctx, "nsenter", "--net="+outsidePath, bin, "dex-proxy", "--name", cfg.Name, "--state-dir", cfg.StateDir, "--listen", "127.0.0.1:0")
	stdout, err := proxy.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	proxy.Stderr = &stderr
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = proxy.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	base := strings.TrimSpace(line)
	if err != nil || !strings.HasPrefix(base, "https://localhost:") {
		t.Fatalf("dex-proxy printed %q (%v)\n%s", line, err, stderr.String())
	}

	// A browser outside the bed: every connection made from that namespace.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(mustRead(t, cfg.TestbedCAFile()))
	jar, _ := cookiejar.New(nil)
	var visited []string
	browser := &http.Client{
		Timeout: 30 * time.Second,
		Jar:     jar,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, port, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				if host == "localhost" {
					host = "127.0.0.1"
				}
				return testbed.DialIn(ctx, outside, network, net.JoinHostPort(host, port))
			},
		},
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			visited = append(visited, req.URL.String())
			return nil
		},
	}
	get := func(method, u string, form url.Values) string {
		t.Helper()
		visited = append(visited, u)
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequestWithContext(ctx, method, u, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", method, u, err, stderr.String())
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: HTTP %d\n%s", method, u, resp.StatusCode, b)
		}
		return string(b)
	}

	// The device login starts at Dex itself, as the CLI in the bed does.
	_, conf := DexOAuth2(t, ctx, "")
	da, err := conf.DeviceAuth(DexContext(t, ctx))
	if err != nil {
		t.Fatal(err)
	}
	get(http.MethodGet, base+"/device?user_code="+url.QueryEscape(da.UserCode), nil)
	login := get(http.MethodPost, base+"/device/auth/verify_code", url.Values{"user_code": {da.UserCode}})
	m := regexp.MustCompile(`action="([^"]+)"`).FindStringSubmatch(login)
	if m == nil {
		t.Fatalf("no login form after the code:\n%s", login)
	}
	user := testbed.DexUsers[1]
	done := get(http.MethodPost, base+html.UnescapeString(m[1]), url.Values{"login": {user.Email}, "password": {user.Password}})
	if !strings.Contains(done, "Login Successful") {
		t.Fatalf("the device login did not finish:\n%s", done)
	}
	for _, u := range visited {
		if !strings.HasPrefix(u, base+"/") {
			t.Errorf("the browser was sent off the proxy, to %s (all: %v)", u, visited)
		}
	}
	if len(visited) < 4 {
		t.Errorf("want Dex's redirects in the flow, visited only %v", visited)
	}
	pctx, pcancel := context.WithTimeout(DexContext(t, ctx), 30*time.Second)
	defer pcancel()
	tok, err := conf.DeviceAccessToken(pctx, da)
	if err != nil {
		t.Fatalf("device access token: %v", err)
	}
	wantTokenOf(t, ctx, tok, user)
}

// TestAgentImageRuns builds the agent from the working tree into an image, as the product's
// e2e tests will, and runs it in a pod.
func TestAgentImageRuns(t *testing.T) {
	ns := Namespace(t)
	image := AgentImage(t)
	KubectlApply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: agent-version, namespace: %s}
spec:
  restartPolicy: Never
  containers:
  - name: agent
    image: %s
    imagePullPolicy: Never
    args: [version, -o, json]
`, ns, image))
	Eventually(t, 60*time.Second, "agent pod Succeeded and printed its version", func(ctx context.Context) error {
		p, err := Client(t).CoreV1().Pods(ns).Get(ctx, "agent-version", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodFailed {
			logs, _ := Client(t).CoreV1().Pods(ns).GetLogs("agent-version", &corev1.PodLogOptions{}).DoRaw(ctx)
			t.Fatalf("agent pod failed: %s", logs)
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		logs, err := Client(t).CoreV1().Pods(ns).GetLogs("agent-version", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		var v struct {
			Version  string `json:"gitVersion"`
			Platform string `json:"platform"`
		}
		if err := json.Unmarshal(logs, &v); err != nil || v.Version == "" || !strings.HasPrefix(v.Platform, "linux/") {
			return fmt.Errorf("unexpected output %q (%w)", logs, err)
		}
		return nil
	})
}

func TestTmux(t *testing.T) {
	tm := NewTmux(t, 80, 24, "cat")
	tm.SendLiteral("hello from tmux")
	tm.SendKeys("Enter")
	// The terminal echoes the line, then cat prints it again.
	tm.WaitFor(10*time.Second, "the line twice", func(screen string) bool { return strings.Count(screen, "hello from tmux") == 2 })
}

func TestKeyringRoundTrip(t *testing.T) {
	KeyringSession(t)
	service, user := "pinniped-e2e", fmt.Sprintf("user-%d", time.Now().UnixNano())
	secret := make([]byte, 4096) // bigger than Windows/macOS keyrings take: Linux must not care
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	want := base64.StdEncoding.EncodeToString(secret)
	if err := keyring.Set(service, user, want); err != nil {
		t.Fatalf("keyring Set: %v", err)
	}
	t.Cleanup(func() { _ = keyring.Delete(service, user) })
	got, err := keyring.Get(service, user)
	if err != nil {
		t.Fatalf("keyring Get: %v", err)
	}
	if got != want {
		t.Fatalf("keyring Get returned %d bytes, want the %d set", len(got), len(want))
	}
	if _, err := keyring.Get(service, user+"-missing"); !errors.Is(err, keyring.ErrNotFound) {
		t.Errorf("Get of a missing item: %v, want ErrNotFound", err)
	}
}

func TestLoadBalancerService(t *testing.T) {
	ns := Namespace(t)
	image := ImportImage(t, "./e2e/internal/testserver", testImageRepo)
	_, crt, key := newServingCert(t, "lb."+ns+".svc")
	KubectlApply(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: serving, namespace: %[1]s}
type: kubernetes.io/tls
data: {tls.crt: %[2]s, tls.key: %[3]s}
---
apiVersion: v1
kind: Pod
metadata: {name: lb, namespace: %[1]s, labels: {app: lb}}
spec:
  containers:
  - name: server
    image: %[4]s
    imagePullPolicy: Never
    args: [serve, --cert=/certs/tls.crt, --key=/certs/tls.key, --group=lb.e2e.pinniped.dev]
    volumeMounts: [{name: certs, mountPath: /certs, readOnly: true}]
  volumes: [{name: certs, secret: {secretName: serving}}]
---
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: %[1]s}
spec:
  type: LoadBalancer
  selector: {app: lb}
  ports: [{port: 443, targetPort: 8443}]
`, ns, b64(crt), b64(key), image))
	var ip string
	Eventually(t, 30*time.Second, "LoadBalancer ingress IP", func(ctx context.Context) error {
		s, err := Client(t).CoreV1().Services(ns).Get(ctx, "lb", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet (lb-controller log: %s)", Bed.Config().LogFile("lb-controller"))
		}
		ip = s.Status.LoadBalancer.Ingress[0].IP
		return nil
	})
	// Reachability of the LB IP is what matters here, not the test server's certificate.
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	Eventually(t, 60*time.Second, "https://"+ip+"/healthz through the LoadBalancer IP", func(ctx context.Context) error {
		resp, err := client.Get("https://" + ip + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	})
}
