package apply

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/install/render"
)

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	podsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	eventsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

// check is one readiness condition: ok, or a reason it is not ok yet.
type check struct {
	name string
	fn   func(ctx context.Context) (notReady string, err error)
}

// Wait blocks until the agent is serving: the Deployment is available, both
// APIServices are Available, and a credential strategy works. On timeout it
// says which of these is not true and why, with pod states and warning events.
func (in *Installer) Wait(ctx context.Context, namespace string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	checks := []check{
		{"agent Deployment available", func(ctx context.Context) (string, error) { return in.deploymentNotReady(ctx, namespace) }},
	}
	for _, name := range groupsuffix.APIServiceNames(in.GroupSuffix) {
		checks = append(checks, check{"APIService " + name + " available", func(ctx context.Context) (string, error) {
			return in.apiServiceNotReady(ctx, name)
		}})
	}
	checks = append(checks, check{"a credential strategy works", in.strategyNotReady})
	for _, c := range checks {
		in.Progress.Step("waiting: " + c.name)
		var last string
		for {
			notReady, err := c.fn(ctx)
			if err == nil && notReady == "" {
				in.Progress.Done(c.name)
				break
			}
			if err != nil {
				last = err.Error()
			} else {
				last = notReady
			}
			select {
			case <-ctx.Done():
				diag := in.diagnose(context.WithoutCancel(ctx), namespace)
				return fmt.Errorf("not ready after %v: %s is not true: %s%s", timeout, c.name, last, diag)
			case <-time.After(in.poll()):
			}
		}
	}
	return nil
}

func (in *Installer) deploymentNotReady(ctx context.Context, namespace string) (string, error) {
	u, err := in.Dynamic.Resource(deploymentsGVR).Namespace(namespace).Get(ctx, render.AppName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	want, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	gen := u.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	updated, _, _ := unstructured.NestedInt64(u.Object, "status", "updatedReplicas")
	available, _, _ := unstructured.NestedInt64(u.Object, "status", "availableReplicas")
	total, _, _ := unstructured.NestedInt64(u.Object, "status", "replicas")
	if observed < gen || updated < want || available < want || total > want {
		return fmt.Sprintf("%d of %d replicas updated and available", min(updated, available), want), nil
	}
	return "", nil
}

func (in *Installer) apiServiceNotReady(ctx context.Context, name string) (string, error) {
	u, err := in.Dynamic.Resource(apiServicesGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	why, found := condition(u, "Available")
	if !found {
		return "no Available condition yet", nil
	}
	return why, nil
}

func (in *Installer) strategyNotReady(ctx context.Context) (string, error) {
	r, err := in.resourceFor(schema.GroupVersionKind{Group: groupsuffix.Group(groupsuffix.Config, in.GroupSuffix), Version: groupsuffix.Version, Kind: "CredentialIssuer"})
	if err != nil {
		return "", err
	}
	u, err := in.Dynamic.Resource(r.gvr).Get(ctx, render.CredentialIssuerName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	strategies, _, _ := unstructured.NestedSlice(u.Object, "status", "strategies")
	if len(strategies) == 0 {
		return "the agent has not reported any strategy yet", nil
	}
	var reasons []string
	for _, s := range strategies {
		m, _ := s.(map[string]any)
		if m["status"] == "Success" {
			return "", nil
		}
		reasons = append(reasons, fmt.Sprintf("%v: %v", m["type"], m["message"]))
	}
	return strings.Join(reasons, "; "), nil
}

// diagnose collects what an admin needs to see when the agent does not come up.
func (in *Installer) diagnose(ctx context.Context, namespace string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var b strings.Builder
	pods, err := in.Dynamic.Resource(podsGVR).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + render.AppName})
	if err == nil {
		if len(pods.Items) == 0 {
			b.WriteString("\n  no agent pods exist (check the Deployment's events and quotas)")
		}
		for _, p := range pods.Items {
			phase, _, _ := unstructured.NestedString(p.Object, "status", "phase")
			fmt.Fprintf(&b, "\n  pod %s: %s%s", p.GetName(), phase, containerStates(&p))
		}
	}
	events, err := in.Dynamic.Resource(eventsGVR).Namespace(namespace).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err == nil {
		items := events.Items
		if len(items) > 8 {
			items = items[len(items)-8:]
		}
		for _, e := range items {
			reason, _, _ := unstructured.NestedString(e.Object, "reason")
			msg, _, _ := unstructured.NestedString(e.Object, "message")
			kind, _, _ := unstructured.NestedString(e.Object, "involvedObject", "kind")
			name, _, _ := unstructured.NestedString(e.Object, "involvedObject", "name")
			fmt.Fprintf(&b, "\n  event %s %s: %s: %s", kind, name, reason, msg)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nWhat the cluster says:" + b.String() + fmt.Sprintf("\nFor more: kubectl -n %s describe pods; kubectl -n %s logs deploy/%s", namespace, namespace, render.AppName)
}

func containerStates(p *unstructured.Unstructured) string {
	statuses, _, _ := unstructured.NestedSlice(p.Object, "status", "containerStatuses")
	var parts []string
	for _, s := range statuses {
		m, _ := s.(map[string]any)
		state, _ := m["state"].(map[string]any)
		for k, v := range state {
			detail, _ := v.(map[string]any)
			if k == "running" {
				if ready, _ := m["ready"].(bool); !ready {
					parts = append(parts, "running, not ready")
				}
				continue
			}
			parts = append(parts, strings.TrimSpace(fmt.Sprintf("%s %v %v", k, detail["reason"], detail["message"])))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
