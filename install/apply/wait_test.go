package apply

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/install/render"
)

func withFields(u *unstructured.Unstructured, value any, path ...string) *unstructured.Unstructured {
	if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
		panic(err)
	}
	return u
}

// agentObjects are the objects Wait reads, as the cluster shows them once
// the agent works: the Deployment rolled out, both APIServices Available
// and a strategy that works.
func agentObjects(suffix string) (deployment *unstructured.Unstructured, apiServices []*unstructured.Unstructured, ci *unstructured.Unstructured) {
	deployment = object(resourcesGVK("Deployment"), "pinniped", render.AppName)
	deployment.SetGeneration(2)
	withFields(deployment, int64(2), "spec", "replicas")
	withFields(deployment, map[string]any{"observedGeneration": int64(2), "updatedReplicas": int64(2), "availableReplicas": int64(2), "replicas": int64(2)}, "status")
	for _, name := range groupsuffix.APIServiceNames(suffix) {
		apiServices = append(apiServices, withFields(object(resourcesGVK("APIService"), "", name),
			[]any{map[string]any{"type": "Available", "status": "True"}}, "status", "conditions"))
	}
	ci = object(schema.GroupVersionKind{Group: groupsuffix.Group(groupsuffix.Config, suffix), Version: groupsuffix.Version, Kind: "CredentialIssuer"}, "", render.CredentialIssuerName)
	withFields(ci, []any{
		map[string]any{"type": "KubeClusterSigningCertificate", "status": "Error", "message": "no kube-controller-manager pod"},
		map[string]any{"type": "CertificateSigningRequest", "status": "Success", "message": "certificates are being issued"},
	}, "status", "strategies")
	return deployment, apiServices, ci
}

func asObjects(d *unstructured.Unstructured, as []*unstructured.Unstructured, ci *unstructured.Unstructured, more ...*unstructured.Unstructured) []runtime.Object {
	out := []runtime.Object{d, ci}
	for _, a := range as {
		out = append(out, a)
	}
	for _, m := range more {
		out = append(out, m)
	}
	return out
}

// TestWaitReturnsOnceTheAgentWorks: under a suffix too, each condition is
// reported done in turn.
func TestWaitReturnsOnceTheAgentWorks(t *testing.T) {
	const suffix = "tuna.io"
	d, as, ci := agentObjects(suffix)
	progress := &recordedProgress{}
	in := &Installer{Dynamic: applyCluster(t, suffix, asObjects(d, as, ci)...), Progress: progress, Poll: time.Millisecond, GroupSuffix: suffix}
	if err := in.Wait(context.Background(), "pinniped", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	want := []string{"done: agent Deployment available", "done: APIService v1alpha1.login.concierge.tuna.io available",
		"done: APIService v1alpha1.identity.concierge.tuna.io available", "done: a credential strategy works"}
	for _, w := range want {
		if !strings.Contains(progress.String(), w) {
			t.Errorf("progress lacks %q:\n%s", w, progress)
		}
	}
}

// TestWaitPollsUntilReady: an APIService that becomes Available while
// Wait polls is waited for, not failed.
func TestWaitPollsUntilReady(t *testing.T) {
	d, as, ci := agentObjects("")
	unavailable := as[0].DeepCopy()
	withFields(unavailable, []any{map[string]any{"type": "Available", "status": "False", "reason": "MissingEndpoints", "message": "no endpoints"}}, "status", "conditions")
	dyn := applyCluster(t, "", asObjects(d, as, ci)...)
	var gets atomic.Int32
	dyn.PrependReactor("get", "apiservices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.GetAction).GetName() == unavailable.GetName() && gets.Add(1) <= 3 {
			return true, unavailable.DeepCopy(), nil
		}
		return false, nil, nil
	})
	in := &Installer{Dynamic: dyn, Progress: &recordedProgress{}, Poll: time.Millisecond}
	if err := in.Wait(context.Background(), "pinniped", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if gets.Load() < 4 {
		t.Fatalf("asked %d times", gets.Load())
	}
}

// TestWaitTimeoutSaysWhatIsNotTrueAndWhy: on timeout the error names the
// condition, its last reason, and what the cluster says about the pods.
func TestWaitTimeoutSaysWhatIsNotTrueAndWhy(t *testing.T) {
	d, as, ci := agentObjects("")
	withFields(d, int64(0), "status", "availableReplicas")
	pod := object(resourcesGVK("Pod"), "pinniped", "pinniped-agent-abc")
	pod.SetLabels(map[string]string{"app.kubernetes.io/name": render.AppName})
	withFields(pod, map[string]any{"phase": "Pending", "containerStatuses": []any{map[string]any{
		"state": map[string]any{"waiting": map[string]any{"reason": "ImagePullBackOff", "message": "pull access denied"}}}}}, "status")
	event := object(eventGVK, "pinniped", "pinniped-agent-abc.1")
	withFields(event, "Warning", "type")
	withFields(event, "Failed", "reason")
	withFields(event, "Failed to pull image", "message")
	withFields(event, map[string]any{"kind": "Pod", "name": "pinniped-agent-abc"}, "involvedObject")
	in := &Installer{Dynamic: applyCluster(t, "", asObjects(d, as, ci, pod, event)...), Progress: &recordedProgress{}, Poll: time.Millisecond}
	start := time.Now()
	err := in.Wait(context.Background(), "pinniped", 50*time.Millisecond)
	if err == nil {
		t.Fatal("ready with no replica available")
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v for a 50ms timeout", time.Since(start))
	}
	for _, want := range []string{
		"not ready after 50ms: agent Deployment available is not true: 0 of 2 replicas updated and available",
		"pod pinniped-agent-abc: Pending (waiting ImagePullBackOff pull access denied)",
		"event Pod pinniped-agent-abc: Failed: Failed to pull image",
		"kubectl -n pinniped logs deploy/pinniped-agent",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestWaitForAStrategyListsWhyNoneWorks: every strategy's message is in
// the error, since any of them might be the one to fix.
func TestWaitForAStrategyListsWhyNoneWorks(t *testing.T) {
	d, as, ci := agentObjects("")
	withFields(ci, []any{
		map[string]any{"type": "KubeClusterSigningCertificate", "status": "Error", "message": "no kube-controller-manager pod"},
		map[string]any{"type": "CertificateSigningRequest", "status": "Error", "message": "not approved"},
	}, "status", "strategies")
	in := &Installer{Dynamic: applyCluster(t, "", asObjects(d, as, ci)...), Progress: &recordedProgress{}, Poll: time.Millisecond}
	err := in.Wait(context.Background(), "pinniped", 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "a credential strategy works is not true: KubeClusterSigningCertificate: no kube-controller-manager pod; CertificateSigningRequest: not approved") {
		t.Fatalf("%v", err)
	}
}

// TestWaitEndsWithItsContext: an interrupted wait returns at once, saying
// what it was waiting for, however long its own timeout.
func TestWaitEndsWithItsContext(t *testing.T) {
	in := &Installer{Dynamic: applyCluster(t, ""), Progress: &recordedProgress{}, Poll: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	err := in.Wait(ctx, "pinniped", time.Hour)
	if err == nil || !strings.Contains(err.Error(), "agent Deployment available is not true") || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("%v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("returned after %v", time.Since(start))
	}
}
