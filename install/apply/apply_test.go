package apply

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/pinniped-kit/pinniped/install/render"
)

// applyCluster is a fake cluster that does server-side apply as an API
// server does (with managed fields: a field another manager set stays
// when install's apply leaves it out), and whose CRDs become Established
// as soon as they exist.
func applyCluster(t *testing.T, suffix string, objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	t.Helper()
	scheme := runtime.NewScheme()
	listKinds := map[schema.GroupVersionResource]string{}
	add := func(gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) {
		scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
		listKinds[gvr] = gvk.Kind + "List"
	}
	for gvk, r := range resources {
		add(gvk, r.gvr)
	}
	for gvk, r := range customResources(suffix) {
		add(gvk, r.gvr)
	}
	add(eventGVK, eventsGVR)
	tracker := clienttesting.NewFieldManagedObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder(), managedfields.NewDeducedTypeConverter())
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		r, err := (&Installer{GroupSuffix: suffix}).resourceFor(u.GroupVersionKind())
		if u.GroupVersionKind() == eventGVK {
			r, err = resource{gvr: eventsGVR}, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tracker.Create(r.gvr, u, u.GetNamespace(), metav1.CreateOptions{FieldManager: "the-agent"}); err != nil {
			t.Fatal(err)
		}
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, listKinds)
	dyn.PrependReactor("*", "*", clienttesting.ObjectReaction(tracker))
	dyn.PrependReactor("get", "customresourcedefinitions", establish(tracker))
	return dyn
}

var eventGVK = schema.GroupVersionKind{Version: "v1", Kind: "Event"}

// establish answers a CRD's Get as the API server does once it serves it.
func establish(tracker clienttesting.ObjectTracker) clienttesting.ReactionFunc {
	return func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj, err := tracker.Get(a.GetResource(), "", a.(clienttesting.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		u := obj.(*unstructured.Unstructured).DeepCopy()
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Established", "status": "True"}}, "status", "conditions")
		return true, u, nil
	}
}

type recordedProgress struct {
	mu    sync.Mutex
	lines []string
}

func (p *recordedProgress) Step(msg string) {
	p.mu.Lock()
	p.lines = append(p.lines, "step: "+msg)
	p.mu.Unlock()
}
func (p *recordedProgress) Done(msg string) {
	p.mu.Lock()
	p.lines = append(p.lines, "done: "+msg)
	p.mu.Unlock()
}

func (p *recordedProgress) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

func renderFor(t *testing.T, image string) []render.Object {
	t.Helper()
	objs, err := render.Render(render.Config{Image: image, Namespace: "pinniped"})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func get(t *testing.T, in *Installer, o render.Object) *unstructured.Unstructured {
	t.Helper()
	c, err := in.client(o.Unstructured)
	if err != nil {
		t.Fatal(err)
	}
	u, err := c.Get(context.Background(), o.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), qualifiedName(o.Unstructured), err)
	}
	return u
}

func find(t *testing.T, objs []render.Object, kind string) render.Object {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	t.Fatalf("no %s rendered", kind)
	return render.Object{}
}

func deploymentImage(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		t.Fatalf("no containers in %v", u.Object)
	}
	image, _ := containers[0].(map[string]any)["image"].(string)
	return image
}

// TestApplyCreatesThenUpgradesInPlace: the first apply creates every
// object (CRDs first, waited for until Established), as install's field
// manager; a second with another image updates the Deployment, and keeps
// what the agent wrote into an installed object (an APIService's caBundle).
func TestApplyCreatesThenUpgradesInPlace(t *testing.T) {
	dyn := applyCluster(t, "")
	progress := &recordedProgress{}
	patches := &patchOptions{Interface: dyn}
	in := &Installer{Dynamic: patches, Progress: progress, Poll: time.Millisecond}
	first := renderFor(t, "registry.example/agent:v1")
	// Given last, CRDs are still applied first.
	slices.Reverse(first)
	if err := in.Apply(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	for _, o := range first {
		get(t, in, o)
	}
	if len(patches.seen) != len(first) {
		t.Errorf("%d applies for %d objects", len(patches.seen), len(first))
	}
	for _, opts := range patches.seen {
		if opts.FieldManager != FieldManager || opts.Force == nil || !*opts.Force || len(opts.DryRun) != 0 {
			t.Errorf("applied with %+v, want install's field manager, forced", opts)
		}
	}
	if !strings.Contains(progress.String(), "CustomResourceDefinitions established") {
		t.Errorf("progress:\n%s", progress)
	}
	var crdsApplied, restApplied int
	for i, a := range dyn.Actions() {
		if a.GetVerb() != "patch" {
			continue
		}
		if a.GetResource().Resource == "customresourcedefinitions" {
			crdsApplied = i
			if restApplied != 0 {
				t.Fatal("a CRD applied after other objects")
			}
		} else if restApplied == 0 {
			restApplied = i
		}
	}
	if crdsApplied == 0 || restApplied < crdsApplied {
		t.Fatalf("order of applies: CRDs by %d, the rest from %d", crdsApplied, restApplied)
	}

	// The agent keeps the APIService's caBundle, under its own manager.
	apiService := find(t, first, "APIService")
	agentsView := get(t, in, apiService)
	_ = unstructured.SetNestedField(agentsView.Object, "Q0E=", "spec", "caBundle")
	c, _ := in.client(apiService.Unstructured)
	if _, err := c.Update(context.Background(), agentsView, metav1.UpdateOptions{FieldManager: "pinniped-agent"}); err != nil {
		t.Fatal(err)
	}

	second := renderFor(t, "registry.example/agent:v2")
	if err := in.Apply(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	if image := deploymentImage(t, get(t, in, find(t, second, "Deployment"))); image != "registry.example/agent:v2" {
		t.Errorf("re-apply left the image %s", image)
	}
	if ca, _, _ := unstructured.NestedString(get(t, in, apiService).Object, "spec", "caBundle"); ca != "Q0E=" {
		t.Errorf("re-apply dropped the agent's caBundle: %q", ca)
	}
}

// TestApplyRefusesAnotherServersGroupsBeforeChangingAnything: over an
// upstream Concierge's APIService nothing is applied at all.
func TestApplyRefusesAnotherServersGroupsBeforeChangingAnything(t *testing.T) {
	concierge := apiServiceFor("v1alpha1.login.concierge.pinniped.dev", "pinniped-concierge", "pinniped-concierge-api", nil)
	dyn := applyCluster(t, "", concierge)
	in := &Installer{Dynamic: dyn, Progress: &recordedProgress{}, Poll: time.Millisecond}
	err := in.Apply(context.Background(), renderFor(t, "img"))
	var another *ErrServedByAnother
	if !errors.As(err, &another) {
		t.Fatalf("apply over upstream's Concierge: %v", err)
	}
	for _, a := range dyn.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("changed the cluster: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// TestApplyErrorsSayWhatToDo: a refused apply names the object and, for a
// permission error, what rights installing needs.
func TestApplyErrorsSayWhatToDo(t *testing.T) {
	dyn := applyCluster(t, "")
	dyn.PrependReactor("patch", "clusterroles", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrorsForbidden()
	})
	in := &Installer{Dynamic: dyn, Progress: &recordedProgress{}, Poll: time.Millisecond}
	err := in.Apply(context.Background(), renderFor(t, "img"))
	if err == nil || !strings.Contains(err.Error(), "apply ClusterRole ") || !strings.Contains(err.Error(), "needs cluster-admin rights") {
		t.Fatalf("apply refused: %v", err)
	}
}

// TestApplyDryRunPersistsNothing: --dry-run=server asks the server to
// validate every object and does not wait for CRDs that were not created.
func TestApplyDryRunPersistsNothing(t *testing.T) {
	dyn := applyCluster(t, "")
	// The fake persists dry runs; a real server would not.
	dyn.PrependReactor("patch", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &unstructured.Unstructured{}, nil
	})
	patches := &patchOptions{Interface: dyn}
	in := &Installer{Dynamic: patches, Progress: &recordedProgress{}, ServerDryRun: true, Poll: time.Millisecond}
	objs := renderFor(t, "img")
	if err := in.Apply(context.Background(), objs); err != nil {
		t.Fatal(err)
	}
	if len(patches.seen) != len(objs) {
		t.Fatalf("%d applies for %d objects", len(patches.seen), len(objs))
	}
	for _, opts := range patches.seen {
		if len(opts.DryRun) != 1 || opts.DryRun[0] != metav1.DryRunAll || opts.FieldManager != FieldManager {
			t.Errorf("applied with %+v, want a dry run", opts)
		}
	}
	// The ownership check reads CRDs before the first apply; only a read
	// after it is a wait.
	applied := false
	for _, a := range dyn.Actions() {
		applied = applied || a.GetVerb() == "patch"
		if applied && a.GetVerb() == "get" && a.GetResource().Resource == "customresourcedefinitions" {
			t.Fatal("waited for a CRD a dry run did not create")
		}
	}
}

func apierrorsForbidden() error {
	return apierrors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, "pinniped-agent", errors.New("user cannot patch"))
}

// patchOptions records the options of every patch, which the fake dynamic
// client drops before its reactors see them.
type patchOptions struct {
	dynamic.Interface
	mu   sync.Mutex
	seen []metav1.PatchOptions
}

func (p *patchOptions) Resource(r schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &patchOptionsResource{NamespaceableResourceInterface: p.Interface.Resource(r), p: p}
}

type patchOptionsResource struct {
	dynamic.NamespaceableResourceInterface
	p *patchOptions
}

func (r *patchOptionsResource) Namespace(ns string) dynamic.ResourceInterface {
	return &patchOptionsNamespaced{ResourceInterface: r.NamespaceableResourceInterface.Namespace(ns), p: r.p}
}

func (r *patchOptionsResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	r.p.record(opts)
	return r.NamespaceableResourceInterface.Patch(ctx, name, pt, data, opts, sub...)
}

type patchOptionsNamespaced struct {
	dynamic.ResourceInterface
	p *patchOptions
}

func (r *patchOptionsNamespaced) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	r.p.record(opts)
	return r.ResourceInterface.Patch(ctx, name, pt, data, opts, sub...)
}

func (p *patchOptions) record(opts metav1.PatchOptions) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, opts)
}
