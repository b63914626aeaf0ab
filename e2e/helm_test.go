//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
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

// TestHelm: the agent's charts on the bed, as docs/helm.md tells an
// administrator to use them: install, a user logs in, pinniped install
// and uninstall refuse Helm's release, helm upgrade to another build under
// load fails no request, helm uninstall leaves nothing behind; and the
// charts refuse an agent that pinniped install manages.
func TestHelm(t *testing.T) {
	helm := helmCLI(t)
	charts := filepath.Join(RepoRoot(t), "install", "chart")
	cfg := Bed.Config()
	repo, tag, _ := strings.Cut(AgentImage(t), ":")
	KeyringSession(t)
	pinniped := BuildStatic(t, "./cmd/pinniped")
	values := []string{
		"--set", "image.repository=" + repo, "--set-string", "image.tag=" + tag, "--set", "image.pullPolicy=Never",
		"--set", "oidc.issuer=" + cfg.DexIssuer(), "--set", "oidc.audience=" + testbed.DexClientID,
		"--set-file", "oidc.caBundle=" + cfg.TestbedCAFile(), "--set", "oidc.usernameClaim=email", "--set", "authenticatorName=dex",
	}
	// install installs both charts, the CRDs first;
	// uninstall removes both, the agent first. A test that stops half-way
	// leaves nothing for the next.
	install := func(t *testing.T) {
		t.Helper()
		t.Cleanup(func() {
			_, _ = RunE(nil, helm, "uninstall", "pinniped", "--ignore-not-found", "--wait", "--timeout=3m")
			_, _ = RunE(nil, helm, "uninstall", "pinniped-crds", "--ignore-not-found", "--wait")
		})
		began := time.Now()
		Run(t, nil, helm, "install", "pinniped-crds", filepath.Join(charts, "pinniped-crds"), "--wait")
		Run(t, nil, helm, append([]string{"install", "pinniped", filepath.Join(charts, "pinniped"), "--wait", "--timeout=4m"}, values...)...)
		t.Logf("helm installed both charts in %s", time.Since(began).Round(100*time.Millisecond))
	}
	uninstall := func(t *testing.T) {
		t.Helper()
		Run(t, nil, helm, "uninstall", "pinniped", "--wait", "--timeout=3m")
		Run(t, nil, helm, "uninstall", "pinniped-crds", "--wait")
		nothingLeft(t, "helm uninstall")
	}

	t.Run("install, log in, upgrade under load, uninstall", func(t *testing.T) {
		install(t)
		env := exchangingUser(t, pinniped)

		// Helm's installation is not pinniped install's to change or remove.
		if _, err := RunE(nil, pinniped, installArgs(t)...); err == nil || !strings.Contains(err.Error(), `belongs to the Helm release "pinniped"`) {
			t.Fatalf("pinniped install over a Helm release: %v", err)
		}
		if _, err := RunE(nil, pinniped, "uninstall"); err == nil || !strings.Contains(err.Error(), "helm uninstall pinniped") {
			t.Fatalf("pinniped uninstall of a Helm release: %v", err)
		}

		next := AgentImageVersion(t, "v99.0.0-e2e-helm")
		_, nextTag, _ := strings.Cut(next, ":")
		underRollout(t, env, "a helm upgrade to another build", func() {
			began := time.Now()
			Run(t, nil, helm, "upgrade", "pinniped", filepath.Join(charts, "pinniped"), "--reuse-values", "--set-string", "image.tag="+nextTag, "--wait", "--timeout=4m")
			Run(t, nil, "kubectl", "-n", "pinniped", "rollout", "status", "deployment/pinniped-agent", "--timeout=3m")
			if got := Kubectl(t, "-n", "pinniped", "get", "deployment", "pinniped-agent", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != next {
				t.Fatalf("after helm upgrade the Deployment runs %s, want %s", got, next)
			}
			t.Logf("helm upgrade rolled out %s in %s", next, time.Since(began).Round(100*time.Millisecond))
			time.Sleep(5 * time.Second)
		})
		if cfg.Profile == testbed.ProfileKubeadm {
			helmHelperPodSettings(t, helm, filepath.Join(charts, "pinniped"))
		}
		uninstall(t)
	})

	// An agent that pinniped install manages is not Helm's to take: the
	// charts refuse it, say how to move, and change nothing.
	t.Run("Helm refuses pinniped install's agent", func(t *testing.T) {
		Run(t, nil, pinniped, installArgs(t)...)
		t.Cleanup(func() { _, _ = RunE(nil, pinniped, "uninstall") })
		for _, chart := range []string{"pinniped-crds", "pinniped"} {
			args := []string{"install", chart, filepath.Join(charts, chart)}
			if chart == "pinniped" {
				args = append(args, values...)
			}
			out, err := RunE(nil, helm, args...)
			if err == nil || !strings.Contains(err.Error(), "managed by pinniped install, not Helm") || !strings.Contains(err.Error(), "docs/helm.md") {
				t.Fatalf("helm install %s over pinniped install's: %v\n%s", chart, err, out)
			}
		}
		if out, err := RunE(nil, helm, "list", "-q"); err != nil || strings.TrimSpace(out) != "" {
			t.Fatalf("refused installs left releases: %q %v", out, err)
		}
		if got := Kubectl(t, "-n", "pinniped", "get", "deployment", "pinniped-agent", "-o", "jsonpath={.metadata.labels.app\\.kubernetes\\.io/managed-by}"); got != "pinniped-install" {
			t.Fatalf("the refused install changed the agent: managed-by %q", got)
		}
	})
}

// helmHelperPodSettings: the helper pod's user, group and Deployment
// strategy are the chart's to set. As a user that does not own kubeadm's
// root-owned key the helper cannot read it, and the signing-key strategy
// says so (logins go on through the CSR API meanwhile); back as root it
// reads the key again. The helper's Deployment takes each strategy, also
// the switch from Recreate back to RollingUpdate.
func helmHelperPodSettings(t *testing.T, helm, chart string) {
	t.Helper()
	upgrade := func(set ...string) {
		t.Helper()
		Run(t, nil, helm, append([]string{"upgrade", "pinniped", chart, "--reuse-values", "--wait", "--timeout=4m"}, set...)...)
		Run(t, nil, "kubectl", "-n", "pinniped", "rollout", "status", "deployment/pinniped-agent", "--timeout=3m")
	}
	helper := func(want string) {
		t.Helper()
		Eventually(t, 3*time.Minute, "the helper's Deployment: "+want, func(context.Context) error {
			out, err := RunE(nil, "kubectl", "-n", "pinniped", "get", "deployment", "pinniped-kube-cert-agent", "-o",
				`jsonpath={.spec.strategy.type} {.spec.template.spec.containers[0].securityContext.runAsUser}:{.spec.template.spec.containers[0].securityContext.runAsGroup}`)
			if err != nil {
				return err
			}
			if out != want {
				return fmt.Errorf("%q", out)
			}
			return nil
		})
	}
	signingKey := func(want, message string) {
		t.Helper()
		Eventually(t, 4*time.Minute, "the signing-key strategy: "+want+" "+message, func(context.Context) error {
			out, _ := RunE(nil, "kubectl", "get", "credentialissuers.config.concierge.pinniped.dev", "-o",
				`jsonpath={range .items[0].status.strategies[*]}{.type}={.status}: {.message}{"\n"}{end}`)
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "KubeClusterSigningCertificate="+want+":") && strings.Contains(line, message) {
					return nil
				}
			}
			return errors.New(out)
		})
	}

	upgrade("--set", "kubeCertAgentRunAsUser=65532", "--set", "kubeCertAgentRunAsGroup=65533", "--set", "kubeCertAgentDeploymentStrategy=Recreate")
	helper("Recreate 65532:65533")
	signingKey("Error", "permission denied")

	upgrade("--set", "kubeCertAgentRunAsUser=0", "--set", "kubeCertAgentRunAsGroup=0", "--set", "kubeCertAgentDeploymentStrategy=")
	helper("RollingUpdate 0:0")
	signingKey("Success", "")
}
