package whoami

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"

	identityv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/identity/v1alpha1"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/login/agentclient"
)

const kubeconfig = `apiVersion: v1
kind: Config
current-context: dev
clusters:
- {name: dev-cluster, cluster: {server: "https://dev:6443"}}
- {name: prod-cluster, cluster: {server: "https://prod:6443"}}
contexts:
- {name: dev, context: {cluster: dev-cluster, user: u}}
- {name: prod, context: {cluster: prod-cluster, user: u}}
users:
- {name: u, user: {token: x}}
`

// cluster answers WhoAmIRequest (unless agent is false, as on a cluster
// without the agent) and SelfSubjectReview.
func cluster(agent bool) dynamic.Interface {
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	dyn.PrependReactor("create", "whoamirequests", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetResource().Group != "identity.concierge.pinniped.dev" && a.GetResource().Group != "identity.concierge.example.io" {
			return true, nil, errors.NewNotFound(a.GetResource().GroupResource(), "")
		}
		if !agent {
			return true, nil, errors.NewNotFound(schema.GroupResource{Group: "identity.concierge.pinniped.dev", Resource: "whoamirequests"}, "")
		}
		return true, &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"kubernetesUserInfo": map[string]any{
			"user": map[string]any{"username": "alice@example.com", "groups": []any{"developers", "system:authenticated"},
				"extra": map[string]any{"authentication.kubernetes.io/credential-id": []any{"X509SHA256=ab"}}}}}}}, nil
	})
	dyn.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"userInfo": map[string]any{
			"username": "bob", "groups": []any{"system:authenticated"}}}}}, nil
	})
	return dyn
}

func run(t *testing.T, dyn dynamic.Interface, args ...string) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return runWith(t, dyn, nil, append([]string{"--kubeconfig=" + path}, args...)...)
}

func runWith(t *testing.T, dyn dynamic.Interface, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := cmdutil.Test(nil, &out, &errOut, env)
	f.Dynamic = func(cc clientcmd.ClientConfig) (dynamic.Interface, *rest.Config, error) {
		cfg, err := cc.ClientConfig()
		return dyn, cfg, err
	}
	cmd := NewCmdWhoami(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestWhoami(t *testing.T) {
	out, err := run(t, cluster(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Name: dev-cluster", "URL: https://dev:6443", "Username: alice@example.com", "Groups: developers, system:authenticated",
		"Extra authentication.kubernetes.io/credential-id: X509SHA256=ab", "(answered by WhoAmIRequest (pinniped agent))"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	// Another context (upstream's flag name), as text; a cluster without
	// the agent answers through Kubernetes' own SelfSubjectReview.
	out, err = run(t, cluster(false), "--kubeconfig-context=prod")
	if err != nil || !strings.Contains(out, "Name: prod-cluster\nURL: https://prod:6443") || !strings.Contains(out, "Username: bob") || !strings.Contains(out, "SelfSubjectReview") {
		t.Fatalf("%v\n%s", err, out)
	}
	// JSON and YAML: the WhoAmIRequest object, as upstream prints it, under
	// the API group suffix asked for, whichever API answered.
	for _, agent := range []bool{true, false} {
		out, err = run(t, cluster(agent), "-o", "json", "--api-group-suffix=example.io")
		var r map[string]any
		if err != nil || json.Unmarshal([]byte(out), &r) != nil || r["apiVersion"] != "identity.concierge.example.io/v1alpha1" || r["kind"] != "WhoAmIRequest" {
			t.Fatalf("agent %v: %v\n%s", agent, err, out)
		}
		user, _ := r["status"].(map[string]any)["kubernetesUserInfo"].(map[string]any)["user"].(map[string]any)
		if user["username"] == nil || user["groups"] == nil {
			t.Fatalf("agent %v: %s", agent, out)
		}
	}
	out, err = run(t, cluster(true), "-o", "yaml")
	if err != nil || !strings.Contains(out, "apiVersion: identity.concierge.pinniped.dev/v1alpha1") || !strings.Contains(out, "username: alice@example.com") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestWhoamiReadsTheFactorysKubeconfig: without --kubeconfig, the
// Factory's $KUBECONFIG, never the process's.
func TestWhoamiReadsTheFactorysKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "not-this-one"))
	out, err := runWith(t, cluster(true), map[string]string{"KUBECONFIG": path})
	if err != nil || !strings.Contains(out, "URL: https://dev:6443") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestWhoamiFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-o=xml":        `-o "xml": use text, json or yaml`,
		"--timeout=-1s": "--timeout must not be negative",
		"extra":         `unknown command "extra"`,
	} {
		var got *Options
		cmd := NewCmdWhoami(cmdutil.Test(nil, &bytes.Buffer{}, &bytes.Buffer{}, nil), func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs([]string{args})
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), want) || got != nil {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// hostile would clear the screen, return to the line's start, open a CSI
// with the C1 byte, and reverse and hide text, were it printed as it came.
const hostile = "\x1b[2J\r\u009b31m\u202eevil\u200b"

// TestTextOutputEscapesTheIdentity: the username, groups and extra the
// cluster answers (from the IdP's claims) reach the terminal escaped in
// text output; JSON keeps them exact with every control \u-escaped; YAML
// escapes them too.
func TestTextOutputEscapesTheIdentity(t *testing.T) {
	r := &agentclient.WhoAmIResult{Cluster: "dev", Server: "https://dev:6443", Source: "test"}
	u := &r.Request.Status.KubernetesUserInfo.User
	u.Username = "alice" + hostile
	u.Groups = []string{"devs" + hostile, "ops"}
	u.Extra = map[string]identityv1alpha1.ExtraValue{"key" + hostile: {"value" + hostile}}
	var text bytes.Buffer
	if err := render(&text, "text", r); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(text.String(), rawUnsafe) {
		t.Errorf("text output holds raw control characters: %q", text.String())
	}
	esc := `\x1b[2J\x0d\u009b31m\u202eevil\u200b`
	for _, want := range []string{"Username: alice" + esc, "Groups: devs" + esc + ", ops", "Extra key" + esc + ": value" + esc} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text output lacks %s:\n%s", want, text.String())
		}
	}
	var out bytes.Buffer
	if err := render(&out, "json", r); err != nil {
		t.Fatal(err)
	}
	var back identityv1alpha1.WhoAmIRequest
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if got := back.Status.KubernetesUserInfo.User; !reflect.DeepEqual(got, *u) || strings.ContainsAny(out.String(), rawUnsafe) {
		t.Errorf("JSON changed the identity, or holds raw controls: %q", out.String())
	}
	// YAML escapes C0 controls in its own syntax; the characters its
	// library refuses (C1) or leaves raw (bidi, zero-width) are escaped
	// before it sees them.
	out.Reset()
	if err := render(&out, "yaml", r); err != nil || strings.ContainsAny(out.String(), rawUnsafe) ||
		!strings.Contains(out.String(), `username: "alice\e[2J\r\\u009b31m\\u202eevil\\u200b"`) {
		t.Errorf("YAML: %v %q", err, out.String())
	}
}

// rawUnsafe is what must not appear raw in JSON or YAML output.
const rawUnsafe = "\x1b\r\u009b\u202e\u200b"
