//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestTwoInstallsWithSuffixes: our agent installed twice in one cluster,
// once with the default API groups (namespace pinniped) and once with
// --api-group-suffix (as beside an upstream Concierge that keeps the
// default groups). Each one's kubeconfig logs alice in through its own
// agent; uninstalling the suffixed one leaves the default one answering.
func TestTwoInstallsWithSuffixes(t *testing.T) {
	const (
		suffix      = "e2e-suffix.example.net"
		suffixedNS  = "pinniped-suffixed"
		suffixLabel = "pinniped.dev/api-group-suffix=" + suffix
	)
	alice := testbed.DexUsers[0]
	pinniped := installAgent(t)
	Run(t, nil, pinniped, installArgs(t, "--api-group-suffix="+suffix, "--namespace="+suffixedNS)...)
	uninstallSuffixed := func() (string, error) {
		out, err := RunE(nil, pinniped, "uninstall", "--namespace="+suffixedNS, "--api-group-suffix="+suffix)
		// While both were installed, kubectl's cached discovery resolved
		// short names such as "jwtauthenticator" to either group; once the
		// suffixed one is gone, it must stop naming it (as a person would
		// after uninstalling: kubectl api-resources refreshes the cache).
		_, _ = RunE(nil, "kubectl", "api-resources", "-o", "name")
		return out, err
	}
	t.Cleanup(func() { _, _ = uninstallSuffixed() })

	if _, err := RunE(nil, "kubectl", "get", "clusterrolebinding", "e2e-suffix-view"); err != nil {
		Kubectl(t, "create", "clusterrolebinding", "e2e-suffix-view", "--clusterrole=view", "--group=developers")
		t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "clusterrolebinding", "e2e-suffix-view") })
	}

	// loginAs writes a kubeconfig with get kubeconfig's extra args and
	// logs alice in through it, with an empty credential cache.
	loginAs := func(t *testing.T, what string, getArgs ...string) string {
		t.Helper()
		dir := t.TempDir()
		kc := filepath.Join(dir, "alice.kubeconfig")
		args := append([]string{"get", "kubeconfig", "--oidc-flow=password"}, getArgs...)
		if err := os.WriteFile(kc, []byte(Run(t, nil, pinniped, args...)), 0o600); err != nil {
			t.Fatal(err)
		}
		Eventually(t, time.Minute, "alice logs in through the "+what+" install", func(context.Context) error {
			who, stderr, err := whoami(t, []string{"KUBECONFIG=" + kc, "XDG_CONFIG_HOME=" + t.TempDir(),
				"PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password})
			if err != nil || who != alice.Email {
				return errors.New(who + " " + stderr)
			}
			return nil
		})
		return kc
	}

	t.Run("each install serves its own groups from its own namespace", func(t *testing.T) {
		for name, ns := range map[string]string{
			"v1alpha1.login.concierge.pinniped.dev":    "pinniped",
			"v1alpha1.identity.concierge.pinniped.dev": "pinniped",
			"v1alpha1.login.concierge." + suffix:       suffixedNS,
			"v1alpha1.identity.concierge." + suffix:    suffixedNS,
		} {
			if got := Run(t, nil, "kubectl", "get", "apiservice", name, "-o", "jsonpath={.spec.service.namespace}"); got != ns {
				t.Errorf("APIService %s is served from %q, want %q", name, got, ns)
			}
		}
		if got := Run(t, nil, "kubectl", "get", "credentialissuers.config.concierge."+suffix, "-o", "name"); !strings.Contains(got, "pinniped-config") {
			t.Errorf("suffixed CredentialIssuer: %q", got)
		}
	})

	t.Run("get kubeconfig and log in against each", func(t *testing.T) {
		loginAs(t, "default")
		kc := loginAs(t, "suffixed", "--concierge-api-group-suffix="+suffix)
		if b, err := os.ReadFile(kc); err != nil || !strings.Contains(string(b), "--concierge-api-group-suffix="+suffix) {
			t.Errorf("the suffixed kubeconfig does not name the suffix (%v):\n%s", err, b)
		}
	})

	t.Run("uninstalling the suffixed install leaves the default one working", func(t *testing.T) {
		// The suffix without its namespace names the default install's
		// namespace: refused, nothing removed.
		if _, err := RunE(nil, pinniped, "uninstall", "--api-group-suffix="+suffix); err == nil || !strings.Contains(err.Error(), "nothing was removed") {
			t.Fatalf("uninstall with the default namespace and the other suffix: %v", err)
		}
		if out, err := uninstallSuffixed(); err != nil {
			t.Fatalf("uninstall: %v\n%s", err, out)
		}
		Eventually(t, 2*time.Minute, "no object of the suffixed install left", func(context.Context) error {
			left, err := RunE(nil, "kubectl", "get", "namespaces,clusterroles,clusterrolebindings,apiservices,customresourcedefinitions",
				"-l", suffixLabel, "-o", "name")
			if err != nil {
				return err
			}
			inKubeSystem, err := RunE(nil, "kubectl", "get", "-n", "kube-system", "roles,rolebindings", "-l", suffixLabel, "-o", "name")
			if err != nil {
				return err
			}
			if s := strings.TrimSpace(left + inKubeSystem); s != "" {
				return errors.New("left: " + s)
			}
			return nil
		})
		for _, obj := range []string{
			"apiservice/v1alpha1.login.concierge.pinniped.dev", "apiservice/v1alpha1.identity.concierge.pinniped.dev",
			"crd/jwtauthenticators.authentication.concierge.pinniped.dev", "crd/credentialissuers.config.concierge.pinniped.dev",
			"clusterrole/pinniped-agent", "clusterrolebinding/pinniped-agent", "clusterrole/pinniped-pre-authn-apis",
			"namespace/pinniped",
		} {
			if _, err := RunE(nil, "kubectl", "get", obj); err != nil {
				t.Errorf("the default install lost %s: %v", obj, err)
			}
		}
		for _, obj := range []string{"rolebinding/pinniped-agent-extension-apiserver-authentication-reader", "role/pinniped-agent-find-controller-manager"} {
			if _, err := RunE(nil, "kubectl", "get", "-n", "kube-system", obj); err != nil {
				t.Errorf("the default install lost kube-system %s: %v", obj, err)
			}
		}
		loginAs(t, "default (after the other's uninstall)")
	})
}
