package leader

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// templateHashLabel is what a Deployment stamps on the pods of one template:
// pods that share it run the same agent version with the same flags.
const templateHashLabel = "pod-template-hash"

// oneVersion reports whether every agent pod runs the leader's pod template,
// and if not, why. Proxy tokens wait for it: an agent from before them would
// send a token it cannot read to TokenReview and refuse the user, so no
// replica may hand one out while an older replica can still be reached,
// including one that is terminating but still draining its connections.
// Outside a cluster (development, PodName empty or not a pod) there are no
// other versions to wait for.
func (c *Syncer) oneVersion(ctx context.Context) (bool, string, error) {
	if c.PodName == "" {
		return true, "", nil
	}
	pods := c.Kube.CoreV1().Pods(c.Namespace)
	self, err := pods.Get(ctx, c.PodName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("read this agent's pod %s/%s: %w", c.Namespace, c.PodName, err)
	}
	want := self.Labels[templateHashLabel]
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(c.Selector).String()})
	if err != nil {
		return false, "", fmt.Errorf("list the agent's pods in %s: %w", c.Namespace, err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue // ended: serves nobody
		}
		if p.Labels[templateHashLabel] != want {
			return false, fmt.Sprintf("agent pod %s runs another version of the agent (a rollout is in progress)", p.Name), nil
		}
	}
	return true, "", nil
}
