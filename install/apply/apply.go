package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/pinniped-kit/pinniped/install/render"
)

// FieldManager owns every field install sets, so re-running it upgrades in
// place and fields others own (the agent's caBundle) are left alone.
const FieldManager = "pinniped-install"

// Progress receives what the installer is doing, for a spinner or plain lines.
type Progress interface {
	Step(msg string)
	Done(msg string)
}

// Installer applies, waits for and removes the agent.
type Installer struct {
	Dynamic  dynamic.Interface
	Progress Progress
	// ServerDryRun asks the API server to validate without persisting.
	ServerDryRun bool
	// Poll is the interval between readiness checks.
	Poll time.Duration
	// GroupSuffix is the API group suffix of the install this Installer
	// applies, waits for or removes; empty means the default.
	GroupSuffix string
}

func (in *Installer) client(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	r, err := in.resourceFor(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	return scoped(in.Dynamic, r, u.GetNamespace()), nil
}

// Apply server-side-applies every object, unless another server already
// serves the agent's API groups (CheckOwnership). CRDs go first and must be
// Established before the custom resources that use them.
func (in *Installer) Apply(ctx context.Context, objs []render.Object) error {
	if err := in.CheckOwnership(ctx, objs); err != nil {
		return err
	}
	var crds, rest []render.Object
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	in.Progress.Step(fmt.Sprintf("applying %d CustomResourceDefinitions", len(crds)))
	if err := in.applyAll(ctx, crds); err != nil {
		return err
	}
	if !in.ServerDryRun {
		for _, c := range crds {
			if err := in.waitEstablished(ctx, c.GetName()); err != nil {
				return err
			}
		}
	}
	in.Progress.Done(fmt.Sprintf("%d CustomResourceDefinitions established", len(crds)))
	in.Progress.Step(fmt.Sprintf("applying %d objects", len(rest)))
	if err := in.applyAll(ctx, rest); err != nil {
		return err
	}
	in.Progress.Done(fmt.Sprintf("applied %d objects", len(objs)))
	return nil
}

func (in *Installer) applyAll(ctx context.Context, objs []render.Object) error {
	force := true
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
	if in.ServerDryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		c, err := in.client(o.Unstructured)
		if err != nil {
			return err
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		if _, err := c.Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts); err != nil {
			return fmt.Errorf("apply %s %s: %w", o.GetKind(), qualifiedName(o.Unstructured), explain(err))
		}
	}
	return nil
}

func (in *Installer) waitEstablished(ctx context.Context, name string) error {
	c := in.Dynamic.Resource(resources[crdGVK].gvr)
	return wait.PollUntilContextTimeout(ctx, in.poll(), time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not visible yet; keep polling
		}
		return conditionTrue(u, "Established"), nil
	})
}

func (in *Installer) poll() time.Duration {
	if in.Poll > 0 {
		return in.Poll
	}
	return time.Second
}

func qualifiedName(u *unstructured.Unstructured) string { return joinNS(u.GetNamespace(), u.GetName()) }

// explain adds the next step to errors people commonly hit.
func explain(err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w\nInstalling needs cluster-admin rights (it creates CRDs, ClusterRoles and APIServices)", err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w\nYour kubeconfig's credentials were refused; log in to the cluster first", err)
	}
	return err
}

func conditionTrue(u *unstructured.Unstructured, condType string) bool {
	msg, ok := condition(u, condType)
	return ok && msg == ""
}

// condition reports whether the condition exists and, if it is not True,
// its reason and message.
func condition(u *unstructured.Unstructured, condType string) (notTrueBecause string, found bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != condType {
			continue
		}
		if m["status"] == "True" {
			return "", true
		}
		return strings.TrimSpace(fmt.Sprintf("%v: %v", m["reason"], m["message"])), true
	}
	return "", false
}
