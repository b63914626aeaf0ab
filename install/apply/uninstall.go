package apply

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/install/render"
)

// uninstallOrder deletes custom resources (the agent's kinds, under the
// install's suffix, come first) before their CRDs, and the namespace last
// so nothing inside it is orphaned mid-way.
var uninstallOrder = []schema.GroupVersionKind{
	{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
	{Version: "v1", Kind: "Pod"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "Secret"},
	{Group: "certificates.k8s.io", Version: "v1", Kind: "CertificateSigningRequest"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	{Version: "v1", Kind: "ServiceAccount"},
	crdGVK,
	{Version: "v1", Kind: "Namespace"},
}

// Uninstall deletes, by label, everything install created or the agent made
// (its serving Secret, CSRs, helper pods), plus the leader-election Lease by
// name, and nothing else: not the objects of an install with another API
// group suffix either (see selectorFor).
func (in *Installer) Uninstall(ctx context.Context, namespace string) error {
	// In its own namespace an install's objects are told apart by the
	// namespace alone, so uninstalling with the wrong --namespace (or the
	// wrong --api-group-suffix) would delete the other install's agent.
	if err := in.checkUninstallNamespace(ctx, namespace); err != nil {
		return err
	}
	// Namespaced objects live in the agent's namespace, plus the RBAC
	// bindings install puts in kube-system and kube-public.
	namespaces := []string{namespace, "kube-system", "kube-public"}
	var order []schema.GroupVersionKind
	for _, k := range customKinds {
		order = append(order, schema.GroupVersionKind{Group: groupsuffix.Group(k.prefix, in.GroupSuffix), Version: groupsuffix.Version, Kind: k.kind})
	}
	order = append(order, uninstallOrder...)
	deleted := 0
	nsDeleted := false
	for _, gvk := range order {
		r, err := in.resourceFor(gvk)
		if err != nil {
			return err
		}
		scopes := []string{""}
		if r.namespaced {
			scopes = namespaces
		}
		for _, ns := range scopes {
			c := scoped(in.Dynamic, r, ns)
			list, err := c.List(ctx, metav1.ListOptions{LabelSelector: in.selectorFor(gvk, ns, namespace)})
			if apierrors.IsNotFound(err) {
				continue // e.g. the CRD is already gone
			}
			if err != nil {
				return fmt.Errorf("list %s: %w", r.gvr.Resource, explain(err))
			}
			for _, item := range list.Items {
				if err := c.Delete(ctx, item.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("delete %s %s: %w", gvk.Kind, item.GetName(), explain(err))
				}
				in.Progress.Done(fmt.Sprintf("deleted %s %s", gvk.Kind, joinNS(ns, item.GetName())))
				deleted++
				if gvk.Kind == "Namespace" && item.GetName() == namespace {
					nsDeleted = true
				}
			}
		}
	}
	// client-go's leader election creates the Lease without our labels.
	lease := resources[schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}]
	if err := scoped(in.Dynamic, lease, namespace).Delete(ctx, render.LeaseName, metav1.DeleteOptions{}); err == nil {
		deleted++
	}
	if deleted == 0 {
		in.Progress.Done("nothing to remove: pinniped is not installed in this cluster")
		return nil
	}
	if !nsDeleted {
		// A namespace the administrator made (the Helm chart's own-namespace
		// case) carries no label of ours: it stays, and there is nothing to
		// wait for.
		nsRes := resources[schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}]
		if _, err := in.Dynamic.Resource(nsRes.gvr).Get(ctx, namespace, metav1.GetOptions{}); err == nil {
			in.Progress.Done("namespace " + namespace + " is not the install's: left in place")
		}
		return nil
	}
	// Namespace deletion finishes in the background; wait for it so that
	// "uninstalled" means gone, and an install right after does not meet a
	// terminating namespace.
	in.Progress.Step("waiting for namespace " + namespace + " to be deleted")
	nsRes := resources[schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}]
	err := wait.PollUntilContextTimeout(ctx, in.poll(), 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := in.Dynamic.Resource(nsRes.gvr).Get(ctx, namespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s is still terminating after 3m (kubectl get namespace %s -o yaml shows what holds it): %w", namespace, namespace, err)
	}
	in.Progress.Done("namespace " + namespace + " deleted")
	return nil
}

// checkUninstallNamespace refuses a namespace whose agent was installed
// with another API group suffix than this uninstall's.
func (in *Installer) checkUninstallNamespace(ctx context.Context, namespace string) error {
	deploy := resources[schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}]
	existing, err := scoped(in.Dynamic, deploy, namespace).Get(ctx, render.AppName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return in.checkUninstallCRDs(ctx)
	}
	if err != nil {
		return fmt.Errorf("read Deployment %s/%s: %w", namespace, render.AppName, explain(err))
	}
	if err := helmRelease(existing, fmt.Sprintf("the pinniped agent in namespace %s", namespace), true); err != nil {
		return err
	}
	want := ""
	if !groupsuffix.IsDefault(in.GroupSuffix) {
		want = render.SuffixLabelValue(in.GroupSuffix)
	}
	if theirs := existing.GetLabels()[render.SuffixLabel]; theirs != want {
		return &ErrNamespaceTaken{Namespace: namespace, Label: theirs, Uninstall: true}
	}
	return in.checkUninstallCRDs(ctx)
}

// checkUninstallCRDs refuses when the CRDs of the install's API groups
// belong to a Helm release (the pinniped-crds chart).
func (in *Installer) checkUninstallCRDs(ctx context.Context) error {
	name := "credentialissuers." + groupsuffix.Group(groupsuffix.Config, in.GroupSuffix)
	existing, err := in.Dynamic.Resource(resources[crdGVK].gvr).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read CustomResourceDefinition %s: %w", name, explain(err))
	}
	return helmRelease(existing, "the CustomResourceDefinitions of the agent's API groups", true)
}

// selectorFor selects this install's objects of kind gvk in ns. In the
// install's own namespace, and in its own API groups, everything labelled
// part-of=pinniped is this install's: objects the agent makes there carry
// only that label. Elsewhere (cluster-scoped objects, kube-system,
// kube-public) installs with other suffixes keep objects too, and only
// this install's suffix label (or, for the default, its absence) tells them
// apart.
func (in *Installer) selectorFor(gvk schema.GroupVersionKind, ns, installNamespace string) string {
	own := (ns != "" && ns == installNamespace)
	if _, ok := customResources(in.GroupSuffix)[gvk]; ok {
		own = true
	}
	if own {
		return render.PartOfLabel + "=" + render.PartOfValue
	}
	return render.InstallSelector(in.GroupSuffix)
}

func scoped(d dynamic.Interface, r resource, namespace string) dynamic.ResourceInterface {
	if r.namespaced {
		return d.Resource(r.gvr).Namespace(namespace)
	}
	return d.Resource(r.gvr)
}

func joinNS(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// RemoveKubeCertAgent deletes what an earlier install made for reading the
// signing key (the helper Deployment and the kube-system Role that finds
// kube-controller-manager), for an install that turned it off. It reports
// whether anything was there.
func (in *Installer) RemoveKubeCertAgent(ctx context.Context, namespace string) (bool, error) {
	findKCM := render.Name(in.GroupSuffix, render.FindControllerManagerName)
	removed := false
	for _, o := range []struct {
		gvk             schema.GroupVersionKind
		namespace, name string
	}{
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, namespace, render.KubeCertAgentName},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, "kube-system", findKCM},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, "kube-system", findKCM},
	} {
		err := scoped(in.Dynamic, resources[o.gvk], o.namespace).Delete(ctx, o.name, metav1.DeleteOptions{})
		switch {
		case err == nil:
			removed = true
		case !apierrors.IsNotFound(err):
			return removed, fmt.Errorf("remove %s %s: %w", o.gvk.Kind, joinNS(o.namespace, o.name), explain(err))
		}
	}
	return removed, nil
}
