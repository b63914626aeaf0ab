package apply

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/pinniped-kit/pinniped/install/render"
)

const otherSuffix = "e2e-suffix.example.net"

// twoInstalls is a fake cluster holding a default install in "pinniped"
// and one under otherSuffix in "pinniped-suffixed", each with objects its
// agent made (labelled part-of=pinniped only, as the agent labels them).
func twoInstalls(t *testing.T) (*dynamicfake.FakeDynamicClient, []*unstructured.Unstructured, []*unstructured.Unstructured) {
	t.Helper()
	listKinds := map[schema.GroupVersionResource]string{}
	for gvk, r := range resources {
		listKinds[r.gvr] = gvk.Kind + "List"
	}
	for _, s := range []string{"", otherSuffix} {
		for gvk, r := range customResources(s) {
			listKinds[r.gvr] = gvk.Kind + "List"
		}
	}
	var all []runtime.Object
	rendered := func(ns, suffix string) []*unstructured.Unstructured {
		objs, err := render.Render(render.Config{Image: "img", Namespace: ns, GroupSuffix: suffix,
			OIDCIssuer: "https://dex", OIDCAudience: "a", AuthenticatorName: "dex"})
		if err != nil {
			t.Fatal(err)
		}
		var out []*unstructured.Unstructured
		for _, o := range objs {
			out = append(out, o.Unstructured)
		}
		agentMade := object(resourcesGVK("Secret"), ns, "pinniped-agent-api-tls")
		agentMade.SetLabels(map[string]string{render.PartOfLabel: render.PartOfValue})
		out = append(out, agentMade)
		for _, u := range out {
			all = append(all, u.DeepCopy())
		}
		return out
	}
	def := rendered("pinniped", "")
	suf := rendered("pinniped-suffixed", otherSuffix)
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, all...), def, suf
}

func present(t *testing.T, in *Installer, objs []*unstructured.Unstructured) (there, gone []string) {
	t.Helper()
	for _, o := range objs {
		c, err := in.client(o)
		if err != nil {
			t.Fatal(err)
		}
		name := o.GetKind() + " " + qualifiedName(o)
		if _, err := c.Get(context.Background(), o.GetName(), metav1.GetOptions{}); err == nil {
			there = append(there, name)
		} else {
			gone = append(gone, name)
		}
	}
	sort.Strings(there)
	sort.Strings(gone)
	return there, gone
}

// TestUninstallTakesOnlyItsOwnInstall: uninstalling either of two
// installs with different suffixes removes all of its objects and none of
// the other's.
func TestUninstallTakesOnlyItsOwnInstall(t *testing.T) {
	for _, c := range []struct {
		name, namespace, suffix string
		removedIsSuffixed       bool
	}{
		{"the suffixed one", "pinniped-suffixed", otherSuffix, true},
		{"the default one", "pinniped", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dyn, def, suf := twoInstalls(t)
			in := &Installer{Dynamic: dyn, Progress: nopProgress{}, Poll: time.Millisecond, GroupSuffix: c.suffix}
			if err := in.Uninstall(context.Background(), c.namespace); err != nil {
				t.Fatal(err)
			}
			removed, kept := suf, def
			keptSuffix := ""
			if !c.removedIsSuffixed {
				removed, kept, keptSuffix = def, suf, otherSuffix
			}
			if there, _ := present(t, in, removed); len(there) > 0 {
				t.Errorf("left behind:\n%s", strings.Join(there, "\n"))
			}
			other := &Installer{Dynamic: dyn, GroupSuffix: keptSuffix}
			if _, gone := present(t, other, kept); len(gone) > 0 {
				t.Errorf("deleted from the other install:\n%s", strings.Join(gone, "\n"))
			}
		})
	}
}

// TestUninstallRefusesTheOtherInstallsNamespace: an uninstall whose
// --namespace is the other install's (the default namespace with a
// suffix, say) removes nothing.
func TestUninstallRefusesTheOtherInstallsNamespace(t *testing.T) {
	for _, c := range []struct{ namespace, suffix string }{{"pinniped", otherSuffix}, {"pinniped-suffixed", ""}} {
		dyn, def, suf := twoInstalls(t)
		in := &Installer{Dynamic: dyn, Progress: nopProgress{}, Poll: time.Millisecond, GroupSuffix: c.suffix}
		err := in.Uninstall(context.Background(), c.namespace)
		var taken *ErrNamespaceTaken
		if !errors.As(err, &taken) || !strings.Contains(err.Error(), "nothing was removed") {
			t.Fatalf("uninstall --namespace=%s --api-group-suffix=%q: %v", c.namespace, c.suffix, err)
		}
		for suffix, objs := range map[string][]*unstructured.Unstructured{"": def, otherSuffix: suf} {
			if _, gone := present(t, &Installer{Dynamic: dyn, GroupSuffix: suffix}, objs); len(gone) > 0 {
				t.Errorf("deleted:\n%s", strings.Join(gone, "\n"))
			}
		}
	}
}

// TestInstallRefusesANamespaceOfAnotherSuffix: two installs cannot share a
// namespace (same Deployment, Service and Secret names), so the second is
// refused before anything changes; re-installing the same one is not.
func TestInstallRefusesANamespaceOfAnotherSuffix(t *testing.T) {
	dyn, _, _ := twoInstalls(t)
	for _, c := range []struct {
		namespace, suffix, want string
	}{
		{"pinniped", otherSuffix, `namespace "pinniped" already holds a pinniped agent installed with the default API group suffix`},
		{"pinniped-suffixed", "", "installed with another API group suffix (pinniped.dev/api-group-suffix=e2e-suffix.example.net)"},
		{"pinniped", "", ""},
		{"pinniped-suffixed", otherSuffix, ""},
	} {
		objs, err := render.Render(render.Config{Image: "img", Namespace: c.namespace, GroupSuffix: c.suffix})
		if err != nil {
			t.Fatal(err)
		}
		in := &Installer{Dynamic: dyn, GroupSuffix: c.suffix}
		err = in.CheckOwnership(context.Background(), objs)
		var taken *ErrNamespaceTaken
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s/%q: an upgrade refused: %v", c.namespace, c.suffix, err)
		case c.want != "" && (!errors.As(err, &taken) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s/%q: want %q, got %v", c.namespace, c.suffix, c.want, err)
		}
	}
}

type nopProgress struct{}

func (nopProgress) Step(string) {}
func (nopProgress) Done(string) {}

// TestUninstallLeavesANamespaceItDidNotMake: after helm uninstall of a
// release whose namespace the administrator made, pinniped uninstall
// removes what the agent left there and keeps the namespace, without
// waiting for it to go.
func TestUninstallLeavesANamespaceItDidNotMake(t *testing.T) {
	listKinds := map[schema.GroupVersionResource]string{}
	for gvk, r := range resources {
		listKinds[r.gvr] = gvk.Kind + "List"
	}
	for gvk, r := range customResources("") {
		listKinds[r.gvr] = gvk.Kind + "List"
	}
	ns := object(resourcesGVK("Namespace"), "", "team-auth")
	left := object(resourcesGVK("Secret"), "team-auth", "pinniped-agent-api-tls")
	left.SetLabels(map[string]string{render.PartOfLabel: render.PartOfValue})
	theirs := object(resourcesGVK("Secret"), "team-auth", "team-secret")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, ns, left, theirs)
	in := &Installer{Dynamic: dyn, Progress: nopProgress{}, Poll: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := in.Uninstall(ctx, "team-auth"); err != nil {
		t.Fatalf("uninstall in a namespace of the administrator's: %v", err)
	}
	there, gone := present(t, in, []*unstructured.Unstructured{ns, left, theirs})
	if want := []string{"Namespace team-auth", "Secret team-auth/team-secret"}; strings.Join(there, ",") != strings.Join(want, ",") {
		t.Errorf("kept %v, want %v (removed %v)", there, want, gone)
	}
}
