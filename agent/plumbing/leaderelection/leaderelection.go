// Package leaderelection picks the one agent replica that writes shared
// state (statuses, the kube-cert-agent helper, the impersonation proxy's
// Service and certificates) through a coordination.k8s.io Lease. Every
// replica serves exchanges; only writes are the leader's, so that replicas
// do not fight over the same objects. A replica that loses the Lease runs
// for it again instead of exiting: it keeps serving in the meantime.
package leaderelection

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	k8sleaderelection "k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config names the Lease and this replica.
type Config struct {
	Namespace, LeaseName string
	// Identity is this replica's name in the Lease; empty means the hostname.
	Identity string
}

// Run campaigns for the Lease until ctx ends. While this replica leads,
// leading is true and lead runs with a context that ends when leadership
// does.
func Run(ctx context.Context, kube kubernetes.Interface, c Config, leading *atomic.Bool, log *slog.Logger, lead func(context.Context)) {
	id := c.Identity
	if id == "" {
		id, _ = os.Hostname()
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: c.LeaseName, Namespace: c.Namespace},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	for ctx.Err() == nil {
		k8sleaderelection.RunOrDie(ctx, k8sleaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true,
			LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 5 * time.Second,
			Callbacks: k8sleaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					leading.Store(true)
					log.Info("became the leader: writing statuses", "identity", id)
					lead(ctx)
				},
				OnStoppedLeading: func() {
					leading.Store(false)
					log.Info("stopped leading", "identity", id)
				},
			},
		})
	}
}
