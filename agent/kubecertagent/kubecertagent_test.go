package kubecertagent

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// A replica that wins the election while it waits creates the helper then,
// instead of waiting out the whole bound for a Deployment nobody creates.
func TestReplicaThatBecomesLeaderWhileWaitingCreatesTheHelper(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "deployments", startPod(t, kube))
	var polls atomic.Int32
	a := &Agent{Kube: kube, Namespace: "pinniped", Name: "pinniped-kube-cert-agent", Image: "agent:v1",
		Manage: func() bool { return polls.Add(1) > 3 }, PollInterval: 5 * time.Millisecond}
	kcm := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "kcm"}}}}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	pod, err := a.helperPod(ctx, kcm)
	if err != nil {
		t.Fatal(err)
	}
	if pod != "pinniped-kube-cert-agent-abc" || time.Since(start) > 5*time.Second {
		t.Fatalf("pod %q after %v", pod, time.Since(start))
	}
}

// A replica that never leads waits for the leader's helper pod and never
// writes the Deployment itself.
func TestFollowerOnlyWaits(t *testing.T) {
	kube := fake.NewClientset()
	a := &Agent{Kube: kube, Namespace: "pinniped", Name: "pinniped-kube-cert-agent", Image: "agent:v1",
		Manage: func() bool { return false }, PollInterval: 5 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _ = a.helperPod(ctx, &corev1.Pod{})
	for _, action := range kube.Actions() {
		if action.GetVerb() != "list" {
			t.Errorf("a follower did %s %s", action.GetVerb(), action.GetResource().Resource)
		}
	}
}

// A new leader racing the previous one to the Deployment tries again at
// the next poll instead of giving up on the signing key.
func TestLeaderRetriesAfterACreateRace(t *testing.T) {
	kube := fake.NewClientset()
	var creates atomic.Int32
	kube.PrependReactor("create", "deployments", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) == 1 {
			return true, nil, apierrors.NewAlreadyExists(appsv1.Resource("deployments"), "pinniped-kube-cert-agent")
		}
		return startPod(t, kube)(action)
	})
	a := &Agent{Kube: kube, Namespace: "pinniped", Name: "pinniped-kube-cert-agent", Image: "agent:v1",
		Manage: func() bool { return true }, PollInterval: 5 * time.Millisecond}
	kcm := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "kcm"}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if pod, err := a.helperPod(ctx, kcm); err != nil || pod != "pinniped-kube-cert-agent-abc" || creates.Load() != 2 {
		t.Fatalf("pod %q, err %v, %d creates", pod, err, creates.Load())
	}
}

// startPod plays the Deployment controller's part: a running pod once the
// Deployment is created.
func startPod(t *testing.T, kube *fake.Clientset) clienttesting.ReactionFunc {
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		d := action.(clienttesting.CreateAction).GetObject().(*appsv1.Deployment)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-abc", Namespace: d.Namespace, Labels: d.Spec.Template.Labels},
			Spec:       d.Spec.Template.Spec,
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
		if err := kube.Tracker().Add(pod); err != nil {
			t.Error(err)
		}
		return false, nil, nil
	}
}
