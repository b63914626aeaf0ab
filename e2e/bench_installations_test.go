//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// installation is a server of the Concierge API (TokenCredentialRequest
// through kube-apiserver's aggregation layer) that a benchmark loads.
type installation struct {
	name       string
	kubeconfig string // "" is the bed's admin kubeconfig
	namespace  string
	suffix     string // API group suffix; "" is pinniped.dev
	// authenticator is a JWTAuthenticator that accepts the bed's Dex ID
	// tokens (audience testbed.DexClientID).
	authenticator string
	// selector picks its server pods and Deployments; "" is all of them in
	// namespace.
	selector string
	// credentialIssuer names its CredentialIssuer, where its impersonation
	// proxy is advertised ("" is pinniped-config).
	credentialIssuer string
	// installedHere: the test installed it (this build) and uninstalls it
	// when it ends.
	installedHere bool
}

// ourInstall is what installAgent installs.
var ourInstall = installation{name: "pinniped (this build)", namespace: "pinniped", authenticator: "dex", selector: "app.kubernetes.io/name=pinniped-agent",
	installedHere: true}

func (in installation) credentialIssuerName() string {
	if in.credentialIssuer == "" {
		return "pinniped-config"
	}
	return in.credentialIssuer
}

const (
	benchSuffix    = "bench.example.net"
	benchNamespace = "pinniped-bench"
)

// benchInstallations are ours (installed by the caller) and the one to
// compare it with. PINNIPED_BENCH_OTHER_NAMESPACE (with _SUFFIX,
// _KUBECONFIG, _AUTHENTICATOR, _SELECTOR, _CREDENTIALISSUER and _NAME) names any
// installation; PINNIPED_BENCH_OTHER_SETUP is a shell command run first,
// with the bed's KUBECONFIG and PINNIPED_BENCH_DEX_ISSUER,
// PINNIPED_BENCH_DEX_CA_FILE and PINNIPED_BENCH_DEX_CLIENT_ID in its
// environment, to install it. Without them the other is a second install
// of this build under another API group suffix, which proves the
// parameters work and shows the run-to-run spread between equals.
func benchInstallations(t *testing.T, pinniped string) []installation {
	t.Helper()
	ours := ourInstall
	env := func(k, def string) string {
		if v := os.Getenv("PINNIPED_BENCH_OTHER_" + k); v != "" {
			return v
		}
		return def
	}
	// Before any setup runs: the baseline is the second installation.
	if os.Getenv("PINNIPED_BENCH_BASELINE") != "" {
		for _, kv := range os.Environ() {
			if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "PINNIPED_BENCH_OTHER_") && v != "" {
				t.Fatalf("PINNIPED_BENCH_BASELINE makes the second installation itself: unset %s (and every PINNIPED_BENCH_OTHER_*) to use it", k)
			}
		}
	}
	if setup := env("SETUP", ""); setup != "" {
		cfg := Bed.Config()
		cmd := exec.CommandContext(context.Background(), "sh", "-c", setup)
		cmd.Env = append(BedEnv(), "PINNIPED_BENCH_DEX_ISSUER="+cfg.DexIssuer(), "PINNIPED_BENCH_DEX_CA_FILE="+cfg.TestbedCAFile(),
			"PINNIPED_BENCH_DEX_CLIENT_ID="+testbed.DexClientID)
		out, err := cmd.CombinedOutput()
		t.Logf("PINNIPED_BENCH_OTHER_SETUP:\n%s", out)
		if err != nil {
			t.Fatalf("PINNIPED_BENCH_OTHER_SETUP failed: %v", err)
		}
	}
	other := installation{name: env("NAME", "other"), kubeconfig: env("KUBECONFIG", ""), namespace: env("NAMESPACE", ""),
		suffix: env("SUFFIX", ""), authenticator: env("AUTHENTICATOR", "dex"), selector: env("SELECTOR", ""),
		credentialIssuer: env("CREDENTIALISSUER", "")}
	if other.namespace == "" {
		if other.kubeconfig != "" || other.suffix != "" || other.selector != "" || other.credentialIssuer != "" {
			t.Fatal("PINNIPED_BENCH_OTHER_NAMESPACE is needed with the other PINNIPED_BENCH_OTHER_* settings")
		}
		args := []string{"--api-group-suffix=" + benchSuffix, "--namespace=" + benchNamespace}
		name := "pinniped (this build), a second install"
		if rev := os.Getenv("PINNIPED_BENCH_BASELINE"); rev != "" {
			// The last --image wins: this build's install, that agent.
			image, commit := baselineAgentImage(t, rev)
			args = append(args, "--image="+image)
			name = "pinniped agent at " + commit[:min(len(commit), 7)]
		}
		// Before the install: one that times out leaves a half install.
		t.Cleanup(func() {
			_, _ = RunE(nil, pinniped, "uninstall", "--namespace="+benchNamespace, "--api-group-suffix="+benchSuffix)
			forgetAPIGroups(t, benchSuffix)
		})
		Run(t, nil, pinniped, installArgs(t, args...)...)
		other = installation{name: name, namespace: benchNamespace, suffix: benchSuffix,
			authenticator: "dex", selector: "app.kubernetes.io/name=pinniped-agent", installedHere: true}
	}
	if err := groupsuffix.Validate(other.suffix); other.suffix != "" && err != nil {
		t.Fatalf("PINNIPED_BENCH_OTHER_SUFFIX: %v", err)
	}
	if other.kubeconfig == "" && groupsuffix.OrDefault(other.suffix) == groupsuffix.OrDefault(ours.suffix) {
		t.Fatalf("the other installation serves the API group suffix %s, as ours on the same cluster does: its rows would measure ours; set PINNIPED_BENCH_OTHER_SUFFIX to its suffix",
			groupsuffix.OrDefault(other.suffix))
	}
	return []installation{ours, other}
}

// baselineAgentImage builds the agent at git revision rev of this
// repository, as this build's is built, and imports it into the bed: the
// second installation then runs that code in the same rounds as this
// build's (PINNIPED_BENCH_BASELINE), a before-and-after in one table.
func baselineAgentImage(t *testing.T, rev string) (image, commit string) {
	t.Helper()
	if FIPSOnly(t) {
		t.Fatal("PINNIPED_BENCH_BASELINE builds an ordinary agent: it would not compare with a FIPS run's")
	}
	root := RepoRoot(t)
	out, err := exec.CommandContext(context.Background(), "git", "-C", root, "rev-parse", "--verify", "--end-of-options", rev+"^{commit}").Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("PINNIPED_BENCH_BASELINE=%s is not a commit of this clone: %v\n%s", rev, err, stderr)
	}
	commit = strings.TrimSpace(string(out))
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	if err := os.Mkdir(tree, 0o700); err != nil {
		t.Fatal(err)
	}
	// The revision's files only (no worktree to clean up afterwards).
	archive := exec.CommandContext(context.Background(), "sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, commit, tree)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("PINNIPED_BENCH_BASELINE=%s: the commit's files: %v\n%s", rev, err, out)
	}
	bin := filepath.Join(dir, "pinniped-agent")
	build := exec.CommandContext(context.Background(), filepath.Join(root, ".ci", "heavy-build.sh"),
		"go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -X main.version="+commit, "-o", bin, "./cmd/pinniped-agent")
	build.Dir = tree
	build.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOFIPS140=") }), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("PINNIPED_BENCH_BASELINE=%s: build its agent: %v\n%s", rev, err, out)
	}
	return importBinary(t, bin, "localhost/pinniped-e2e/pinniped-agent-baseline"), commit
}

func (in installation) kubectlArgs() []string {
	if in.kubeconfig == "" {
		return nil
	}
	return []string{"--kubeconfig=" + in.kubeconfig}
}

// exchangeRequest is a TokenCredentialRequest for token at the
// installation's authenticator: the URL through its cluster's
// kube-apiserver, the body, and TLS settings that trust that server and
// present no client certificate (a login is anonymous).
func (in installation) exchangeRequest(t *testing.T, token string) (url string, body []byte, tlsConfig *tls.Config) {
	t.Helper()
	var cfg *rest.Config
	var err error
	if in.kubeconfig == "" {
		cfg, err = Bed.RESTConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", in.kubeconfig)
	}
	if err != nil {
		t.Fatalf("%s: %v", in.name, err)
	}
	tlsConfig, err = rest.TLSConfigFor(rest.AnonymousClientConfig(cfg))
	if err != nil || tlsConfig == nil {
		t.Fatalf("%s: TLS settings for %s: %v", in.name, cfg.Host, err)
	}
	tlsConfig.MinVersion = tls.VersionTLS12
	body, _ = json.Marshal(map[string]any{
		"apiVersion": groupsuffix.GroupVersion(groupsuffix.Login, in.suffix), "kind": "TokenCredentialRequest",
		"spec": map[string]any{"token": token, "authenticator": map[string]any{
			"apiGroup": groupsuffix.Group(groupsuffix.Authentication, in.suffix), "kind": "JWTAuthenticator", "name": in.authenticator}},
	})
	return strings.TrimSuffix(cfg.Host, "/") + "/apis/" + groupsuffix.GroupVersion(groupsuffix.Login, in.suffix) + "/tokencredentialrequests", body, tlsConfig
}

// deployments are the installation's Deployments, with what setCPULimit
// and cpuLimit need of them.
type deployments struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name      string          `json:"name"`
						Resources json.RawMessage `json:"resources"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	} `json:"items"`
}

func (in installation) deployments(t *testing.T) deployments {
	t.Helper()
	list := append(in.kubectlArgs(), "-n", in.namespace, "get", "deployments", "-o", "json")
	if in.selector != "" {
		list = append(list, "-l", in.selector)
	}
	var deps deployments
	if err := json.Unmarshal([]byte(Kubectl(t, list...)), &deps); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) == 0 {
		t.Fatalf("%s: no Deployment in namespace %s (selector %q)", in.name, in.namespace, in.selector)
	}
	return deps
}

// containerCPULimit is a container's resources' CPU limit ("" for none).
func containerCPULimit(res json.RawMessage) string {
	var r struct {
		Limits map[string]string `json:"limits"`
	}
	_ = json.Unmarshal(res, &r)
	return r.Limits["cpu"]
}

// cpuLimit says what CPU limit the installation's containers run with
// ("none", or the limits, e.g. "100m"): the limit a benchmark row ran
// with, which is what the installation ships until setCPULimit changes it.
func (in installation) cpuLimit(t *testing.T) string {
	t.Helper()
	var limits []string
	for _, d := range in.deployments(t).Items {
		for _, c := range d.Spec.Template.Spec.Containers {
			l := containerCPULimit(c.Resources)
			if l == "" {
				l = "none"
			}
			if !slices.Contains(limits, l) {
				limits = append(limits, l)
			}
		}
	}
	return strings.Join(limits, ",")
}

// setCPULimit gives every container of the installation's Deployments a
// CPU limit ("none": takes away any limit it ships with, as upstream's
// Concierge ships 100m) and waits for the rollout; the old resources come
// back when the test ends, unless the test installed it (it is
// uninstalled then).
func (in installation) setCPULimit(t *testing.T, limit string) {
	t.Helper()
	args := append(in.kubectlArgs(), "-n", in.namespace)
	deps := in.deployments(t)
	var changed []string
	for _, d := range deps.Items {
		var restore, remove []map[string]any
		var names []string
		for i, c := range d.Spec.Template.Spec.Containers {
			res := c.Resources
			if len(res) == 0 {
				res = json.RawMessage("{}")
			}
			// "add" replaces the whole object: requests defaulted from the
			// limit go with it.
			restore = append(restore, map[string]any{"op": "add", "path": fmt.Sprintf("/spec/template/spec/containers/%d/resources", i), "value": res})
			names = append(names, c.Name)
			if containerCPULimit(c.Resources) != "" {
				remove = append(remove, map[string]any{"op": "remove", "path": fmt.Sprintf("/spec/template/spec/containers/%d/resources/limits/cpu", i)})
			}
		}
		if limit == "none" && len(remove) == 0 {
			continue // nothing to take away
		}
		patch, _ := json.Marshal(restore)
		name := d.Metadata.Name
		changed = append(changed, name)
		t.Cleanup(func() {
			if in.installedHere {
				return
			}
			if _, err := RunE(nil, "kubectl", append(append([]string{}, args...), "patch", "deployment", name, "--type=json", "-p", string(patch))...); err != nil {
				t.Errorf("%s: put back deployment/%s's resources: %v", in.name, name, err)
				return
			}
			if _, err := RunE(nil, "kubectl", append(append([]string{}, args...), "rollout", "status", "deployment", name, "--timeout=3m")...); err != nil {
				t.Errorf("%s: deployment/%s after its resources were put back: %v", in.name, name, err)
			}
		})
		if limit == "none" {
			p, _ := json.Marshal(remove)
			Kubectl(t, append(append([]string{}, args...), "patch", "deployment", name, "--type=json", "-p", string(p))...)
			continue
		}
		// Only the containers the restore covers (not init containers).
		Kubectl(t, append(append([]string{}, args...), "set", "resources", "deployment", name, "--containers="+strings.Join(names, ","), "--limits=cpu="+limit)...)
	}
	for _, name := range changed {
		Kubectl(t, append(append([]string{}, args...), "rollout", "status", "deployment", name, "--timeout=3m")...)
	}
	if len(changed) > 0 {
		time.Sleep(6 * time.Second) // the old pods' drain
	}
}

// limitLabel is a row's CPU limit as the installation ran it: "none
// (shipped 100m)" where the benchmark took away the limit it ships with.
func limitLabel(ran, shipped string) string {
	if ran == "none" && shipped != "none" && shipped != "" {
		return "none (shipped " + shipped + ")"
	}
	return ran
}

// forgetAPIGroups waits until no CRD of an uninstalled suffix is left and
// empties kubectl's discovery cache (KUBECACHEDIR, this run's): it still
// lists the suffix's groups, and later tests' short names such as
// "credentialissuer" would resolve to a group that is gone.
func forgetAPIGroups(t *testing.T, suffix string) {
	t.Helper()
	Eventually(t, 2*time.Minute, "the CRDs of API group suffix "+suffix+" are deleted", func(context.Context) error {
		out, err := RunE(nil, "kubectl", "get", "customresourcedefinitions", "-o", "name")
		if err != nil {
			return err
		}
		for _, name := range strings.Fields(out) {
			if strings.HasSuffix(name, "."+suffix) {
				return fmt.Errorf("%s is still there", name)
			}
		}
		return nil
	})
	dir := os.Getenv("KUBECACHEDIR")
	if dir == "" {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Errorf("kubectl's cache %s: %v", dir, err)
		return
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Errorf("empty kubectl's cache: %v", err)
		}
	}
}
