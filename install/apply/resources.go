// Package apply puts rendered objects into a cluster with server-side
// apply, waits until the agent works, and removes everything again. It
// talks to the cluster through client-go's dynamic client: the objects are
// rendered as unstructured, so typed clients would add nothing.
package apply

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resource says where a kind lives. The set is fixed and small, so a static
// table replaces a discovery round trip.
type resource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

var resources = map[schema.GroupVersionKind]resource{
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}:                    {gvr: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}},
	{Version: "v1", Kind: "Namespace"}:                                                                  {gvr: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}},
	{Version: "v1", Kind: "ServiceAccount"}:                                                             {gvr: schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, namespaced: true},
	{Version: "v1", Kind: "Service"}:                                                                    {gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}, namespaced: true},
	{Version: "v1", Kind: "Secret"}:                                                                     {gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, namespaced: true},
	{Version: "v1", Kind: "Pod"}:                                                                        {gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, namespaced: true},
	{Group: "apps", Version: "v1", Kind: "Deployment"}:                                                  {gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, namespaced: true},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}:                            {gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}:                     {gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}:                                   {gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, namespaced: true},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}:                            {gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, namespaced: true},
	{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}:                                {gvr: schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}},
	{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}:                                        {gvr: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, namespaced: true},
	{Group: "certificates.k8s.io", Version: "v1", Kind: "CertificateSigningRequest"}:                    {gvr: schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}},
	{Group: "config.concierge.pinniped.dev", Version: "v1alpha1", Kind: "CredentialIssuer"}:             {gvr: schema.GroupVersionResource{Group: "config.concierge.pinniped.dev", Version: "v1alpha1", Resource: "credentialissuers"}},
	{Group: "authentication.concierge.pinniped.dev", Version: "v1alpha1", Kind: "JWTAuthenticator"}:     {gvr: schema.GroupVersionResource{Group: "authentication.concierge.pinniped.dev", Version: "v1alpha1", Resource: "jwtauthenticators"}},
	{Group: "authentication.concierge.pinniped.dev", Version: "v1alpha1", Kind: "WebhookAuthenticator"}: {gvr: schema.GroupVersionResource{Group: "authentication.concierge.pinniped.dev", Version: "v1alpha1", Resource: "webhookauthenticators"}},
}

func resourceFor(gvk schema.GroupVersionKind) (resource, error) {
	r, ok := resources[gvk]
	if !ok {
		return resource{}, fmt.Errorf("no resource mapping for %s", gvk)
	}
	return r, nil
}
