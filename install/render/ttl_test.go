package render_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pinniped-kit/pinniped/agent/apis/credentialttl"
	"github.com/pinniped-kit/pinniped/install/render"
)

// agentArgs are the args of the agent container of the rendered Deployment.
func agentArgs(t *testing.T, c render.Config) []string {
	t.Helper()
	objs, err := render.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != render.AppName {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(containers) != 1 {
			t.Fatalf("%d containers in the agent Deployment", len(containers))
		}
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		return args
	}
	t.Fatal("no agent Deployment rendered")
	return nil
}

// TestCredentialTTL: a chosen lifetime reaches the agent as its
// --credential-ttl, in a form the agent's flag parses back to the same
// duration; none chosen renders no flag, so the agent's own default holds
// (and default manifests stay as they were: see the golden files).
func TestCredentialTTL(t *testing.T) {
	for _, d := range []time.Duration{credentialttl.Min, 90 * time.Second, 2 * time.Hour, credentialttl.Max} {
		var got []string
		for _, a := range agentArgs(t, render.Config{Image: "img", CredentialTTL: d}) {
			if v, ok := strings.CutPrefix(a, "--credential-ttl="); ok {
				got = append(got, v)
			}
		}
		if len(got) != 1 {
			t.Fatalf("%v: --credential-ttl rendered %d times", d, len(got))
		}
		if back, err := time.ParseDuration(got[0]); err != nil || back != d {
			t.Errorf("%v rendered as %q, which parses as %v (%v)", d, got[0], back, err)
		}
	}
	for _, a := range agentArgs(t, render.Config{Image: "img"}) {
		if strings.HasPrefix(a, "--credential-ttl") {
			t.Errorf("no lifetime chosen, yet the agent gets %s", a)
		}
	}
	for _, d := range []time.Duration{-time.Minute, time.Second, credentialttl.Min - time.Second, credentialttl.Max + time.Second} {
		_, err := render.Render(render.Config{Image: "img", CredentialTTL: d})
		if err == nil || !strings.Contains(err.Error(), "--credential-ttl") || !strings.Contains(err.Error(), "choose a lifetime from") {
			t.Errorf("%v: %v", d, err)
		}
	}
}

// TestProxyCredential: the admin's --proxy-credential reaches the agent as
// given, none is rendered when not chosen, and a value the agent would
// refuse is refused before anything is applied.
func TestProxyCredential(t *testing.T) {
	for _, v := range []string{"token", "certificate"} {
		n := 0
		for _, a := range agentArgs(t, render.Config{Image: "img", ProxyCredential: v}) {
			if a == "--proxy-credential="+v {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: --proxy-credential rendered %d times", v, n)
		}
	}
	for _, a := range agentArgs(t, render.Config{Image: "img"}) {
		if strings.HasPrefix(a, "--proxy-credential") {
			t.Errorf("nothing chosen, yet the agent gets %s", a)
		}
	}
	if _, err := render.Render(render.Config{Image: "img", ProxyCredential: "certificates"}); err == nil || !strings.Contains(err.Error(), "--proxy-credential") {
		t.Errorf("a misspelt value: %v", err)
	}
}
