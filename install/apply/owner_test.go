package apply

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/pinniped-kit/pinniped/install/render"
)

func apiServiceFor(name, namespace, service string, labels map[string]string) *unstructured.Unstructured {
	u := object(resourcesGVK("APIService"), "", name)
	_ = unstructured.SetNestedField(u.Object, namespace, "spec", "service", "namespace")
	_ = unstructured.SetNestedField(u.Object, service, "spec", "service", "name")
	u.SetLabels(labels)
	return u
}

func resourcesGVK(kind string) schema.GroupVersionKind {
	for k := range resources {
		if k.Kind == kind {
			return k
		}
	}
	panic(kind)
}

// TestInstallRefusesAnotherServersAPIGroups: an upstream Concierge (or our
// agent in another namespace) keeps its API groups, and the person learns
// what to do; our own earlier install is upgraded.
func TestInstallRefusesAnotherServersAPIGroups(t *testing.T) {
	objs, err := render.Render(render.Config{Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	group := "v1alpha1.login.concierge.pinniped.dev"
	for name, tc := range map[string]struct {
		existing *unstructured.Unstructured
		want     string
	}{
		"upstream's Concierge": {apiServiceFor(group, "pinniped-concierge", "pinniped-concierge-api", map[string]string{"app": "pinniped-concierge"}),
			"served by pinniped-concierge/pinniped-concierge-api, which is not a pinniped agent"},
		"our agent elsewhere": {apiServiceFor(group, "elsewhere", render.ServiceName, map[string]string{"app.kubernetes.io/name": render.AppName}),
			`installed in namespace "elsewhere"`},
		"our own earlier install": {apiServiceFor(group, "pinniped", render.ServiceName, map[string]string{"app.kubernetes.io/name": render.AppName}), ""},
	} {
		t.Run(name, func(t *testing.T) {
			in := &Installer{Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), tc.existing)}
			err := in.CheckOwnership(context.Background(), objs)
			var another *ErrServedByAnother
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("an upgrade refused: %v", err)
			case tc.want != "" && (!errors.As(err, &another) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want %q, got %v", tc.want, err)
			}
		})
	}
}
