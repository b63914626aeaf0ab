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

// TestHelmReleasesAreLeftToHelm: an agent or CRDs that a Helm release
// manages are neither applied over nor uninstalled; the refusal names the
// release and the Helm command.
func TestHelmReleasesAreLeftToHelm(t *testing.T) {
	objs := renderFor(t, "img")
	helmOwned := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "auth", "meta.helm.sh/release-namespace": "platform"})
		return u
	}
	var deploy, crd *unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "Deployment":
			deploy = o.DeepCopy()
		case o.GetKind() == "CustomResourceDefinition" && strings.HasPrefix(o.GetName(), "credentialissuers."):
			crd = o.DeepCopy()
		}
	}
	for name, existing := range map[string]*unstructured.Unstructured{"the agent": helmOwned(deploy.DeepCopy()), "the CRDs": helmOwned(crd.DeepCopy())} {
		t.Run(name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), existing)
			in := &Installer{Dynamic: dyn, Progress: &recordedProgress{}}
			var helm *ErrManagedByHelm
			err := in.CheckOwnership(context.Background(), objs)
			if !errors.As(err, &helm) || !strings.Contains(err.Error(), "helm upgrade auth -n platform") {
				t.Fatalf("install over a Helm release: %v", err)
			}
			err = in.Uninstall(context.Background(), "pinniped")
			if !errors.As(err, &helm) || !strings.Contains(err.Error(), "helm uninstall auth -n platform") {
				t.Fatalf("uninstall of a Helm release: %v", err)
			}
			for _, a := range dyn.Actions() {
				if a.GetVerb() != "get" {
					t.Fatalf("refused, yet it did %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
	// Without Helm's marks, the same objects are an earlier install's.
	in := &Installer{Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), deploy, crd)}
	if err := in.CheckOwnership(context.Background(), objs); err != nil {
		t.Fatalf("an upgrade of our own install refused: %v", err)
	}
}
