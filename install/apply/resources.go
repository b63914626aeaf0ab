// Package apply puts rendered objects into a cluster with server-side
// apply, waits until the agent works, and removes everything again. It
// talks to the cluster through client-go's dynamic client: the objects are
// rendered as unstructured, so typed clients would add nothing.
package apply

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
)

// resource says where a kind lives. The set is fixed and small, so a static
// table replaces a discovery round trip.
type resource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

var resources = map[schema.GroupVersionKind]resource{
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}: {gvr: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}},
	{Version: "v1", Kind: "Namespace"}:                                               {gvr: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}},
	{Version: "v1", Kind: "ServiceAccount"}:                                          {gvr: schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, namespaced: true},
	{Version: "v1", Kind: "Service"}:                                                 {gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}, namespaced: true},
	{Version: "v1", Kind: "Secret"}:                                                  {gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, namespaced: true},
	{Version: "v1", Kind: "Pod"}:                                                     {gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, namespaced: true},
	{Group: "apps", Version: "v1", Kind: "Deployment"}:                               {gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, namespaced: true},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}:                    {gvr: schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, namespaced: true},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}:         {gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}:  {gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}:                {gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, namespaced: true},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}:         {gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, namespaced: true},
	{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}:             {gvr: schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}},
	{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}:                     {gvr: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, namespaced: true},
	{Group: "certificates.k8s.io", Version: "v1", Kind: "CertificateSigningRequest"}: {gvr: schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}},
}

// customKinds are the agent's own kinds, in the order uninstall deletes
// them, with their resources; their group depends on the install's suffix.
var customKinds = []struct{ prefix, kind, resource string }{
	{groupsuffix.Authentication, "JWTAuthenticator", "jwtauthenticators"},
	{groupsuffix.Authentication, "WebhookAuthenticator", "webhookauthenticators"},
	{groupsuffix.Config, "CredentialIssuer", "credentialissuers"},
}

// customResources are the agent's kinds under suffix ("" means the default).
func customResources(suffix string) map[schema.GroupVersionKind]resource {
	out := make(map[schema.GroupVersionKind]resource, len(customKinds))
	for _, k := range customKinds {
		g := groupsuffix.Group(k.prefix, suffix)
		out[schema.GroupVersionKind{Group: g, Version: groupsuffix.Version, Kind: k.kind}] = resource{
			gvr: schema.GroupVersionResource{Group: g, Version: groupsuffix.Version, Resource: k.resource}}
	}
	return out
}

// resourceFor maps a built-in kind, or one of the agent's kinds under
// this install's suffix. Another suffix's kinds are not this install's
// business.
func (in *Installer) resourceFor(gvk schema.GroupVersionKind) (resource, error) {
	if r, ok := resources[gvk]; ok {
		return r, nil
	}
	if r, ok := customResources(in.GroupSuffix)[gvk]; ok {
		return r, nil
	}
	return resource{}, fmt.Errorf("no resource mapping for %s (is --api-group-suffix the one the objects were rendered with?)", gvk)
}
