package apply

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pinniped-kit/pinniped/install/render"
)

// ErrServedByAnother means an API group this install would serve is
// already served by another server: upstream Pinniped's Concierge, or our
// agent installed in another namespace. Applying anyway would take the
// group from it, and both would fight over the CRDs.
type ErrServedByAnother struct {
	APIService, Namespace, Service string
	// Ours: the other server is our agent, installed elsewhere.
	Ours bool
}

func (e *ErrServedByAnother) Error() string {
	if e.Ours {
		return fmt.Sprintf("APIService %s is served by a pinniped agent installed in namespace %q; install into that namespace (--namespace=%s) to upgrade it, run pinniped uninstall --namespace=%s first, or give this install its own --api-group-suffix to run beside it",
			e.APIService, e.Namespace, e.Namespace, e.Namespace)
	}
	return fmt.Sprintf("APIService %s is served by %s/%s, which is not a pinniped agent (upstream Pinniped's Concierge?); two servers cannot share an API group: uninstall it first (see docs/migrating-from-upstream.md), or install with --api-group-suffix=<a domain of yours> to run beside it",
		e.APIService, e.Namespace, e.Service)
}

// ErrNamespaceTaken means the namespace already holds our agent installed
// with another API group suffix. Two installs cannot share a namespace:
// their Deployments, Services and Secrets have the same names.
type ErrNamespaceTaken struct {
	Namespace string
	// Label is the other install's suffix label value; empty for the
	// default suffix.
	Label string
	// Uninstall: the refusal is of an uninstall, whose --namespace or
	// --api-group-suffix names another install's.
	Uninstall bool
}

func (e *ErrNamespaceTaken) Error() string {
	other := "the default API group suffix"
	if e.Label != "" {
		other = fmt.Sprintf("another API group suffix (%s=%s)", render.SuffixLabel, e.Label)
	}
	if e.Uninstall {
		return fmt.Sprintf("namespace %q holds a pinniped agent installed with %s, not the one this uninstall names: nothing was removed; pass that install's --namespace and --api-group-suffix together",
			e.Namespace, other)
	}
	return fmt.Sprintf("namespace %q already holds a pinniped agent installed with %s; two installs cannot share a namespace: choose another --namespace for this one",
		e.Namespace, other)
}

// Helm's marks on the objects of a release (helm.sh/helm's action package).
const (
	helmReleaseAnnotation   = "meta.helm.sh/release-name"
	helmNamespaceAnnotation = "meta.helm.sh/release-namespace"
)

// ErrManagedByHelm means the agent (or its CRDs) belongs to a Helm release:
// pinniped install would fight Helm over every field, and pinniped
// uninstall would leave Helm a release of deleted objects.
type ErrManagedByHelm struct {
	What, Release, ReleaseNamespace string
	Uninstall                       bool
}

func (e *ErrManagedByHelm) Error() string {
	if e.Uninstall {
		return fmt.Sprintf("%s belongs to the Helm release %q in namespace %q: nothing was removed; remove it with helm uninstall %s -n %s (the agent's release first, then the CRDs'), see docs/helm.md",
			e.What, e.Release, e.ReleaseNamespace, e.Release, e.ReleaseNamespace)
	}
	return fmt.Sprintf("%s belongs to the Helm release %q in namespace %q: nothing was changed; upgrade it with helm upgrade %s -n %s. To manage it with pinniped install instead, see docs/helm.md (moving from Helm)",
		e.What, e.Release, e.ReleaseNamespace, e.Release, e.ReleaseNamespace)
}

// helmRelease is the release that manages u, if one does.
func helmRelease(u *unstructured.Unstructured, what string, uninstall bool) error {
	a := u.GetAnnotations()
	if a[helmReleaseAnnotation] == "" {
		return nil
	}
	return &ErrManagedByHelm{What: what, Release: a[helmReleaseAnnotation], ReleaseNamespace: a[helmNamespaceAnnotation], Uninstall: uninstall}
}

// CheckOwnership refuses to install over another server's APIServices,
// or into a namespace that holds our agent under another suffix. It only
// reads, so it runs before anything is changed (and in dry runs).
// The namespace comes first, whatever the objects' order: its message
// names the one flag to change.
func (in *Installer) CheckOwnership(ctx context.Context, objs []render.Object) error {
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == render.AppName {
			if err := in.checkNamespace(ctx, o); err != nil {
				return err
			}
		}
	}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		existing, err := in.Dynamic.Resource(resources[crdGVK].gvr).Get(ctx, o.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read CustomResourceDefinition %s: %w", o.GetName(), explain(err))
		}
		if err := helmRelease(existing, "the CustomResourceDefinitions of the agent's API groups", false); err != nil {
			return err
		}
	}
	for _, o := range objs {
		if o.GetKind() != "APIService" {
			continue
		}
		c, err := in.client(o.Unstructured)
		if err != nil {
			return err
		}
		existing, err := c.Get(ctx, o.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read APIService %s: %w", o.GetName(), explain(err))
		}
		wantNS, wantName := service(o.Unstructured)
		ns, name := service(existing)
		if ns == wantNS && name == wantName {
			continue
		}
		return &ErrServedByAnother{APIService: o.GetName(), Namespace: ns, Service: name,
			Ours: existing.GetLabels()["app.kubernetes.io/name"] == render.AppName}
	}
	return nil
}

// checkNamespace refuses when the agent Deployment the install would apply
// exists with another install's suffix label.
func (in *Installer) checkNamespace(ctx context.Context, want render.Object) error {
	c, err := in.client(want.Unstructured)
	if err != nil {
		return err
	}
	existing, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Deployment %s: %w", qualifiedName(want.Unstructured), explain(err))
	}
	if err := helmRelease(existing, fmt.Sprintf("the pinniped agent in namespace %s", want.GetNamespace()), false); err != nil {
		return err
	}
	if theirs := existing.GetLabels()[render.SuffixLabel]; theirs != want.GetLabels()[render.SuffixLabel] {
		return &ErrNamespaceTaken{Namespace: want.GetNamespace(), Label: theirs}
	}
	return nil
}

func service(u *unstructured.Unstructured) (namespace, name string) {
	namespace, _, _ = unstructured.NestedString(u.Object, "spec", "service", "namespace")
	name, _, _ = unstructured.NestedString(u.Object, "spec", "service", "name")
	return namespace, name
}
