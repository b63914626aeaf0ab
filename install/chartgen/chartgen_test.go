package chartgen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/commands/install"
	"github.com/pinniped-kit/pinniped/install/chartgen"
	"github.com/pinniped-kit/pinniped/install/render"
)

// chartDir is the charts' directory in the repository.
const chartDir = "../chart"

// TestGeneratedFilesAreCurrent: the templates in the repository are what
// the generator makes of today's objects (`make generate` rewrites them).
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := chartgen.Generate()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, f := range files {
		want[f.Path] = true
		got, err := os.ReadFile(filepath.Join(chartDir, f.Path))
		if err != nil || !bytes.Equal(got, f.Data) {
			t.Errorf("%s is stale (%v): run make generate", f.Path, err)
		}
	}
	for _, chart := range []string{chartgen.CRDChart, chartgen.AgentChart} {
		entries, err := os.ReadDir(filepath.Join(chartDir, chart, "templates"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if p := filepath.Join(chart, "templates", e.Name()); !want[p] {
				t.Errorf("%s is not generated: the generator removes it (put hand-written parts in the generator)", p)
			}
		}
	}
}

// helmBinary is the helm CLI the Makefile builds (.ci/tools.sh helm).
func helmBinary(t *testing.T) string {
	t.Helper()
	h := os.Getenv("PINNIPED_HELM")
	if h == "" {
		t.Skip("PINNIPED_HELM names no helm binary; make check runs this test with one")
	}
	return h
}

const version = "1.2.3"

// TestHelmTemplateEqualsInstall: for each setting, `helm template` of both
// charts with the values that match `pinniped install`'s flags renders the
// objects `pinniped install -o yaml` renders, but for the managed-by label,
// which Helm owns.
func TestHelmTemplateEqualsInstall(t *testing.T) {
	helm := helmBinary(t)
	dir := t.TempDir()
	for _, chart := range []string{chartgen.CRDChart, chartgen.AgentChart} {
		run(t, helm, "package", filepath.Join(chartDir, chart), "--version", version, "--app-version", version, "-d", dir)
	}
	caPEM := "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n"
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, []byte(caPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	longSuffix := strings.Repeat("very-long-suffix.", 4) + "example.com"
	for _, tc := range []struct {
		name      string
		flags     []string
		namespace string
		values    map[string]any
	}{
		{name: "defaults"},
		{
			name: "oidc",
			flags: []string{"--oidc-issuer=https://dex.example.com/dex", "--oidc-audience=prod-7f3a", "--oidc-ca-bundle=" + caFile,
				"--oidc-username-claim=email", "--oidc-groups-claim=grp", "--authenticator-name=dex"},
			values: map[string]any{"authenticatorName": "dex", "oidc": map[string]any{"issuer": "https://dex.example.com/dex", "audience": "prod-7f3a",
				"caBundle": caPEM, "usernameClaim": "email", "groupsClaim": "grp"}},
		},
		{
			name:   "oidc with default claims",
			flags:  []string{"--oidc-issuer=https://dex.example.com", "--oidc-audience=a"},
			values: map[string]any{"oidc": map[string]any{"issuer": "https://dex.example.com", "audience": "a"}},
		},
		{
			name:   "webhook",
			flags:  []string{"--webhook-endpoint=https://authn.example.com/review", "--webhook-ca-bundle=" + caFile},
			values: map[string]any{"webhook": map[string]any{"endpoint": "https://authn.example.com/review", "caBundle": caPEM}},
		},
		{
			name: "agent settings",
			flags: []string{"--kube-cert-agent=false", "--replicas=3", "--credential-ttl=1h", "--proxy-credential=certificate", "--proxy-audit=changes",
				"--image-pull-policy=Always", "--image=registry.example.com/mirror/pinniped-agent@" + digest},
			values: map[string]any{"kubeCertAgent": false, "replicas": 3, "credentialTTL": "1h", "proxyCredential": "certificate", "proxyAudit": "changes",
				"image": map[string]any{"repository": "registry.example.com/mirror/pinniped-agent", "digest": digest, "pullPolicy": "Always"}},
		},
		{
			name: "helper pod",
			flags: []string{"--kube-cert-agent-run-as-user=1000000", "--kube-cert-agent-run-as-group=65534",
				"--kube-cert-agent-deployment-strategy=Recreate"},
			values: map[string]any{"kubeCertAgentRunAsUser": 1000000, "kubeCertAgentRunAsGroup": 65534, "kubeCertAgentDeploymentStrategy": "Recreate"},
		},
		{
			name:      "suffix and namespace",
			flags:     []string{"--api-group-suffix=example.com", "--namespace=pinniped-example"},
			namespace: "pinniped-example",
			values:    map[string]any{"apiGroupSuffix": "example.com"},
		},
		{
			name:      "a suffix longer than a label",
			flags:     []string{"--api-group-suffix=" + longSuffix, "--namespace=pinniped-long"},
			namespace: "pinniped-long",
			values:    map[string]any{"apiGroupSuffix": longSuffix},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := installObjects(t, tc.flags)
			if tc.namespace != "" {
				tc.values["namespace"] = tc.namespace // values are made per case
			}
			valuesFile := filepath.Join(t.TempDir(), "values.json")
			raw, _ := json.Marshal(tc.values)
			if err := os.WriteFile(valuesFile, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			crdValues := map[string]any{}
			if s, ok := tc.values["apiGroupSuffix"]; ok {
				crdValues["apiGroupSuffix"] = s
			}
			crdFile := filepath.Join(t.TempDir(), "crd-values.json")
			raw, _ = json.Marshal(crdValues)
			if err := os.WriteFile(crdFile, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			out := run(t, helm, "template", "pinniped-crds", filepath.Join(dir, chartgen.CRDChart+"-"+version+".tgz"), "-f", crdFile)
			out += run(t, helm, "template", "pinniped", filepath.Join(dir, chartgen.AgentChart+"-"+version+".tgz"), "-f", valuesFile)
			got := decode(t, out)
			compare(t, got, want)
		})
	}
}

// TestChartRefusesBadValues: the schema and the chart's checks turn away
// what `pinniped install` refuses, before anything reaches a cluster; the
// same command with good values renders.
func TestChartRefusesBadValues(t *testing.T) {
	helm := helmBinary(t)
	run(t, helm, "template", "pinniped", filepath.Join(chartDir, chartgen.AgentChart), "--set", "credentialTTL=1h30m",
		"--set", "oidc.issuer=https://dex.example.com", "--set", "oidc.audience=a")
	for name, set := range map[string][]string{
		"two authenticators":  {"oidc.issuer=https://dex", "oidc.audience=a", "webhook.endpoint=https://hook"},
		"issuer over http":    {"oidc.issuer=http://dex", "oidc.audience=a"},
		"no audience":         {"oidc.issuer=https://dex"},
		"audience alone":      {"oidc.audience=a"},
		"unknown pull policy": {"image.pullPolicy=Sometimes"},
		"no replicas":         {"replicas=0"},
		"kube-system":         {"namespace=kube-system"},
		"bad suffix":          {"apiGroupSuffix=Not_A_Domain"},
		"unknown value":       {"replica=3"},
		"proxy mode":          {"impersonationProxy.mode=sometimes"},
		"bad ttl":             {"credentialTTL=1 hour"},
		"ttl too short":       {"credentialTTL=30s"},
		"ttl too long":        {"credentialTTL=48h"},
		"issuer without host": {"oidc.issuer=https:///dex", "oidc.audience=a"},
		"helper user < 0":     {"kubeCertAgentRunAsUser=-1"},
		"helper group > max":  {"kubeCertAgentRunAsGroup=2147483648"},
		"helper user as text": {"kubeCertAgentRunAsUser=root"},
		"helper strategy":     {"kubeCertAgentDeploymentStrategy=recreate"},
		"helper turned off":   {"kubeCertAgent=false", "kubeCertAgentDeploymentStrategy=Recreate"},
	} {
		args := []string{"template", "pinniped", filepath.Join(chartDir, chartgen.AgentChart), "-n", "pinniped"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		cmd := exec.Command(helm, args...) //nolint:gosec // the helm the Makefile built
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Run(); err == nil {
			t.Errorf("%s: helm template accepted %v", name, set)
		} else if !errors.As(err, new(*exec.ExitError)) {
			t.Fatal(err)
		}
	}
}

// installObjects is `pinniped install -o yaml` with flags, by a CLI of
// version.
func installObjects(t *testing.T, flags []string) map[string]map[string]any {
	t.Helper()
	var out, errOut bytes.Buffer
	f := cmdutil.Test(nil, &out, &errOut, nil)
	f.Version.Version = version
	cmd := install.NewCmdInstall(f, nil)
	cmd.SetArgs(append(append([]string{}, flags...), "-o", "yaml"))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("pinniped install %v: %v\n%s", flags, err, errOut.String())
	}
	return decode(t, out.String())
}

// decode reads a YAML stream into objects keyed kind/namespace/name, with
// the managed-by label, which Helm sets to itself, removed.
func decode(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	for {
		var o map[string]any
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%v\n%s", err, stream)
		}
		if o == nil {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		dropManagedBy(o)
		// JSON's view: numbers of both sides compare alike.
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var norm map[string]any
		if err := json.Unmarshal(raw, &norm); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%v/%v/%v", o["kind"], meta["namespace"], meta["name"])
		if _, dup := objs[key]; dup {
			t.Fatalf("%s twice", key)
		}
		objs[key] = norm
	}
	return objs
}

// dropManagedBy removes the managed-by label wherever labels are.
func dropManagedBy(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if labels, ok := child.(map[string]any); ok && k == "labels" {
				delete(labels, "app.kubernetes.io/managed-by")
			}
			dropManagedBy(child)
		}
	case []any:
		for _, child := range v {
			dropManagedBy(child)
		}
	}
}

func compare(t *testing.T, got, want map[string]map[string]any) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		g, inChart := got[k]
		w, inInstall := want[k]
		switch {
		case !inChart:
			t.Errorf("%s: rendered by pinniped install, not by the charts", k)
		case !inInstall:
			t.Errorf("%s: rendered by the charts, not by pinniped install", k)
		default:
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("%s differs (-pinniped install -o yaml +helm template):\n%s", k, diff)
			}
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(name, args...) //nolint:gosec // the helm the Makefile built
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, errOut.String())
	}
	return out.String()
}

// TestEveryConfigFieldHasAValue: each setting of `pinniped install` has a
// value in the charts. A new field of render.Config fails here until the
// generator gives it one (a sentinel, a variant or a hole) and this list
// says which.
func TestEveryConfigFieldHasAValue(t *testing.T) {
	values := map[string]string{
		"Namespace": "namespace", "Image": "image.repository, image.tag, image.digest", "ImagePullPolicy": "image.pullPolicy",
		"Replicas": "replicas", "Version": "the chart's appVersion", "OIDCIssuer": "oidc.issuer", "OIDCAudience": "oidc.audience",
		"OIDCCABundle": "oidc.caBundle", "WebhookEndpoint": "webhook.endpoint", "WebhookCABundle": "webhook.caBundle",
		"AuthenticatorName": "authenticatorName", "UsernameClaim": "oidc.usernameClaim", "GroupsClaim": "oidc.groupsClaim",
		"CPURequest": "resources", "MemoryRequest": "resources", "MemoryLimit": "resources", "CredentialTTL": "credentialTTL",
		"ProxyCredential": "proxyCredential", "ProxyAudit": "proxyAudit", "NoKubeCertAgent": "kubeCertAgent", "GroupSuffix": "apiGroupSuffix",
		"KubeCertAgentPod": "kubeCertAgentRunAsUser, kubeCertAgentRunAsGroup, kubeCertAgentDeploymentStrategy",
	}
	typ := reflect.TypeFor[render.Config]()
	for i := range typ.NumField() {
		if name := typ.Field(i).Name; values[name] == "" {
			t.Errorf("render.Config.%s has no value in the charts: give it one in install/chartgen and values.yaml, and name it here", name)
		}
	}
}
