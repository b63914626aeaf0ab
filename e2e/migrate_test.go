//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestMigrateFromUpstream follows docs/migrating-from-upstream.md on a
// cluster where upstream's Concierge left its API groups, CRDs and a
// JWTAuthenticator (its workload cannot be built here, so only its objects
// stand in for it: what install must notice and the page must clean up).
func TestMigrateFromUpstream(t *testing.T) {
	KeyringSession(t)
	pinniped := BuildStatic(t, "./cmd/pinniped")
	cfg := Bed.Config()
	ca, err := os.ReadFile(cfg.TestbedCAFile())
	if err != nil {
		t.Fatal(err)
	}
	crds, _ := filepath.Glob(filepath.Join(RepoRoot(t), "install", "crds", "*.yaml"))
	for _, f := range crds {
		Kubectl(t, "apply", "-f", f)
	}
	upstream := `apiVersion: v1
kind: Namespace
metadata: {name: pinniped-concierge}
`
	for _, group := range []string{"login", "identity"} {
		upstream += fmt.Sprintf(`---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1alpha1.%s.concierge.pinniped.dev, labels: {app: pinniped-concierge}}
spec:
  group: %s.concierge.pinniped.dev
  version: v1alpha1
  groupPriorityMinimum: 9900
  versionPriority: 15
  service: {name: pinniped-concierge-api, namespace: pinniped-concierge, port: 443}
`, group, group)
	}
	upstream += fmt.Sprintf(`---
apiVersion: authentication.concierge.pinniped.dev/v1alpha1
kind: JWTAuthenticator
metadata: {name: dex}
spec:
  issuer: %s
  audience: %s
  claims: {username: email}
  tls: {certificateAuthorityData: %s}
`, cfg.DexIssuer(), testbed.DexClientID, base64.StdEncoding.EncodeToString(ca))
	applyYAML(t, upstream)
	t.Cleanup(func() {
		_, _ = RunE(nil, "kubectl", "delete", "apiservice", "v1alpha1.login.concierge.pinniped.dev", "v1alpha1.identity.concierge.pinniped.dev", "--ignore-not-found")
		_, _ = RunE(nil, "kubectl", "delete", "namespace", "pinniped-concierge", "--ignore-not-found", "--wait=false")
	})

	install := []string{"install", "--image=" + AgentImage(t), "--image-pull-policy=Never", "--timeout=4m"}
	t.Run("install stops and says what to do", func(t *testing.T) {
		_, err := RunE(nil, pinniped, install...)
		if err == nil || !strings.Contains(err.Error(), "pinniped-concierge/pinniped-concierge-api") || !strings.Contains(err.Error(), "docs/migrating-from-upstream.md") {
			t.Fatalf("want a refusal naming the Concierge and the page, got %v", err)
		}
		if svc := Kubectl(t, "get", "apiservice", "v1alpha1.login.concierge.pinniped.dev", "-o", "jsonpath={.spec.service.namespace}"); svc != "pinniped-concierge" {
			t.Fatalf("the Concierge's APIService was changed: %q", svc)
		}
	})

	t.Run("the page's steps", func(t *testing.T) {
		dir := t.TempDir()
		saved := filepath.Join(dir, "authenticators.yaml")
		// 1. Keep your authenticators (the page's command, as written).
		Run(t, nil, "sh", "-c", `kubectl get jwtauthenticators,webhookauthenticators -o yaml \
  | sed -e '/^    resourceVersion:/d' -e '/^    uid:/d' > `+saved)
		// 2. Uninstall the Concierge, by hand.
		Kubectl(t, "delete", "apiservice", "v1alpha1.login.concierge.pinniped.dev", "v1alpha1.identity.concierge.pinniped.dev")
		Kubectl(t, "delete", "namespace", "pinniped-concierge")
		Kubectl(t, "delete", "crd", "jwtauthenticators.authentication.concierge.pinniped.dev",
			"webhookauthenticators.authentication.concierge.pinniped.dev", "credentialissuers.config.concierge.pinniped.dev")
		// 3. Install the agent.
		Run(t, nil, pinniped, install...)
		t.Cleanup(func() { _, _ = RunE(nil, pinniped, "uninstall") })
		// 4. Put the authenticators back.
		Kubectl(t, "apply", "-f", saved)
		waitPhase(t, "jwtauthenticator", "dex", "Ready")
		// 5. Users: a kubeconfig made now logs alice in.
		if _, err := RunE(nil, "kubectl", "get", "clusterrolebinding", "e2e-migrate-view"); err != nil {
			Kubectl(t, "create", "clusterrolebinding", "e2e-migrate-view", "--clusterrole=view", "--group=developers")
			t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "clusterrolebinding", "e2e-migrate-view") })
		}
		kc := filepath.Join(dir, "user.kubeconfig")
		if err := os.WriteFile(kc, []byte(Run(t, nil, pinniped, "get", "kubeconfig", "--oidc-flow=password")), 0o600); err != nil {
			t.Fatal(err)
		}
		alice := testbed.DexUsers[0]
		Eventually(t, time.Minute, "alice logs in after the migration", func(context.Context) error {
			who, stderr, err := whoami(t, []string{"KUBECONFIG=" + kc, "XDG_CONFIG_HOME=" + dir,
				"PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password})
			if err != nil || who != alice.Email {
				return errors.New(who + " " + stderr)
			}
			return nil
		})
	})
}
