package leaderelection

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestLeadsAndReleases: a replica that finds the Lease free leads (leading
// is true while lead runs), and on shutdown gives the Lease up, so that
// another replica need not wait for it to expire.
func TestLeadsAndReleases(t *testing.T) {
	kube := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	var leading atomic.Bool
	led := make(chan bool, 1)
	done := make(chan struct{})
	go func() {
		Run(ctx, kube, Config{Namespace: "pinniped", LeaseName: "pinniped-agent-leader", Identity: "pod-a"}, &leading, quiet,
			func(leadCtx context.Context) {
				led <- leading.Load()
				<-leadCtx.Done()
			})
		close(done)
	}()
	select {
	case wasLeading := <-led:
		if !wasLeading {
			t.Error("lead ran while leading was false")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never led a free Lease")
	}
	lease, err := kube.CoordinationV1().Leases("pinniped").Get(context.Background(), "pinniped-agent-leader", metav1.GetOptions{})
	if err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != "pod-a" {
		t.Fatalf("lease %+v, %v", lease, err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if leading.Load() {
		t.Error("still leading after shutdown")
	}
	lease, err = kube.CoordinationV1().Leases("pinniped").Get(context.Background(), "pinniped-agent-leader", metav1.GetOptions{})
	if err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != "" {
		t.Fatalf("lease not released: %+v, %v", lease.Spec, err)
	}
}

// TestFollowsWhileAnotherHoldsTheLease: a Lease another replica renews is
// left alone; this replica does not write.
func TestFollowsWhileAnotherHoldsTheLease(t *testing.T) {
	now := metav1.NewMicroTime(time.Now())
	kube := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "pinniped", Name: "pinniped-agent-leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-b"), LeaseDurationSeconds: ptr.To[int32](30),
			AcquireTime: &now, RenewTime: &now},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var leading atomic.Bool
	Run(ctx, kube, Config{Namespace: "pinniped", LeaseName: "pinniped-agent-leader", Identity: "pod-a"}, &leading, quiet,
		func(context.Context) { t.Error("led while another replica holds the Lease") })
	if leading.Load() {
		t.Error("leading")
	}
	lease, err := kube.CoordinationV1().Leases("pinniped").Get(context.Background(), "pinniped-agent-leader", metav1.GetOptions{})
	if err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != "pod-b" {
		t.Fatalf("lease %+v, %v", lease, err)
	}
}
