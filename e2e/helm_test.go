//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// helmCLI is the helm the Makefile pins (.ci/tools.sh builds it from the Go
// module proxy once and caches it).
func helmCLI(t *testing.T) string {
	t.Helper()
	out, err := exec.CommandContext(context.Background(), filepath.Join(RepoRoot(t), ".ci", "tools.sh"), "helm").Output() //nolint:gosec // the repository's own script
	if err != nil {
		t.Fatalf(".ci/tools.sh helm: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestHelmInstallUpgradeUninstall: the agent installed with the charts
// works (a user logs in through kubectl), a helm upgrade to another build
// under load fails no request, pinniped install and Helm refuse each
// other's installation, and helm uninstall leaves nothing behind.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	helm := helmCLI(t)
	charts := filepath.Join(RepoRoot(t), "install", "chart")
	cfg := Bed.Config()
	image := AgentImage(t)
	repo, tag, _ := strings.Cut(image, ":")
	KeyringSession(t)
	pinniped := BuildStatic(t, "./cmd/pinniped")

	// An agent that pinniped install manages is not Helm's to take.
	Run(t, nil, pinniped, installArgs(t)...)
	out, err := RunE(nil, helm, "install", "pinniped-crds", filepath.Join(charts, "pinniped-crds"))
	if err == nil || !strings.Contains(err.Error(), "managed by pinniped install, not Helm") {
		t.Fatalf("helm install over pinniped install's CRDs: %v\n%s", err, out)
	}
	Run(t, nil, pinniped, "uninstall")

	values := []string{
		"--set", "image.repository=" + repo, "--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never",
		"--set", "oidc.issuer=" + cfg.DexIssuer(), "--set", "oidc.audience=" + testbed.DexClientID,
		"--set-file", "oidc.caBundle=" + cfg.TestbedCAFile(), "--set", "oidc.usernameClaim=email", "--set", "authenticatorName=dex",
	}
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			_, _ = RunE(nil, helm, "uninstall", "pinniped", "--wait", "--timeout=3m")
			_, _ = RunE(nil, helm, "uninstall", "pinniped-crds", "--wait")
		}
	})
	began := time.Now()
	Run(t, nil, helm, "install", "pinniped-crds", filepath.Join(charts, "pinniped-crds"), "--wait")
	Run(t, nil, helm, append([]string{"install", "pinniped", filepath.Join(charts, "pinniped"), "--wait", "--timeout=4m"}, values...)...)
	t.Logf("helm installed both charts in %s", time.Since(began).Round(100*time.Millisecond))

	env := exchangingUser(t, pinniped)

	// Helm's installation is not pinniped install's to change or remove.
	if _, err := RunE(nil, pinniped, installArgs(t)...); err == nil || !strings.Contains(err.Error(), "belongs to the Helm release \"pinniped\"") {
		t.Fatalf("pinniped install over a Helm release: %v", err)
	}
	if _, err := RunE(nil, pinniped, "uninstall"); err == nil || !strings.Contains(err.Error(), "helm uninstall pinniped") {
		t.Fatalf("pinniped uninstall of a Helm release: %v", err)
	}

	next := AgentImageVersion(t, "v99.0.0-e2e-helm")
	_, nextTag, _ := strings.Cut(next, ":")
	underLoad(t, env, "a helm upgrade to another build", nil, func() {
		began := time.Now()
		Run(t, nil, helm, "upgrade", "pinniped", filepath.Join(charts, "pinniped"), "--reuse-values", "--set", "image.tag="+nextTag, "--wait", "--timeout=4m")
		Run(t, nil, "kubectl", "-n", "pinniped", "rollout", "status", "deployment/pinniped-agent", "--timeout=3m")
		if got := Kubectl(t, "-n", "pinniped", "get", "deployment", "pinniped-agent", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != next {
			t.Fatalf("after helm upgrade the Deployment runs %s, want %s", got, next)
		}
		t.Logf("helm upgrade rolled out %s in %s", next, time.Since(began).Round(100*time.Millisecond))
		time.Sleep(5 * time.Second)
	})

	Run(t, nil, helm, "uninstall", "pinniped", "--wait", "--timeout=3m")
	Run(t, nil, helm, "uninstall", "pinniped-crds", "--wait")
	uninstalled = true
	nothingLeft(t, "helm uninstall")
}
