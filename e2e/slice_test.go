//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// The vertical slice, on the real cluster: `pinniped install` deploys the
// agent from the locally built image; a Dex ID token traded through the
// aggregated TokenCredentialRequest API gives a certificate the real
// kube-apiserver accepts as the Dex user; bad tokens are refused; `pinniped
// get kubeconfig` makes a kubeconfig with which kubectl logs in through the
// exec plugin; deleting the authenticator stops its tokens; `pinniped
// uninstall` leaves nothing behind.
func TestInstallExchangeLoginUninstall(t *testing.T) {
	ctx := context.Background()
	cfg := Bed.Config()
	KeyringSession(t)
	pinniped := BuildStatic(t, "./cmd/pinniped")
	image := AgentImage(t)
	alice := testbed.DexUsers[0]

	// Before anything is installed, get kubeconfig says what to do.
	if out, err := RunE(nil, pinniped, "get", "kubeconfig"); err == nil || !strings.Contains(out+err.Error(), "pinniped install") {
		t.Fatalf("get kubeconfig without an agent: %v %s", err, out)
	}

	install := []string{"install", "--image=" + image, "--image-pull-policy=Never",
		"--oidc-issuer=" + cfg.DexIssuer(), "--oidc-audience=" + testbed.DexClientID,
		"--oidc-ca-bundle=" + cfg.TestbedCAFile(), "--oidc-username-claim=email",
		"--authenticator-name=dex", "--timeout=4m"}
	Run(t, nil, pinniped, install...)
	t.Cleanup(func() { _, _ = RunE(nil, pinniped, "uninstall") })

	t.Run("install is idempotent", func(t *testing.T) {
		before := Kubectl(t, "-n", "pinniped", "get", "deploy", "pinniped-agent", "-o", "jsonpath={.metadata.generation}")
		Run(t, nil, pinniped, install...)
		after := Kubectl(t, "-n", "pinniped", "get", "deploy", "pinniped-agent", "-o", "jsonpath={.metadata.generation}")
		if before != after {
			t.Fatalf("re-running install changed the Deployment (generation %s -> %s)", before, after)
		}
		// GitOps: the printed manifests, applied by kubectl, describe the
		// same installation.
		manifests := filepath.Join(t.TempDir(), "pinniped.yaml")
		if err := os.WriteFile(manifests, []byte(Run(t, nil, pinniped, append(install, "-o", "yaml")...)), 0o600); err != nil {
			t.Fatal(err)
		}
		Kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", manifests)
		if again := Kubectl(t, "-n", "pinniped", "get", "deploy", "pinniped-agent", "-o", "jsonpath={.metadata.generation}"); again != before {
			t.Fatalf("kubectl apply of install -o yaml changed the Deployment (generation %s -> %s)", before, again)
		}
		Run(t, nil, pinniped, install...) // still healthy, by install's own checks
	})

	t.Run("the strategy matches the cluster profile", func(t *testing.T) {
		// kubeadm: the signing key is read from the controller manager's
		// node; managed: no control plane in reach, the CSR API signs.
		// Where anonymous requests reach only health endpoints, the CSR
		// API still signs (for the exchange through kubectl below, which
		// is authenticated), but clients without a credential cannot ask
		// for it: the status says so, and the impersonation proxy works.
		want := map[string]string{"kubeadm": "KubeClusterSigningCertificate=Success", "managed": "CertificateSigningRequest=Success"}[cfg.Profile]
		if cfg.AnonymousHealthOnly() {
			want = "CertificateSigningRequest=Error:ErrorDuringSetup:the API server refuses anonymous requests to the TokenCredentialRequest API"
		}
		Eventually(t, 2*time.Minute, want, func(context.Context) error {
			out, err := RunE(nil, "kubectl", "get", "credentialissuer", "pinniped-config", "-o",
				`jsonpath={range .status.strategies[*]}{.type}={.status}:{.reason}:{.message}{"\n"}{end}`)
			if err != nil {
				return err
			}
			if cfg.AnonymousHealthOnly() && !strings.Contains(out, "ImpersonationProxy=Success") {
				return fmt.Errorf("without anonymous access the impersonation proxy must work:\n%s", out)
			}
			if !strings.Contains(out, want) {
				return fmt.Errorf("strategies:\n%s", out)
			}
			if cfg.Profile == "managed" && !strings.Contains(out, "KubeClusterSigningCertificate=Error:CouldNotFetchKey") {
				return fmt.Errorf("on a managed cluster the signing-key strategy must say why it cannot work:\n%s", out)
			}
			return nil
		})
	})

	t.Run("exchange gives a certificate the API server accepts", func(t *testing.T) {
		idToken := PasswordLogin(t, ctx, alice).Extra("id_token").(string)
		// The signing-key strategy issues 5-minute certificates; the CSR API
		// cannot go below 10 minutes. The status above is the leader's view:
		// the other replica loads the key within about a second of it, and
		// issues through the CSR API until then, so allow it that long.
		wantTTL := map[string]time.Duration{"kubeadm": 5 * time.Minute, "managed": 10 * time.Minute}[cfg.Profile]
		var cred exchangedCredential
		Eventually(t, 30*time.Second, fmt.Sprintf("a certificate living about %v on the %s profile", wantTTL, cfg.Profile), func(context.Context) error {
			cred = exchange(t, idToken, "JWTAuthenticator", "dex")
			if cred.Message != "" || cred.Cert == "" {
				t.Fatalf("exchange failed: %+v", cred)
			}
			block, _ := pem.Decode([]byte(cred.Cert))
			leaf, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if ttl := time.Until(leaf.NotAfter); ttl > wantTTL || ttl < wantTTL-time.Minute {
				return fmt.Errorf("certificate lives %v more", ttl.Round(time.Second))
			}
			return nil
		})
		who := whoamiWithCert(t, cred)
		if who.Username != alice.Email || !slices.Contains(who.Groups, "developers") || !slices.Contains(who.Groups, "admins") {
			t.Fatalf("the API server sees %+v, want %s in developers and admins", who, alice.Email)
		}
	})

	t.Run("bad tokens get authentication failed", func(t *testing.T) {
		good := PasswordLogin(t, ctx, alice).Extra("id_token").(string)
		parts := strings.Split(good, ".")
		cases := map[string][2]string{
			"garbage":               {"not-a-jwt", "dex"},
			"tampered signature":    {parts[0] + "." + parts[1] + ".AAAA", "dex"},
			"oversized":             {strings.Repeat("a", 100<<10), "dex"},
			"unknown authenticator": {good, "nope"},
		}
		for name, c := range cases {
			if cred := exchange(t, c[0], "JWTAuthenticator", c[1]); cred.Message != "authentication failed" || cred.Cert != "" {
				t.Errorf("%s: got %+v, want only \"authentication failed\"", name, cred)
			}
		}
	})

	t.Run("get kubeconfig explains bad situations", func(t *testing.T) {
		applyYAML(t, `apiVersion: authentication.concierge.pinniped.dev/v1alpha1
kind: JWTAuthenticator
metadata: {name: second}
spec: {issuer: "https://second.example.com", audience: x}
`)
		out, err := RunE(nil, pinniped, "get", "kubeconfig")
		if err == nil || !strings.Contains(err.Error(), "jwt/dex, jwt/second") || !strings.Contains(err.Error(), "--concierge-authenticator-name") {
			t.Errorf("two authenticators without a terminal: %v %s", err, out)
		}
		Kubectl(t, "delete", "jwtauthenticator", "second")

		_, err = RunE(nil, pinniped, "get", "kubeconfig", "--oidc-issuer=https://"+cfg.NodeIP+":1", "--timeout=20s")
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Errorf("unreachable issuer: %v", err)
		}

		dead := filepath.Join(t.TempDir(), "dead.kubeconfig")
		_ = os.WriteFile(dead, []byte(strings.ReplaceAll(string(mustRead(t, cfg.AdminKubeconfig())), cfg.APIServerURL(), "https://"+cfg.NodeIP+":1")), 0o600)
		_, err = RunE(nil, pinniped, "get", "kubeconfig", "--kubeconfig="+dead, "--timeout=20s")
		if err == nil || !strings.Contains(err.Error(), "connect") {
			t.Errorf("no cluster access: %v", err)
		}
	})

	t.Run("kubectl logs in through the generated kubeconfig", func(t *testing.T) {
		Kubectl(t, "create", "clusterrolebinding", "e2e-developers-view", "--clusterrole=view", "--group=developers")
		t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "clusterrolebinding", "e2e-developers-view") })
		kubeconfig := filepath.Join(t.TempDir(), "alice.kubeconfig")
		if err := os.WriteFile(kubeconfig, []byte(Run(t, nil, pinniped, "get", "kubeconfig", "--oidc-flow=password")), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"KUBECONFIG=" + kubeconfig, "XDG_CONFIG_HOME=" + t.TempDir(),
			"PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password, "PATH=" + filepath.Dir(pinniped) + ":" + os.Getenv("PATH")}
		if out := Run(t, env, "kubectl", "get", "namespaces"); !strings.Contains(out, "pinniped") {
			t.Fatalf("kubectl get namespaces as alice: %s", out)
		}
		out := Run(t, env, "kubectl", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		if out != alice.Email {
			t.Fatalf("kubectl auth whoami through the kubeconfig: %q", out)
		}
		if out := Run(t, env, pinniped, "whoami", "-o", "json"); !strings.Contains(out, `"username": "`+alice.Email+`"`) || !strings.Contains(out, "WhoAmIRequest") {
			t.Fatalf("pinniped whoami: %s", out)
		}
	})

	t.Run("deleting the authenticator stops its tokens at once", func(t *testing.T) {
		idToken := PasswordLogin(t, ctx, alice).Extra("id_token").(string)
		Kubectl(t, "delete", "jwtauthenticator", "dex")
		// Both replicas must drop it; each exchange may hit either one.
		Eventually(t, 20*time.Second, "both agent replicas refuse tokens of the deleted authenticator", func(context.Context) error {
			for range 6 {
				if cred := exchange(t, idToken, "JWTAuthenticator", "dex"); cred.Message == "" {
					return errors.New("an exchange still succeeded")
				}
			}
			return nil
		})
	})

	t.Run("uninstall leaves nothing behind", func(t *testing.T) {
		Run(t, nil, pinniped, "uninstall")
		nothingLeft(t, "uninstall")
		if out, err := RunE(nil, pinniped, "uninstall"); err != nil {
			t.Fatalf("a second uninstall must succeed quietly: %v %s", err, out)
		}
	})
}

type exchangedCredential struct {
	Cert, Key, Message string
}

// exchange creates a TokenCredentialRequest with kubectl, as any client would.
func exchange(t *testing.T, token, kind, name string) exchangedCredential {
	t.Helper()
	req := map[string]any{
		"apiVersion": "login.concierge.pinniped.dev/v1alpha1", "kind": "TokenCredentialRequest",
		"spec": map[string]any{"token": token, "authenticator": map[string]any{
			"apiGroup": "authentication.concierge.pinniped.dev", "kind": kind, "name": name}},
	}
	b, _ := json.Marshal(req)
	f := filepath.Join(t.TempDir(), "tcr.json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out := Kubectl(t, "create", "-f", f, "-o", "json")
	var resp struct {
		Status struct {
			Credential *struct {
				ClientCertificateData string `json:"clientCertificateData"`
				ClientKeyData         string `json:"clientKeyData"`
			} `json:"credential"`
			Message *string `json:"message"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("TokenCredentialRequest answer: %v\n%s", err, out)
	}
	var c exchangedCredential
	if resp.Status.Credential != nil {
		c.Cert, c.Key = resp.Status.Credential.ClientCertificateData, resp.Status.Credential.ClientKeyData
	}
	if resp.Status.Message != nil {
		c.Message = *resp.Status.Message
	}
	return c
}

// exchangeUntilIssued exchanges token until the agent issues a credential,
// and returns it: an authenticator's Ready phase and the signing key's
// Success are the leader's view, and the replica that answers may be a
// moment behind. On failure the agent's log is printed.
func exchangeUntilIssued(t *testing.T, token, kind, name string) exchangedCredential {
	t.Helper()
	defer func() {
		if t.Failed() {
			logs, _ := RunE(nil, "kubectl", "logs", "-n", ourInstall.namespace, "-l", ourInstall.selector, "--tail=30", "--prefix")
			t.Logf("the agent's log:\n%s", logs)
		}
	}()
	var cred exchangedCredential
	Eventually(t, 90*time.Second, "the agent issues a credential for "+kind+" "+name, func(context.Context) error {
		if cred = exchange(t, token, kind, name); cred.Cert == "" {
			return fmt.Errorf("the exchange failed: %q", cred.Message)
		}
		return nil
	})
	return cred
}

type userInfo struct {
	Username string   `json:"username"`
	UID      string   `json:"uid"`
	Groups   []string `json:"groups"`
}

// whoamiWithCert asks the real API server who a client certificate is.
func whoamiWithCert(t *testing.T, c exchangedCredential) userInfo {
	t.Helper()
	return whoamiWithCertAt(t, c, Bed.Config().APIServerURL(), Bed.Config().ClusterCAFile())
}

// whoamiWithCertAt is whoamiWithCert against server (say, the impersonation proxy), trusting caFile.
func whoamiWithCertAt(t *testing.T, c exchangedCredential, server, caFile string) userInfo {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	_ = os.WriteFile(cert, []byte(c.Cert), 0o600)
	_ = os.WriteFile(key, []byte(c.Key), 0o600)
	out := Run(t, []string{"KUBECONFIG=/dev/null"}, "kubectl", "--server="+server,
		"--certificate-authority="+caFile, "--client-certificate="+cert, "--client-key="+key,
		"auth", "whoami", "-o", "json")
	var review struct {
		Status struct {
			UserInfo userInfo `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &review); err != nil {
		t.Fatalf("kubectl auth whoami: %v\n%s", err, out)
	}
	return review.Status.UserInfo
}

// TestInstallSaysWhyItIsNotReady: when the agent cannot start, install's
// wait ends with what is wrong (pod state, events), not just "timed out".
func TestInstallSaysWhyItIsNotReady(t *testing.T) {
	pinniped := BuildStatic(t, "./cmd/pinniped")
	out, err := RunE(nil, pinniped, "install", "--image=localhost/pinniped-e2e/does-not-exist:1",
		"--image-pull-policy=Never", "--timeout=40s")
	t.Cleanup(func() { _, _ = RunE(nil, pinniped, "uninstall") })
	if err == nil {
		t.Fatalf("install with a missing image succeeded:\n%s", out)
	}
	msg := err.Error()
	for _, want := range []string{"not ready after 40s", "agent Deployment available", "ErrImageNeverPull", "kubectl -n pinniped describe pods"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure does not mention %q:\n%s", want, msg)
		}
	}
}

// nothingLeft waits until no object of the agent (the default install's)
// is left after how ("uninstall", "helm uninstall"), and fails t for any
// that survived.
func nothingLeft(t *testing.T, how string) {
	t.Helper()
	Eventually(t, 2*time.Minute, "no pinniped objects left", func(context.Context) error {
		left, err := RunE(nil, "kubectl", "get",
			"namespaces,clusterroles,clusterrolebindings,apiservices,customresourcedefinitions,certificatesigningrequests",
			"-l", "app.kubernetes.io/part-of=pinniped", "-o", "name")
		if err != nil {
			return err
		}
		for _, ns := range []string{"kube-system", "kube-public"} {
			more, err := RunE(nil, "kubectl", "-n", ns, "get", "roles,rolebindings,secrets", "-l", "app.kubernetes.io/part-of=pinniped", "-o", "name")
			if err != nil {
				return err
			}
			left += more
		}
		if strings.TrimSpace(left) != "" {
			return fmt.Errorf("still there:\n%s", left)
		}
		if _, err := RunE(nil, "kubectl", "get", "namespace", "pinniped"); err == nil {
			return errors.New("namespace pinniped still exists")
		}
		return nil
	})
	// And by name, for what the label query might miss.
	for _, obj := range []string{
		"crd/jwtauthenticators.authentication.concierge.pinniped.dev", "crd/webhookauthenticators.authentication.concierge.pinniped.dev",
		"crd/credentialissuers.config.concierge.pinniped.dev", "apiservice/v1alpha1.login.concierge.pinniped.dev",
		"apiservice/v1alpha1.identity.concierge.pinniped.dev", "clusterrole/pinniped-agent", "clusterrole/pinniped-pre-authn-apis",
		"clusterrolebinding/pinniped-agent", "clusterrolebinding/pinniped-pre-authn-apis",
		"clusterrole/pinniped-agent-proxy", "clusterrolebinding/pinniped-agent-proxy", "clusterrolebinding/pinniped-agent-auth-delegator",
	} {
		if _, err := RunE(nil, "kubectl", "get", obj); err == nil {
			t.Errorf("%s survived %s", obj, how)
		}
	}
	for _, obj := range []string{"rolebinding/pinniped-agent-extension-apiserver-authentication-reader", "rolebinding/pinniped-agent-find-controller-manager", "role/pinniped-agent-find-controller-manager"} {
		if _, err := RunE(nil, "kubectl", "-n", "kube-system", "get", obj); err == nil {
			t.Errorf("kube-system %s survived %s", obj, how)
		}
	}
}
