//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

const proxyNS = "proxy-e2e"

// proxyStrategy reads the ImpersonationProxy strategy from the CredentialIssuer.
type proxyStrategy struct {
	Status, Reason, Message string
	Endpoint                string
	CA                      []byte
}

// readProxyStrategy reads the installation's ImpersonationProxy strategy
// from its CredentialIssuer.
func (in installation) readProxyStrategy(t *testing.T) (proxyStrategy, error) {
	out, err := RunE(nil, "kubectl", append(in.kubectlArgs(), "get", "credentialissuers."+groupsuffix.Group(groupsuffix.Config, in.suffix),
		in.credentialIssuerName(), "-o", "json")...)
	if err != nil {
		return proxyStrategy{}, err
	}
	var ci struct {
		Status struct {
			Strategies []struct {
				Type, Status, Reason, Message string
				Frontend                      *struct {
					ImpersonationProxyInfo *struct {
						Endpoint                 string `json:"endpoint"`
						CertificateAuthorityData string `json:"certificateAuthorityData"`
					} `json:"impersonationProxyInfo"`
				} `json:"frontend"`
			} `json:"strategies"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &ci); err != nil {
		return proxyStrategy{}, err
	}
	for _, s := range ci.Status.Strategies {
		if s.Type != "ImpersonationProxy" {
			continue
		}
		ps := proxyStrategy{Status: s.Status, Reason: s.Reason, Message: s.Message}
		if s.Frontend != nil && s.Frontend.ImpersonationProxyInfo != nil {
			ps.Endpoint = s.Frontend.ImpersonationProxyInfo.Endpoint
			ps.CA, _ = base64.StdEncoding.DecodeString(s.Frontend.ImpersonationProxyInfo.CertificateAuthorityData)
		}
		return ps, nil
	}
	return proxyStrategy{}, errors.New("no ImpersonationProxy strategy in the status yet")
}

// waitProxyStrategy waits until ok accepts the strategy and returns it.
func waitProxyStrategy(t *testing.T, what string, ok func(proxyStrategy) error) proxyStrategy {
	t.Helper()
	return ourInstall.waitProxyStrategy(t, what, ok)
}

func (in installation) waitProxyStrategy(t *testing.T, what string, ok func(proxyStrategy) error) proxyStrategy {
	t.Helper()
	var got proxyStrategy
	Eventually(t, 2*time.Minute, what, func(context.Context) error {
		s, err := in.readProxyStrategy(t)
		if err != nil {
			return err
		}
		if err := ok(s); err != nil {
			return fmt.Errorf("%w (strategy: %+v)", err, s)
		}
		got = s
		return nil
	})
	return got
}

func proxySucceeds(s proxyStrategy) error {
	if s.Status != "Success" || s.Endpoint == "" {
		return errors.New("not Success yet")
	}
	return nil
}

// TestImpersonationProxy is issue 7's end-to-end test. On the managed profile (no
// control-plane nodes) auto mode runs the proxy behind a LoadBalancer, `get kubeconfig`
// picks it, and kubectl does everything through it as the Dex user. On the kubeadm
// profile auto mode leaves it off and says why.
func TestImpersonationProxy(t *testing.T) {
	cfg := Bed.Config()
	pinniped := installAgent(t)

	if cfg.Profile != testbed.ProfileManaged {
		s := waitProxyStrategy(t, "the proxy reports it is off", func(s proxyStrategy) error {
			if s.Reason != "Disabled" || !strings.Contains(s.Message, "control-plane") {
				return errors.New("not Disabled for the control plane")
			}
			return nil
		})
		t.Logf("kubeadm profile: %s", s.Message)
		if _, err := RunE(nil, "kubectl", "-n", "pinniped", "get", "service", "pinniped-agent-proxy"); err == nil {
			t.Fatal("a disabled proxy must have no Service")
		}
		return
	}

	strategy := waitProxyStrategy(t, "the proxy is advertised", proxySucceeds)
	t.Logf("proxy: %s", strategy.Message)
	proxyURL, err := url.Parse(strategy.Endpoint)
	if err != nil || !strings.HasPrefix(proxyURL.Hostname(), "10.99.1.") {
		t.Fatalf("endpoint %q: want the load balancer address from the bed's LB range (%v)", strategy.Endpoint, err)
	}
	caFile := filepath.Join(t.TempDir(), "proxy-ca.crt")
	if err := os.WriteFile(caFile, strategy.CA, 0o600); err != nil {
		t.Fatal(err)
	}

	Kubectl(t, "create", "namespace", proxyNS)
	t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "namespace", proxyNS, "--wait=false") })
	Kubectl(t, "create", "clusterrolebinding", "proxy-e2e-developers-view", "--clusterrole=view", "--group=developers")
	t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "clusterrolebinding", "proxy-e2e-developers-view") })
	Kubectl(t, "-n", proxyNS, "create", "rolebinding", "developers-edit", "--clusterrole=edit", "--group=developers")

	alice := testbed.DexUsers[0]
	// The proxy hands out certificates until the leader's first token key
	// signs; what ships is tokens, so everything below runs with them.
	idToken := PasswordLogin(t, context.Background(), alice).Extra("id_token").(string)
	ourInstall.waitProxyToken(t, strategy, idToken)

	kubeconfig := filepath.Join(t.TempDir(), "alice.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(Run(t, nil, pinniped, "get", "kubeconfig", "--oidc-flow=password")), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + kubeconfig, "XDG_CONFIG_HOME=" + t.TempDir(),
		"PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password}
	asAlice := func(t *testing.T, args ...string) string {
		t.Helper()
		return Run(t, env, "kubectl", args...)
	}

	t.Run("get kubeconfig picks the proxy", func(t *testing.T) {
		server := Run(t, []string{"KUBECONFIG=" + kubeconfig}, "kubectl", "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
		if server != strategy.Endpoint {
			t.Fatalf("kubeconfig server %q, want the proxy %q", server, strategy.Endpoint)
		}
	})

	t.Run("kubectl is the Dex user through the proxy", func(t *testing.T) {
		var who selfSubjectReview
		if err := json.Unmarshal([]byte(asAlice(t, "auth", "whoami", "-o", "json")), &who); err != nil {
			t.Fatal(err)
		}
		u := who.Status.UserInfo
		if u.Username != alice.Email || !slices.Contains(u.Groups, "developers") || !slices.Contains(u.Groups, "admins") {
			t.Fatalf("the API server sees %+v", u)
		}
		if out := asAlice(t, "get", "namespaces", "-o", "name"); !strings.Contains(out, "namespace/"+proxyNS) {
			t.Fatalf("kubectl get namespaces: %s", out)
		}
		if out := Run(t, env, pinniped, "whoami"); !strings.Contains(out, alice.Email) {
			t.Fatalf("pinniped whoami through the proxy: %s", out)
		}
	})

	t.Run("kubectl's credential is the proxy's own token, which never reaches the API server", func(t *testing.T) {
		tok := execCredentialToken(t, pinniped, kubeconfig, env)
		jti := tokenJTI(t, tok)
		var who selfSubjectReview
		if err := json.Unmarshal([]byte(asAlice(t, "auth", "whoami", "-o", "json")), &who); err != nil {
			t.Fatal(err)
		}
		if got := who.Status.UserInfo.Extra[proxytoken.CredentialIDExtra]; !slices.Equal(got, []string{"JTI=" + jti}) {
			t.Fatalf("the API server sees credential ID %q, want the exec plugin's token's JTI=%s", got, jti)
		}
		// The API server's own record: the proxy's ServiceAccount (the only
		// Authorization it got) impersonating alice, with the token's ID.
		Eventually(t, 20*time.Second, "the audit event of the whoami with the token's ID", func(context.Context) error {
			evs := auditEventsWithCredentialID("JTI=" + jti)
			if len(evs) == 0 {
				return errors.New("no audit event with the token's credential ID")
			}
			for _, ev := range evs {
				if ev.User.Username != "system:serviceaccount:pinniped:pinniped-agent-proxy" || ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != alice.Email {
					t.Fatalf("audit event by %+v impersonating %+v, want the proxy's ServiceAccount impersonating %s", ev.User, ev.ImpersonatedUser, alice.Email)
				}
			}
			return nil
		})
	})

	t.Run("apply get list delete", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "cm.yaml")
		_ = os.WriteFile(f, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied, namespace: "+proxyNS+"}\ndata: {k: v1}\n"), 0o600)
		asAlice(t, "apply", "-f", f)
		_ = os.WriteFile(f, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied, namespace: "+proxyNS+"}\ndata: {k: v2}\n"), 0o600)
		asAlice(t, "apply", "--server-side", "-f", f)
		if v := asAlice(t, "-n", proxyNS, "get", "configmap", "applied", "-o", "jsonpath={.data.k}"); v != "v2" {
			t.Fatalf("after apply: %q", v)
		}
		if out := asAlice(t, "-n", proxyNS, "get", "configmaps", "-o", "name"); !strings.Contains(out, "configmap/applied") {
			t.Fatalf("list: %s", out)
		}
		if v := Kubectl(t, "-n", proxyNS, "get", "configmap", "applied", "-o", "jsonpath={.metadata.managedFields[*].manager}"); !strings.Contains(v, "kubectl") {
			t.Fatalf("managed fields: %s", v)
		}
		asAlice(t, "-n", proxyNS, "delete", "configmap", "applied")
		// alice may not write outside her namespace: the API server decides as her.
		if _, err := RunE(env, "kubectl", "-n", "default", "create", "configmap", "nope"); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("create outside the allowed namespace: %v", err)
		}
	})

	t.Run("watch streams events promptly", func(t *testing.T) {
		// Not --watch-only: the listing's last line says the watch is about to
		// start from its resourceVersion, so the create below cannot fall
		// before it (a fixed sleep could, on a loaded machine).
		w := startStream(t, env, "kubectl", "-n", proxyNS, "get", "configmaps", "--watch", "-o", "name")
		w.waitLine(t, 30*time.Second, func(l string) bool { return l == "configmap/kube-root-ca.crt" })
		start := time.Now()
		asAlice(t, "-n", proxyNS, "create", "configmap", "watched")
		w.waitLine(t, 15*time.Second, func(l string) bool { return l == "configmap/watched" })
		t.Logf("watch event arrived %v after the create", time.Since(start).Round(time.Millisecond))
	})

	// A pod to exec into, stream logs from and port-forward to.
	image := ImportImage(t, "./e2e/internal/testserver", testImageRepo)
	applyYAML(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: ticker, namespace: %s}
spec:
  containers:
  - {name: main, image: %s, imagePullPolicy: Never, args: [ticker, --addr, ":8080"]}
`, proxyNS, image))
	Kubectl(t, "-n", proxyNS, "wait", "--for=condition=Ready", "pod/ticker", "--timeout=90s")

	// Port-forwards start now and are checked again at the end, after more than a minute
	// of idleness, so the long wait overlaps the other tests.
	type forward struct {
		name, port string
		started    time.Time
		s          *stream
	}
	var forwards []forward
	for _, pf := range []struct{ name, env string }{{"websocket", "KUBECTL_PORT_FORWARD_WEBSOCKETS=true"}, {"spdy", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}} {
		s := startStream(t, append(env, pf.env), "kubectl", "-n", proxyNS, "port-forward", "--address=127.0.0.1", "pod/ticker", ":8080")
		line := s.waitLine(t, 30*time.Second, func(l string) bool { return strings.HasPrefix(l, "Forwarding from 127.0.0.1:") })
		_, port, _ := net.SplitHostPort(strings.Fields(strings.TrimPrefix(line, "Forwarding from "))[0])
		if body := httpGet(t, "http://127.0.0.1:"+port+"/first"); !strings.Contains(body, `hello through port-forward "/first"`) {
			t.Fatalf("port-forward (%s): %q", pf.name, body)
		}
		forwards = append(forwards, forward{pf.name, port, time.Now(), s})
	}

	t.Run("exec over WebSocket and SPDY", func(t *testing.T) {
		for _, mode := range []struct{ name, env string }{{"websocket", "KUBECTL_REMOTE_COMMAND_WEBSOCKETS=true"}, {"spdy", "KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false"}} {
			e := append(slices.Clone(env), mode.env)
			if out := Run(t, e, "kubectl", "-n", proxyNS, "exec", "ticker", "--", "testserver", "echo", "hello", mode.name); strings.TrimSpace(out) != "hello "+mode.name {
				t.Fatalf("exec (%s): %q", mode.name, out)
			}
			out, err := runStdin(e, "line one\nline two\n", "kubectl", "-n", proxyNS, "exec", "-i", "ticker", "--", "testserver", "cat")
			if err != nil || out != "line one\nline two\n" {
				t.Fatalf("exec -i (%s): %q %v", mode.name, out, err)
			}
		}
		// The agents' audit lines say which protocol each exec upgraded to.
		for _, proto := range []string{"websocket", "SPDY/3.1"} {
			waitAgentLog(t, fmt.Sprintf("an exec upgraded to %s through the proxy", proto), func(l map[string]any) bool {
				return l["proxy"] == true && strings.HasSuffix(fmt.Sprint(l["path"]), "/pods/ticker/exec") && l["upgrade"] == proto
			})
		}
	})

	// From 1.36 kube-apiserver's impersonation is constrained (KEP-5284,
	// beta, on by default): it asks for impersonate-on: verbs first, then
	// the legacy impersonate verb the proxy's ServiceAccount holds. Every
	// check of this test ran under it on such a bed; this says that it did.
	t.Run("the API server's impersonation mode is the version's default", func(t *testing.T) {
		minor := Bed.Config().KubeMinorNumber()
		metrics := Kubectl(t, "get", "--raw", "/metrics")
		on := regexp.MustCompile(`(?m)^kubernetes_feature_enabled\{name="ConstrainedImpersonation",stage="[A-Z]*"\} 1$`).MatchString(metrics)
		if on != (minor >= 36) {
			t.Errorf("ConstrainedImpersonation on: %v on 1.%d, want %v", on, minor, minor >= 36)
		}
	})

	// Kubernetes 1.35 authorizes exec over WebSocket (a GET) as create, as
	// SPDY's POST always was: a user with get alone on pods/exec is
	// refused from then on, and allowed a WebSocket exec before. Through
	// the proxy the answer is the API server's own on every version: the
	// same user gets the same answer directly and through it.
	t.Run("exec with get alone: the API server's answer, through the proxy too", func(t *testing.T) {
		user := "exec-get-only@example.com"
		Kubectl(t, "-n", proxyNS, "create", "role", "exec-get-only", "--verb=get,list", "--resource=pods,pods/exec,pods/portforward")
		Kubectl(t, "-n", proxyNS, "create", "rolebinding", "exec-get-only", "--role=exec-get-only", "--user="+user)
		t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "-n", proxyNS, "delete", "role,rolebinding", "exec-get-only") })
		pair := signerCredential(t, ourInstall, user, "", nil)
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "user.crt"), filepath.Join(dir, "user.key")
		if err := os.WriteFile(certFile, pair.Cert, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, pair.Key, 0o600); err != nil {
			t.Fatal(err)
		}
		proxied := []string{"--kubeconfig=/dev/null", "--server=" + strategy.Endpoint, "--certificate-authority=" + caFile,
			"--client-certificate=" + certFile, "--client-key=" + keyFile}
		direct := []string{"--as=" + user} // the bed's admin, as the user
		minor := Bed.Config().KubeMinorNumber()
		// A refusal is the API server's 403, nothing else (a wrong CA or
		// a missing pod would fail too, for another reason).
		outcome := func(out string, err error) string {
			switch {
			case err == nil && strings.TrimSpace(out) == "hello":
				return "allowed"
			case err != nil && (strings.Contains(strings.ToLower(err.Error()), "forbidden") || strings.Contains(err.Error(), "403")):
				return "forbidden"
			}
			return fmt.Sprintf("neither (%q %v)", out, err)
		}
		// kubectl falls back from a refused WebSocket to SPDY, which would
		// answer for it: the WebSocket exec is client-go's executor alone.
		admin, err := Bed.RESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		asUser := rest.CopyConfig(admin)
		asUser.Impersonate = rest.ImpersonationConfig{UserName: user}
		atProxy := &rest.Config{Host: strategy.Endpoint, TLSClientConfig: rest.TLSClientConfig{CAData: strategy.CA, CertData: pair.Cert, KeyData: pair.Key}}
		wsExec := func(cfg *rest.Config) (string, error) {
			c, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return "", err
			}
			req := c.CoreV1().RESTClient().Post().Resource("pods").Namespace(proxyNS).Name("ticker").SubResource("exec").
				VersionedParams(&corev1.PodExecOptions{Command: []string{"testserver", "echo", "hello"}, Stdout: true}, scheme.ParameterCodec)
			ex, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, req.URL().String())
			if err != nil {
				return "", err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out bytes.Buffer
			err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out})
			return out.String(), err
		}
		spdyExec := func(args []string) (string, error) {
			return RunE([]string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false"}, "kubectl",
				append(slices.Clone(args), "-n", proxyNS, "exec", "ticker", "--", "testserver", "echo", "hello")...)
		}
		type ways struct{ direct, proxy func() (string, error) }
		modes := map[string]ways{
			"websocket": {func() (string, error) { return wsExec(asUser) }, func() (string, error) { return wsExec(atProxy) }},
			"spdy":      {func() (string, error) { return spdyExec(direct) }, func() (string, error) { return spdyExec(proxied) }},
		}
		for name, w := range modes {
			want := "forbidden"
			if name == "websocket" && minor < 35 {
				want = "allowed"
			}
			if got := outcome(w.direct()); got != want {
				t.Errorf("%s exec with get alone, directly on 1.%d: %s, want %s", name, minor, got, want)
			}
			if got := outcome(w.proxy()); got != want {
				t.Errorf("%s exec with get alone, through the proxy on 1.%d: %s, want %s as directly", name, minor, got, want)
			}
		}
		// The control: with create as well, both ways work, so the
		// refusals above were about the verb alone.
		Kubectl(t, "-n", proxyNS, "create", "role", "exec-create", "--verb=create", "--resource=pods/exec")
		Kubectl(t, "-n", proxyNS, "create", "rolebinding", "exec-create", "--role=exec-create", "--user="+user)
		t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "-n", proxyNS, "delete", "role,rolebinding", "exec-create") })
		for name, w := range modes {
			Eventually(t, 20*time.Second, name+" exec with get and create, directly and through the proxy", func(context.Context) error {
				for way, do := range map[string]func() (string, error){"directly": w.direct, "through the proxy": w.proxy} {
					if got := outcome(do()); got != "allowed" {
						return fmt.Errorf("%s: %s", way, got)
					}
				}
				return nil
			})
		}
	})

	t.Run("logs -f streams", func(t *testing.T) {
		s := startStream(t, env, "kubectl", "-n", proxyNS, "logs", "-f", "--tail=1", "ticker")
		first := s.waitLine(t, 15*time.Second, func(l string) bool { return strings.HasPrefix(l, "tick ") })
		next := s.waitLine(t, 5*time.Second, func(l string) bool { return strings.HasPrefix(l, "tick ") && l != first })
		t.Logf("logs -f: %q then %q", first, next)
	})

	t.Run("nested impersonation needs RBAC as the real user", func(t *testing.T) {
		applyYAML(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: proxy-e2e-impersonate-bob}
rules:
- {apiGroups: [""], resources: [users], verbs: [impersonate], resourceNames: [bob@example.com]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: proxy-e2e-impersonate-bob}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: proxy-e2e-impersonate-bob}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice@example.com}
`)
		t.Cleanup(func() {
			_, _ = RunE(nil, "kubectl", "delete", "clusterrolebinding,clusterrole", "proxy-e2e-impersonate-bob")
		})
		var who selfSubjectReview
		if err := json.Unmarshal([]byte(asAlice(t, "--as=bob@example.com", "auth", "whoami", "-o", "json")), &who); err != nil {
			t.Fatal(err)
		}
		u := who.Status.UserInfo
		original := u.Extra["original-user-info.impersonation-proxy.concierge.pinniped.dev"]
		if u.Username != "bob@example.com" || slices.Contains(u.Groups, "developers") || len(original) != 1 || !strings.Contains(original[0], alice.Email) {
			t.Fatalf("--as bob: the API server sees %+v", u)
		}
		// (get --raw: kubectl's discovery hides the message of a 403 as "unknown", for the
		// API server's own refusals too.)
		for _, denied := range []struct {
			flags []string
			want  string
		}{
			{[]string{"--as=carol@example.com"}, "may not impersonate carol@example.com: not allowed to impersonate users carol@example.com"},
			{[]string{"--as=bob@example.com", "--as-group=system:masters"}, "not allowed to impersonate groups system:masters"},
		} {
			_, err := RunE(env, "kubectl", append(denied.flags, "get", "--raw", "/api/v1/namespaces/"+proxyNS)...)
			if err == nil || !strings.Contains(err.Error(), denied.want) {
				t.Errorf("%v: %v", denied.flags, err)
			}
		}
	})

	t.Run("ServiceAccount tokens work through the proxy", func(t *testing.T) {
		Kubectl(t, "-n", proxyNS, "create", "serviceaccount", "robot")
		Kubectl(t, "-n", proxyNS, "create", "rolebinding", "robot-view", "--clusterrole=view", "--serviceaccount="+proxyNS+":robot")
		token := strings.TrimSpace(Kubectl(t, "-n", proxyNS, "create", "token", "robot"))
		sa := []string{"--kubeconfig=/dev/null", "--server=" + strategy.Endpoint, "--certificate-authority=" + caFile, "--token=" + token}
		if who := Run(t, nil, "kubectl", append(sa, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")...); who != "system:serviceaccount:"+proxyNS+":robot" {
			t.Fatalf("whoami with a ServiceAccount token: %q", who)
		}
		// The API server sets the token's credential ID as an extra
		// (authentication.kubernetes.io/credential-id, "JTI=..."); the
		// proxy forwards the token, so the same user with the same extras
		// arrives through it as directly.
		direct := []string{"--kubeconfig=/dev/null", "--server=" + Bed.Config().APIServerURL(), "--certificate-authority=" + Bed.Config().ClusterCAFile(), "--token=" + token}
		extras := `jsonpath={.status.userInfo.extra}`
		want := Run(t, nil, "kubectl", append(direct, "auth", "whoami", "-o", extras)...)
		if !strings.Contains(want, "authentication.kubernetes.io/credential-id") || !strings.Contains(want, "JTI=") {
			t.Errorf("the API server set no credential ID for a ServiceAccount token: %s", want)
		}
		if got := Run(t, nil, "kubectl", append(sa, "auth", "whoami", "-o", extras)...); got != want {
			t.Errorf("extras through the proxy %s, directly %s", got, want)
		}
		if out := Run(t, nil, "kubectl", append(sa, "-n", proxyNS, "get", "pods", "-o", "name")...); !strings.Contains(out, "pod/ticker") {
			t.Fatalf("get pods as the ServiceAccount: %q", out)
		}
		if _, err := RunE(nil, "kubectl", append(sa, "-n", "kube-system", "get", "secrets")...); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("the ServiceAccount's own RBAC must apply: %v", err)
		}
		if _, err := RunE(nil, "kubectl", append(sa[:3], "--token=forged", "auth", "whoami")...); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
			t.Fatalf("a forged token: %v", err)
		}
	})

	t.Run("client-sent identity headers are refused or stripped", func(t *testing.T) {
		// A client certificate from the proxy's signer still works (upstream's
		// CLI, credentials cached before tokens); the exchange returns tokens.
		cert := signerCert(t, ourInstall, alice.Email, alice.Groups)
		tok := proxyExchange(t, strategy, PasswordLogin(t, context.Background(), alice).Extra("id_token").(string)).Token
		if tok == "" {
			t.Fatal("the proxy's exchange returned a certificate after it had returned tokens")
		}
		testHeaderSmuggling(t, strategy, alice, []proxyAuth{certAuth(cert), tokenAuth(tok)})
	})

	t.Run("port-forward survives a minute of idleness", func(t *testing.T) {
		for _, f := range forwards {
			if idle := 65*time.Second - time.Since(f.started); idle > 0 {
				t.Logf("waiting %v more so the %s port-forward has been idle for over a minute", idle.Round(time.Second), f.name)
				time.Sleep(idle)
			}
			if body := httpGet(t, "http://127.0.0.1:"+f.port+"/after-idle"); !strings.Contains(body, "/after-idle") {
				t.Fatalf("port-forward (%s) after %v idle: %q", f.name, time.Since(f.started).Round(time.Second), body)
			}
			f.s.stop()
		}
		// An upgraded connection is logged when it ends: now, for both.
		for _, proto := range []string{"websocket", "SPDY/3.1"} {
			waitAgentLog(t, fmt.Sprintf("a port-forward upgraded to %s through the proxy", proto), func(l map[string]any) bool {
				return strings.HasSuffix(fmt.Sprint(l["path"]), "/pods/ticker/portforward") && l["upgrade"] == proto
			})
		}
	})

	// After the port-forwards' idle minute, which this (a second install)
	// would stretch.
	t.Run("the proxy refuses tokens it did not issue or that expired, without TokenReview", func(t *testing.T) {
		testProxyTokens(t, pinniped, strategy, idToken)
	})

	t.Run("an external serving certificate rotated live", func(t *testing.T) {
		testExternalCertificate(t, pinniped, strategy, env)
	})
}

// testHeaderSmuggling sends requests with forged identity headers through the proxy, as
// alice with each of auths (a client certificate, a proxy token), and checks what the
// real API server saw: SelfSubjectReview answers and its audit log.
func testHeaderSmuggling(t *testing.T, strategy proxyStrategy, alice testbed.DexUser, auths []proxyAuth) {
	ctx := context.Background()
	anonymous := proxyAuth{}.client(strategy)

	// A cluster-admin token to smuggle.
	Kubectl(t, "-n", proxyNS, "create", "serviceaccount", "powerful")
	Kubectl(t, "create", "clusterrolebinding", "proxy-e2e-powerful", "--clusterrole=cluster-admin", "--serviceaccount="+proxyNS+":powerful")
	t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "clusterrolebinding", "proxy-e2e-powerful") })
	adminToken := strings.TrimSpace(Kubectl(t, "-n", proxyNS, "create", "token", "powerful"))

	type seen struct {
		review
		agent string // User-Agent, to find the request in the audit log
	}
	whoami := func(c *http.Client, headers map[string][]string) seen {
		t.Helper()
		marker := "smuggle-" + randomHex(6)
		h := map[string][]string{"User-Agent": {marker}}
		for k, vs := range headers {
			h[k] = vs // as given: also non-canonical spellings
		}
		return seen{askWhoAmI(t, ctx, c, strategy.Endpoint, h), marker}
	}
	isAlice := func(name string, s seen) {
		t.Helper()
		if s.code != http.StatusCreated || s.username != alice.Email || slices.Contains(s.groups, "system:masters") {
			t.Errorf("%s: the API server saw %q %v (HTTP %d %s), want only %s", name, s.username, s.groups, s.code, s.body, alice.Email)
		}
	}
	refused := func(name string, s seen, want string) {
		t.Helper()
		if s.code != http.StatusForbidden || !strings.Contains(s.body, want) {
			t.Errorf("%s: HTTP %d %s, want 403 mentioning %q", name, s.code, s.body, want)
		}
	}
	notSent := func(name string, s seen) {
		t.Helper()
		if ev, err := auditEvent(s.agent); err == nil {
			t.Errorf("%s: the request reached the API server as %+v", name, ev.User)
		}
	}
	// Hop-by-hop tricks: a Connection header naming the proxy's own identity
	// headers would have the reverse proxy delete them after they were set,
	// and the request would reach the API server as the proxy's
	// ServiceAccount. It is refused before anything is sent (this client
	// speaks HTTP/1.1, as any client can choose in ALPN).
	badRequest := func(name string, s seen) {
		t.Helper()
		if s.code != http.StatusBadRequest || !strings.Contains(s.body, "Connection header") {
			t.Errorf("%s: HTTP %d %s, want 400 naming the Connection header", name, s.code, s.body)
		}
		notSent(name, s)
	}

	forwarded := map[string]seen{}
	for _, a := range auths {
		withAuth := a.client(strategy)
		p := a.name + ": "
		isAlice(p+"plain", whoami(withAuth, nil))
		refused(p+"Impersonate-User without permission", whoami(withAuth, map[string][]string{"Impersonate-User": {"admin"}}), "may not impersonate admin")
		refused(p+"lower-case impersonate-user", whoami(withAuth, map[string][]string{"impersonate-user": {"admin"}}), "may not impersonate admin")
		refused(p+"Impersonate-Group alone", whoami(withAuth, map[string][]string{"Impersonate-Group": {"system:masters"}}), "requires Impersonate-User")
		refused(p+"Impersonate-Uid alone", whoami(withAuth, map[string][]string{"Impersonate-Uid": {"1234"}}), "requires Impersonate-User")
		refused(p+"Impersonate-Extra alone", whoami(withAuth, map[string][]string{"Impersonate-Extra-Scopes": {"all"}}), "requires Impersonate-User")
		if a.token == "" {
			isAlice(p+"Authorization on top of a certificate", whoami(withAuth, map[string][]string{"Authorization": {"Bearer " + adminToken}}))
		} else {
			// The API server would read only the first word after Bearer:
			// a token of ours beside another is refused, whichever comes first.
			for name, auth := range map[string]string{"ours then an admin token": a.token + " " + adminToken, "an admin token then ours": adminToken + " " + a.token} {
				if s := whoami(withAuth, map[string][]string{"Authorization": {"Bearer " + auth}}); s.code != http.StatusUnauthorized {
					t.Errorf("%sAuthorization with %s: HTTP %d %s, want 401", p, name, s.code, s.body)
				} else {
					notSent(p+"Authorization with "+name, s)
				}
			}
		}
		isAlice(p+"X-Remote-User and X-Remote-Group", whoami(withAuth, map[string][]string{"X-Remote-User": {"admin"}, "X-Remote-Group": {"system:masters"}, "X-Remote-Extra-Foo": {"bar"}}))
		forwarded[a.name] = whoami(withAuth, map[string][]string{"X-Forwarded-For": {"1.2.3.4"}, "X-Real-Ip": {"1.2.3.4"}, "Forwarded": {"for=1.2.3.4"}})
		isAlice(p+"forged X-Forwarded-For", forwarded[a.name])

		for _, conn := range []string{"Impersonate-User, Impersonate-Group", "impersonate-user",
			"keep-alive, Impersonate-Extra-Original-User-Info.impersonation-Proxy.concierge.pinniped.dev", "Authorization"} {
			badRequest(p+"Connection: "+conn, whoami(withAuth, map[string][]string{"Connection": {conn}}))
		}
		badRequest(p+"Connection on a second line", whoami(withAuth, map[string][]string{"Connection": {"keep-alive", "Impersonate-User"}}))
		if code := http10Request(t, strategy, a, "Connection: Impersonate-User, Impersonate-Group"); code != http.StatusBadRequest {
			t.Errorf("%sHTTP/1.0 with Connection naming the identity: HTTP %d, want 400", p, code)
		}
		if code := http10Request(t, strategy, a, "Connection: Authorization"); code != http.StatusBadRequest {
			t.Errorf("%sHTTP/1.0 with Connection naming Authorization: HTTP %d, want 400", p, code)
		}
		if code := http10Request(t, strategy, a, "X-Remote-User: admin"); code != http.StatusOK {
			t.Errorf("%sHTTP/1.0 as alice (she may list namespaces): HTTP %d, want 200", p, code)
		}
		isAlice(p+"Connection: keep-alive", whoami(withAuth, map[string][]string{"Connection": {"keep-alive"}}))
		isAlice(p+"Proxy-Connection naming the user", whoami(withAuth, map[string][]string{"Proxy-Connection": {"Impersonate-User"}}))
	}

	// Without a certificate, forged identity headers make nobody anyone:
	// the API server decides the anonymous request as if it came directly,
	// with its own anonymous-auth setting.
	anon := whoami(anonymous, map[string][]string{"X-Remote-User": {"admin"}, "X-Remote-Group": {"system:masters"}})
	if Bed.Config().AnonymousHealthOnly() {
		if anon.code != http.StatusUnauthorized {
			t.Errorf("anonymous with X-Remote-*: HTTP %d %s, want the API server's 401: it allows anonymous requests only to health endpoints", anon.code, anon.body)
		}
	} else if anon.code != http.StatusForbidden || !strings.Contains(anon.body, "system:anonymous") {
		t.Errorf("anonymous with X-Remote-*: HTTP %d %s, want the API server's 403 for system:anonymous", anon.code, anon.body)
	}
	// A health endpoint stays open to anonymous requests through the proxy
	// as it is directly, whatever the setting.
	if resp, err := anonymous.Get(strategy.Endpoint + "/readyz"); err != nil {
		t.Errorf("anonymous /readyz through the proxy: %v", err)
	} else {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("anonymous /readyz through the proxy: HTTP %d, want 200 as directly", resp.StatusCode)
		}
	}
	if s := whoami(anonymous, map[string][]string{"Authorization": {"Bearer forged"}}); s.code != http.StatusUnauthorized {
		t.Errorf("forged bearer token: HTTP %d %s", s.code, s.body)
	}

	// The API server's audit log: the request was made by the impersonate-only
	// ServiceAccount, as alice, from the agent pod: the forged address is nowhere.
	for name, s := range forwarded {
		Eventually(t, 20*time.Second, name+": the audit event of the forged X-Forwarded-For request", func(context.Context) error {
			ev, err := auditEvent(s.agent)
			if err != nil {
				return err
			}
			if ev.User.Username != "system:serviceaccount:pinniped:pinniped-agent-proxy" || ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != alice.Email {
				return fmt.Errorf("audit event user %+v impersonating %+v", ev.User, ev.ImpersonatedUser)
			}
			if slices.Contains(ev.SourceIPs, "1.2.3.4") {
				t.Fatalf("%s: the forged X-Forwarded-For reached the API server: sourceIPs %v", name, ev.SourceIPs)
			}
			t.Logf("%s: API server audit: %s as %s from %v", name, ev.User.Username, ev.ImpersonatedUser.Username, ev.SourceIPs)
			return nil
		})
	}
	// Whatever the tricks above did, the API server never saw the proxy's
	// ServiceAccount act as itself: every request it made impersonated.
	if bare := auditEventsWithoutImpersonation(t, "system:serviceaccount:pinniped:pinniped-agent-proxy"); len(bare) > 0 {
		t.Errorf("the proxy's ServiceAccount reached the API server without impersonation %d times, e.g. %s", len(bare), bare[0])
	}
}

// auditEventsWithoutImpersonation lists the audit events of user that
// impersonated nobody (as request URIs).
func auditEventsWithoutImpersonation(t *testing.T, user string) []string {
	t.Helper()
	f, err := os.Open(Bed.Config().AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(user)) {
			continue
		}
		var ev struct {
			auditRecord
			RequestURI string `json:"requestURI"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.User.Username == user && ev.ImpersonatedUser == nil {
			out = append(out, ev.RequestURI)
		}
	}
	return out
}

// http10Request sends a raw HTTP/1.0 request authenticated by auth (its
// certificate, or its token in an Authorization line) with the given extra
// header line to the proxy, and returns the status code.
func http10Request(t *testing.T, strategy proxyStrategy, auth proxyAuth, header string) int {
	t.Helper()
	u, err := url.Parse(strategy.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(strategy.CA)
	host := u.Host
	if u.Port() == "" {
		host += ":443"
	}
	conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: pool, ServerName: u.Hostname(), Certificates: auth.certificates(), NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatalf("dial the proxy: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if auth.token != "" {
		header = "Authorization: Bearer " + auth.token + "\r\n" + header
	}
	fmt.Fprintf(conn, "GET /api/v1/namespaces HTTP/1.0\r\nHost: %s\r\n%s\r\n\r\n", u.Host, header)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("HTTP/1.0 request to the proxy: %v", err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// selfSubjectReview is what `kubectl auth whoami -o json` prints.
type selfSubjectReview struct {
	Status struct {
		UserInfo struct {
			Username string              `json:"username"`
			Groups   []string            `json:"groups"`
			Extra    map[string][]string `json:"extra"`
		} `json:"userInfo"`
	} `json:"status"`
}

// review is the API server's answer to a SelfSubjectReview.
type review struct {
	code     int
	body     string
	username string
	groups   []string
}

// askWhoAmI POSTs a SelfSubjectReview to server with c, the header
// fields set as given (non-canonical spellings too), and returns what the
// API server answered and whom it saw.
func askWhoAmI(t testing.TB, ctx context.Context, c *http.Client, server string, headers map[string][]string) review {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
		strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range headers {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST selfsubjectreviews to %s: %v", server, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r selfSubjectReview
	_ = json.Unmarshal(raw, &r)
	return review{resp.StatusCode, string(raw), r.Status.UserInfo.Username, r.Status.UserInfo.Groups}
}

type auditRecord struct {
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"impersonatedUser"`
	SourceIPs []string `json:"sourceIPs"`
}

// auditEventsWithCredentialID lists the audit events whose impersonated
// user has the credential ID id.
func auditEventsWithCredentialID(id string) []auditRecord {
	f, err := os.Open(Bed.Config().AuditLog())
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []auditRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(id)) {
			continue
		}
		var ev auditRecord
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.ImpersonatedUser != nil && slices.Contains(ev.ImpersonatedUser.Extra[proxytoken.CredentialIDExtra], id) {
			out = append(out, ev)
		}
	}
	return out
}

func auditEvent(userAgent string) (*auditRecord, error) {
	f, err := os.Open(Bed.Config().AuditLog())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(userAgent)) {
			continue
		}
		var ev auditRecord
		if err := json.Unmarshal(sc.Bytes(), &ev); err == nil && ev.UserAgent == userAgent {
			return &ev, nil
		}
	}
	return nil, fmt.Errorf("no audit event with user agent %s", userAgent)
}

// proxyExchange trades an ID token for the proxy's credential, as the CLI does.
func proxyExchange(t *testing.T, strategy proxyStrategy, token string) proxyCredential {
	t.Helper()
	return ourInstall.proxyExchange(t, strategy, token)
}

// proxyExchange is a TokenCredentialRequest on the installation's
// impersonation proxy itself, at its authenticator. It returns a
// certificate or a token, whichever the proxy issued.
func (in installation) proxyExchange(t *testing.T, strategy proxyStrategy, token string) proxyCredential {
	t.Helper()
	cred, msg := in.tcr(t, endpoint{url: strategy.Endpoint, ca: strategy.CA}, token)
	if (cred.Token == "") == (len(cred.Cert) == 0 || len(cred.Key) == 0) {
		t.Fatalf("TokenCredentialRequest on the proxy: want a token or a certificate and key, exactly one (token %t, certificate %t, key %t): %s",
			cred.Token != "", len(cred.Cert) != 0, len(cred.Key) != 0, msg)
	}
	return cred
}

// testExternalCertificate switches the proxy to a certificate in a Secret made here,
// rotates it, shows that a certificate for the wrong name is reported, and switches back.
func testExternalCertificate(t *testing.T, pinniped string, generated proxyStrategy, env []string) {
	endpoint, _ := url.Parse(generated.Endpoint)
	host := endpoint.Hostname()
	ca, err := certauthority.New("e2e external proxy CA", 24*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ip string) (certPEM, keyPEM []byte, serial string) {
		leaf, err := ca.IssueServingCert("proxy", nil, []net.IP{net.ParseIP(ip)}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
		parsed, _ := x509.ParseCertificate(c.Certificate[0])
		return leaf.CertPEM, leaf.KeyPEM, parsed.SerialNumber.String()
	}
	dir := t.TempDir()
	putSecret := func(certPEM, keyPEM []byte) {
		crt, key, caf := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
		_ = os.WriteFile(crt, certPEM, 0o600)
		_ = os.WriteFile(key, keyPEM, 0o600)
		_ = os.WriteFile(caf, ca.CertPEM(), 0o600)
		yaml := Kubectl(t, "-n", "pinniped", "create", "secret", "generic", "proxy-external-tls", "--type=kubernetes.io/tls",
			"--from-file=tls.crt="+crt, "--from-file=tls.key="+key, "--from-file=ca.crt="+caf, "--dry-run=client", "-o", "yaml")
		f := filepath.Join(dir, "secret.yaml")
		_ = os.WriteFile(f, []byte(yaml), 0o600)
		Kubectl(t, "apply", "-f", f)
	}
	// allServe: several fresh connections all get the certificate (the Service spreads
	// them over both replicas).
	allServe := func(serial string) func(context.Context) error {
		return func(context.Context) error {
			for range 8 {
				conn, err := tls.Dial("tcp", net.JoinHostPort(host, "443"), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the served certificate
				if err != nil {
					return err
				}
				got := conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
				_ = conn.Close()
				if got != serial {
					return fmt.Errorf("a replica serves certificate %s, want %s", got, serial)
				}
			}
			return nil
		}
	}

	// Restarts before this test are another test's business: compare with now.
	restartCounts := func() map[string]string {
		out := Kubectl(t, "-n", "pinniped", "get", "pods", "-l", "app.kubernetes.io/name=pinniped-agent",
			"-o", "jsonpath={range .items[*]}{.metadata.name}={.status.containerStatuses[0].restartCount}{\" \"}{end}")
		counts := map[string]string{}
		for _, f := range strings.Fields(out) {
			name, n, _ := strings.Cut(f, "=")
			counts[name] = n
		}
		return counts
	}
	restartsBefore := restartCounts()

	certPEM, keyPEM, serial1 := issue(host)
	putSecret(certPEM, keyPEM)
	Kubectl(t, "patch", "credentialissuer", "pinniped-config", "--type=merge", "-p", `{"spec":{"impersonationProxy":{"tls":{"secretName":"proxy-external-tls"}}}}`)
	t.Cleanup(func() {
		_, _ = RunE(nil, "kubectl", "patch", "credentialissuer", "pinniped-config", "--type=json", "-p", `[{"op":"remove","path":"/spec/impersonationProxy/tls"}]`)
	})
	s := waitProxyStrategy(t, "the strategy advertises the external certificate's CA", func(s proxyStrategy) error {
		if s.Status != "Success" || !bytes.Equal(s.CA, ca.CertPEM()) || !strings.Contains(s.Message, "proxy-external-tls") {
			return errors.New("not yet")
		}
		return nil
	})
	Eventually(t, time.Minute, "every replica serves the external certificate", allServe(serial1))
	if _, err := RunE(nil, "kubectl", "-n", "pinniped", "get", "secret", "pinniped-agent-proxy-tls"); err == nil {
		t.Error("the generated serving certificate was not cleaned up")
	}
	// Users' kubeconfigs made now trust the admin's CA, and work.
	kubeconfig := filepath.Join(dir, "external.kubeconfig")
	_ = os.WriteFile(kubeconfig, []byte(Run(t, nil, pinniped, "get", "kubeconfig", "--oidc-flow=password")), 0o600)
	if who := Run(t, append(slices.Clone(env), "KUBECONFIG="+kubeconfig, "XDG_CONFIG_HOME="+t.TempDir()), "kubectl", "auth", "whoami",
		"-o", "jsonpath={.status.userInfo.username}"); who != testbed.DexUsers[0].Email {
		t.Fatalf("kubectl with the external certificate: %q", who)
	}

	// Rotation: a new certificate in the same Secret is served without a restart.
	certPEM, keyPEM, serial2 := issue(host)
	putSecret(certPEM, keyPEM)
	Eventually(t, time.Minute, "every replica serves the rotated certificate", allServe(serial2))
	var restarted []string
	for name, n := range restartCounts() {
		if before, ok := restartsBefore[name]; !ok || before != n {
			// A pod that is new is a replaced one, which a rotation must not cause either.
			restarted = append(restarted, fmt.Sprintf("%s: %s restarts, before %q", name, n, before))
		}
	}
	if out := strings.Join(restarted, "; "); out != "" {
		// Why: the last state and the end of the previous run's log.
		states, _ := RunE(nil, "kubectl", "-n", "pinniped", "get", "pods", "-l", "app.kubernetes.io/name=pinniped-agent",
			"-o", "jsonpath={range .items[*]}{.metadata.name}: {.status.containerStatuses[0].lastState}{\"\\n\"}{end}")
		logs, _ := RunE(nil, "kubectl", "-n", "pinniped", "logs", "-l", "app.kubernetes.io/name=pinniped-agent", "--previous", "--tail=40")
		t.Fatalf("agent containers restarted or were replaced while the serving certificate changed: %s\n%s\n%s", out, states, logs)
	}

	// A certificate for another address is reported, in words.
	certPEM, keyPEM, _ = issue("10.99.1.250")
	putSecret(certPEM, keyPEM)
	waitProxyStrategy(t, "the strategy reports a certificate that does not cover the endpoint", func(s proxyStrategy) error {
		if s.Status != "Error" || !strings.Contains(s.Message, "does not cover "+host) {
			return errors.New("not reported yet")
		}
		return nil
	})

	// Back to the generated certificate, with the CA earlier kubeconfigs trust.
	Kubectl(t, "patch", "credentialissuer", "pinniped-config", "--type=json", "-p", `[{"op":"remove","path":"/spec/impersonationProxy/tls"}]`)
	s = waitProxyStrategy(t, "the generated certificate is back", func(s proxyStrategy) error {
		if s.Status != "Success" || !bytes.Equal(s.CA, generated.CA) {
			return errors.New("not yet")
		}
		return nil
	})
	t.Logf("back to: %s", s.Message)
	Kubectl(t, "-n", "pinniped", "delete", "secret", "proxy-external-tls")
}

// waitAgentLog waits until a JSON log line of an agent pod satisfies ok.
func waitAgentLog(t *testing.T, what string, ok func(map[string]any) bool) {
	t.Helper()
	Eventually(t, 20*time.Second, what, func(context.Context) error {
		out, err := RunE(nil, "kubectl", "-n", "pinniped", "logs", "-l", "app.kubernetes.io/name=pinniped-agent", "--tail=-1")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(out, "\n") {
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) == nil && ok(l) {
				return nil
			}
		}
		return errors.New("no such log line")
	})
}

// stream is a long-running subprocess whose stdout is read line by line.
type stream struct {
	lines chan string
	cmd   *exec.Cmd
	errb  *bytes.Buffer
	once  sync.Once
}

func startStream(t *testing.T, env []string, name string, args ...string) *stream {
	t.Helper()
	cmd := exec.Command(name, args...) //nolint:gosec // test helper
	cmd.Env = append(BedEnv(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{lines: make(chan string, 100), cmd: cmd, errb: &bytes.Buffer{}}
	cmd.Stderr = s.errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	t.Cleanup(s.stop)
	return s
}

// stop ends the subprocess (again: harmless).
func (s *stream) stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
}

func (s *stream) waitLine(t *testing.T, timeout time.Duration, ok func(string) bool) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, open := <-s.lines:
			if !open {
				t.Fatalf("%v ended before the expected line; stderr:\n%s", s.cmd.Args, s.errb.String())
			}
			if ok(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("%v: no expected line after %v; stderr:\n%s", s.cmd.Args, timeout, s.errb.String())
		}
	}
}

func runStdin(env []string, stdin, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(BedEnv(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%v: %w: %s", args, err, errb.String())
	}
	return out.String(), nil
}

func httpGet(t *testing.T, u string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
