package apply

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/pinniped-kit/pinniped/install/render"
)

func object(gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// TestRemoveKubeCertAgent: turning the helper off removes what an earlier
// install made for it, and nothing else; a second run finds nothing.
func TestRemoveKubeCertAgent(t *testing.T) {
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	role := schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}
	binding := schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}
	gvrs := map[schema.GroupVersionResource]string{}
	for _, gvk := range []schema.GroupVersionKind{deploy, role, binding} {
		gvrs[resources[gvk].gvr] = gvk.Kind + "List"
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), gvrs,
		object(deploy, "pinniped", render.KubeCertAgentName),
		object(deploy, "pinniped", render.AppName),
		object(role, "kube-system", render.AppName+"-find-controller-manager"),
		object(binding, "kube-system", render.AppName+"-find-controller-manager"),
	)
	in := &Installer{Dynamic: dyn}
	ctx := context.Background()
	if removed, err := in.RemoveKubeCertAgent(ctx, "pinniped"); err != nil || !removed {
		t.Fatalf("removed %v, %v", removed, err)
	}
	left, err := dyn.Resource(resources[deploy].gvr).Namespace("pinniped").List(ctx, metav1.ListOptions{})
	if err != nil || len(left.Items) != 1 || left.Items[0].GetName() != render.AppName {
		t.Fatalf("deployments left: %v %v", left, err)
	}
	for _, gvk := range []schema.GroupVersionKind{role, binding} {
		if l, _ := dyn.Resource(resources[gvk].gvr).Namespace("kube-system").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
			t.Errorf("%s left in kube-system: %v", gvk.Kind, l.Items)
		}
	}
	if removed, err := in.RemoveKubeCertAgent(ctx, "pinniped"); err != nil || removed {
		t.Fatalf("second run: removed %v, %v", removed, err)
	}
}
