package install

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
)

func runInstall(t *testing.T, args ...string) (*Options, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := cmdutil.Test(nil, &out, &errOut, nil)
	f.Version.Version = "v1.2.3"
	var got *Options
	cmd := NewCmdInstall(f, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(context.Background())
	return got, errOut.String(), err
}

func TestInstallFlags(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _, err := runInstall(t, "--oidc-issuer=https://dex.example.com", "--oidc-audience=prod-7f3a", "--oidc-ca-bundle="+ca,
		"-n", "auth", "--kube-cert-agent=false", "--replicas=3")
	if err != nil {
		t.Fatal(err)
	}
	r := o.Render
	if r.Namespace != "auth" || r.Image != DefaultImageRepository+":1.2.3" || r.OIDCIssuer != "https://dex.example.com" ||
		r.OIDCAudience != "prod-7f3a" || len(r.OIDCCABundle) == 0 || !r.NoKubeCertAgent || r.Replicas != 3 {
		t.Fatalf("rendered config %+v", r)
	}
	for args, want := range map[string][]string{
		"http issuer":         {"--oidc-issuer=http://dex", "--oidc-audience=a"},
		"no audience":         {"--oidc-issuer=https://dex"},
		"two authenticators":  {"--oidc-issuer=https://dex", "--oidc-audience=a", "--webhook-endpoint=https://hook"},
		"bad dry run":         {"--dry-run=maybe"},
		"bad output":          {"-o=xml"},
		"zero timeout":        {"--timeout=0"},
		"missing CA file":     {"--oidc-issuer=https://dex", "--oidc-audience=a", "--oidc-ca-bundle=/nonexistent"},
		"CA file without PEM": {"--webhook-endpoint=https://hook", "--webhook-ca-bundle=" + notPEM},
		"unknown pull policy": {"--image-pull-policy=Sometimes"},
		"positional argument": {"extra"},
	} {
		if o, _, err := runInstall(t, want...); err == nil || o != nil {
			t.Errorf("%s: accepted", args)
		}
	}
}

// TestInstallPrintsManifests: -o yaml renders without a cluster, for
// GitOps; nothing is applied.
func TestInstallPrintsManifests(t *testing.T) {
	var out, errOut bytes.Buffer
	f := cmdutil.Test(nil, &out, &errOut, nil)
	f.Version.Version = "v1.2.3"
	cmd := NewCmdInstall(f, nil)
	cmd.SetArgs([]string{"--oidc-issuer=https://dex.example.com", "--oidc-audience=prod", "-o", "yaml"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: JWTAuthenticator", "issuer: https://dex.example.com", "image: " + DefaultImageRepository + ":1.2.3", "Apply with: kubectl apply --server-side"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q", want)
		}
	}
}

// TestUninstall removes what carries the part-of label, and nothing else.
func TestUninstall(t *testing.T) {
	mine := &unstructured.Unstructured{}
	mine.SetAPIVersion("v1")
	mine.SetKind("Secret")
	mine.SetNamespace("pinniped")
	mine.SetName("pinniped-agent-api-tls")
	mine.SetLabels(map[string]string{"app.kubernetes.io/part-of": "pinniped"})
	theirs := mine.DeepCopy()
	theirs.SetName("someone-elses")
	theirs.SetLabels(nil)
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	lists := map[schema.GroupVersionResource]string{}
	for _, r := range []struct{ g, v, res, kind string }{
		{"authentication.concierge.pinniped.dev", "v1alpha1", "jwtauthenticators", "JWTAuthenticatorList"},
		{"authentication.concierge.pinniped.dev", "v1alpha1", "webhookauthenticators", "WebhookAuthenticatorList"},
		{"config.concierge.pinniped.dev", "v1alpha1", "credentialissuers", "CredentialIssuerList"},
		{"apiregistration.k8s.io", "v1", "apiservices", "APIServiceList"},
		{"apps", "v1", "deployments", "DeploymentList"},
		{"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudgetList"},
		{"", "v1", "pods", "PodList"}, {"", "v1", "services", "ServiceList"}, {"", "v1", "secrets", "SecretList"},
		{"certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequestList"},
		{"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBindingList"}, {"rbac.authorization.k8s.io", "v1", "roles", "RoleList"},
		{"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBindingList"}, {"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRoleList"},
		{"", "v1", "serviceaccounts", "ServiceAccountList"}, {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinitionList"},
		{"", "v1", "namespaces", "NamespaceList"}, {"coordination.k8s.io", "v1", "leases", "LeaseList"},
	} {
		lists[schema.GroupVersionResource{Group: r.g, Version: r.v, Resource: r.res}] = r.kind
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, mine, theirs)
	var out, errOut bytes.Buffer
	f := cmdutil.Test(nil, &out, &errOut, nil)
	f.Dynamic = func(clientcmd.ClientConfig) (dynamic.Interface, *rest.Config, error) {
		return dyn, &rest.Config{Host: "https://cluster"}, nil
	}
	cmd := NewCmdUninstall(f, nil)
	cmd.SetArgs(nil)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	left, _ := dyn.Resource(secrets).Namespace("pinniped").List(context.Background(), metav1.ListOptions{})
	if len(left.Items) != 1 || left.Items[0].GetName() != "someone-elses" {
		t.Fatalf("left %v", left.Items)
	}
	if !strings.Contains(errOut.String(), "Removing pinniped from https://cluster (namespace pinniped)") {
		t.Fatalf("said %q", errOut.String())
	}
}

// TestInstallWithSuffix: --api-group-suffix reaches the rendered manifests
// (groups and the agent's flag); a suffix that is not a dotted DNS name
// is refused before anything is rendered, and so is one for uninstall.
func TestInstallWithSuffix(t *testing.T) {
	var out, errOut bytes.Buffer
	f := cmdutil.Test(nil, &out, &errOut, nil)
	f.Version.Version = "v1.2.3"
	cmd := NewCmdInstall(f, nil)
	cmd.SetArgs([]string{"--api-group-suffix=example.com", "-n", "pinniped-example", "-o", "yaml"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: v1alpha1.login.concierge.example.com", "apiVersion: config.concierge.example.com/v1alpha1",
		"- --api-group-suffix=example.com", "name: pinniped-agent-example.com"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "concierge.pinniped.dev") {
		t.Error("a default group is still rendered")
	}
	if o, _, err := runInstall(t, "--api-group-suffix=nodot"); err == nil || o != nil || !strings.Contains(err.Error(), "--api-group-suffix") {
		t.Errorf("install with a dotless suffix: %v", err)
	}
	un := NewCmdUninstall(cmdutil.Test(nil, &out, &errOut, nil), func(context.Context, *UninstallOptions) error { return nil })
	un.SetArgs([]string{"--api-group-suffix=Not_DNS.io"})
	un.SetOut(&out)
	un.SetErr(&errOut)
	if err := un.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "--api-group-suffix") {
		t.Errorf("uninstall with a bad suffix: %v", err)
	}
}

// TestInstallCredentialTTL: --credential-ttl reaches the agent's args in
// the rendered Deployment; without it the agent gets no such flag (its own
// default holds). A value the agent would refuse, or one that is not a
// duration, is refused while the flags are parsed: nothing is rendered, so
// nothing can be applied.
func TestInstallCredentialTTL(t *testing.T) {
	render := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		f := cmdutil.Test(nil, &out, &errOut, nil)
		f.Version.Version = "v1.2.3"
		cmd := NewCmdInstall(f, nil)
		cmd.SetArgs(append(args, "-o", "yaml"))
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%v\n%s", err, errOut.String())
		}
		return out.String()
	}
	if got := render("--credential-ttl=90m"); !strings.Contains(got, "\n        - --credential-ttl=1h30m\n") {
		t.Errorf("--credential-ttl=90m is not among the agent's args:\n%s", got)
	}
	if got := render(); strings.Contains(got, "--credential-ttl") {
		t.Error("the agent gets --credential-ttl though none was given")
	}
	for value, want := range map[string]string{
		"abc":  "write a number with a unit",
		"5":    "write a number with a unit",
		"0":    "shorter than the minimum",
		"59s":  "shorter than the minimum",
		"-10m": "shorter than the minimum",
		"25h":  "longer than the maximum",
	} {
		o, _, err := runInstall(t, "--credential-ttl="+value)
		if err == nil || o != nil {
			t.Errorf("--credential-ttl=%s: accepted", value)
			continue
		}
		if !strings.Contains(err.Error(), "--credential-ttl") || !strings.Contains(err.Error(), want) {
			t.Errorf("--credential-ttl=%s: %v, want %q", value, err, want)
		}
	}
	// The real Run, applying: the cluster is never contacted.
	var out, errOut bytes.Buffer
	f := cmdutil.Test(nil, &out, &errOut, nil)
	contacted := false
	f.Dynamic = func(clientcmd.ClientConfig) (dynamic.Interface, *rest.Config, error) {
		contacted = true
		return dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), &rest.Config{Host: "https://cluster"}, nil
	}
	cmd := NewCmdInstall(f, nil)
	cmd.SetArgs([]string{"--credential-ttl=48h", "--wait=false"})
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if err := cmd.ExecuteContext(context.Background()); err == nil || contacted {
		t.Errorf("--credential-ttl=48h: %v; cluster contacted: %v", err, contacted)
	}
}
